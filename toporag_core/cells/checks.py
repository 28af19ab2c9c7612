"""Request validation shared by the CLI and the core service: one set of rules for the values a user gives.

The CLI (``toporag ask`` / ``retrieve``) and ``toporag serve`` used to check the same inputs
differently (the service took ``k: true`` as 1 and ``"3"`` as 3, empty node texts, no ``rings``; the
CLI took a whitespace-only question). Here each rule is written once and says which field broke it:

* **texts** (questions, node and relation texts) are strings, non-empty after stripping, valid
  Unicode (no lone surrogate, no NUL) and within a length limit (:func:`check_text`);
* **whole numbers** are ``int`` and never ``bool`` or a numeric string (:func:`check_int`);
* **liftings** are :data:`LIFTINGS` (the spanning trees and ``rings``; :func:`check_lifting`);
* **seeds** are whole numbers in ``0..2**32 - 1`` (:func:`check_seed`);
* **a record index** is within the file's records (:func:`check_record`).

Every failure is an :class:`InputError`: a ``ValueError`` with the ``field`` it names and a
``status`` (422 invalid, 413 too large) the service answers with; the CLI prints its message.
The lifting names are the liftings registry's (:data:`toporag_core.cells.lift.LIFTINGS`), never a copy.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..graph import check_text as _cell_text_problem
from .lift import LIFTINGS
MAX_SEED = 2 ** 32 - 1


class InputError(ValueError):
    """A value a user gave that breaks a rule: ``field`` (``"graph.nodes[3]"``, ``"--record"``), the
    message (which starts with the field), and ``status`` (422, or 413 for a limit)."""

    def __init__(self, field: str, problem: str, status: int = 422) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.problem, self.status = field, problem, status


def check_text(value: Any, field: str, max_chars: int | None = None) -> str:
    """``value`` if it is a non-empty (not all-space) string of valid Unicode within ``max_chars``."""
    if not isinstance(value, str):
        raise InputError(field, f"expected a string, got {type(value).__name__}")
    if max_chars is not None and len(value) > max_chars:
        raise InputError(field, f"{len(value)} characters, the limit is {max_chars}", 413)
    if not value.strip():
        raise InputError(field, "must be a non-empty string (not empty or only spaces)")
    problem = _cell_text_problem(value, max_chars=len(value))  # NUL, lone surrogate
    if problem is not None:
        raise InputError(field, problem)
    return value


def check_int(value: Any, field: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` if it is a whole number (``int``, not ``bool``, not a string) in ``minimum..maximum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(field, f"expected a whole number, got {type(value).__name__} {value!r}"[:200])
    if minimum is not None and value < minimum:
        raise InputError(field, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InputError(field, f"must be <= {maximum}, got {value}")
    return value


def check_optional_int(value: Any, field: str, minimum: int | None = None, maximum: int | None = None) -> int | None:
    """``None``, or :func:`check_int`."""
    return None if value is None else check_int(value, field, minimum, maximum)


def check_lifting(value: Any, field: str = "tree") -> str:
    """``value`` if it is one of :data:`LIFTINGS`."""
    if not isinstance(value, str) or value not in LIFTINGS:
        raise InputError(field, f"must be one of {', '.join(LIFTINGS)}, got {value!r}"[:200])
    return value


def check_seed(value: Any, field: str = "seed") -> int:
    """A seed of the random spanning tree: a whole number in ``0..2**32 - 1``."""
    return check_int(value, field, 0, MAX_SEED)


def check_record(record: int | str, labels: Sequence[str], field: str = "--record") -> int | str:
    """A record of a file with records ``labels`` (``[]``: a single-record file, where no record can
    be chosen): an index in range, or a record's label/id."""
    if not labels:
        raise InputError(field, f"{record!r}: this file holds one graph, not several records "
                                "(leave --record out)")
    if isinstance(record, int) and not isinstance(record, bool):
        if not 0 <= record < len(labels):
            raise InputError(field, f"{record} is out of range: the file has {len(labels)} records "
                                    f"(0..{len(labels) - 1})")
    return record
