"""The largest feasible prefix of a ranked candidate list, by binary or linear search.

The traversal fuses the largest prefix ``K[:m]`` of the kept children, and grafts the largest
prefix of the graft candidates, whose deformation keeps ``FGW <= epsilon``. Feasibility is
``feasible(m)`` for ``m in lo..k`` with ``lo`` feasible by assumption; ``binary`` needs
``ceil(log2(k - lo + 1))`` calls at most and equals ``linear`` (scan upwards, stop at the first
failure) whenever feasibility is monotone in ``m``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


def prefix_search(k: int, lo: int, make: Callable[[int], Any], check: Callable[[int, Any], tuple[bool, Any]],
                   method: str) -> tuple[int, dict[int, tuple[Any, Any]]]:
    """:func:`largest_feasible_prefix` over candidates ``make(m)`` judged by ``check(m, candidate)``;
    returns the size and every ``(candidate, FGW result)`` tried, by size."""
    tried: dict[int, tuple[Any, Any]] = {}

    def feasible(m: int) -> bool:
        cand = make(m)
        ok, res = check(m, cand)
        tried[m] = (cand, res)
        return ok

    return largest_feasible_prefix(k, feasible, lo=lo, method=method), tried


def largest_feasible_prefix(k: int, feasible: Callable[[int], bool], lo: int = 0,
                            method: str = "binary") -> int:
    """Largest ``m in lo..k`` with ``feasible(m)``, ``lo`` being feasible by assumption.

    ``binary``: ``ceil(log2(k - lo + 1))`` calls at most; equal to ``linear`` (scan upwards,
    stop at the first failure) whenever feasibility is monotone in ``m``.
    """
    if method == "linear":
        best = lo
        for m in range(lo + 1, k + 1):
            if not feasible(m):
                break
            best = m
        return best
    a, b = lo, k
    while a < b:
        mid = (a + b + 1) // 2
        if feasible(mid):
            a = mid
        else:
            b = mid - 1
    return a
