"""What defines a TopoRAG model: :class:`TopoRAGConfig` (saved as ``config.json`` next to the weights),
its validation, and the question forms a checkpoint's training examples used.

Retired options (losing experiments, removed with their code): ``graph_norm`` (ActNorm on the pooled
graph), ``graph_label_weight`` (an auxiliary label head on the pooled graph), ``mode="prompt_tuning"``
with ``num_virtual_tokens``, ``graph_position="suffix"`` and ``answer_style="cited-loops"``. A saved
config may still hold a retired key at its old default value (the shipped checkpoints do); any other
value is refused by :meth:`TopoRAGConfig.from_dict` with a ``ValueError`` that names the key.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

from ..nn import ENCODERS, CWNConfig, encoder_names
from .styles import ANSWER_STYLES

MODES = ("soft_prompt", "lora")
GRAPH_POSITIONS = ("prefix", "before_question")
# How the encoder's view becomes soft tokens (model/graph_tokens.py): "pooled" (one mean vector spread over
# T tokens by an MLP, G-Retriever's; the shipped checkpoints before the cell path) | "cells" (one token per
# retrieved cell in text order plus a whole-subcomplex slot)
GRAPH_PATHS = ("pooled", "cells")
# What the text keeps of the nodes that have graph tokens of their own (graph_path="cells", nodes first):
# "full" (every line as written) | "names" (their compact node lines lose their attributes, ``lamp [6]``: the LLM
# reads those from the graph tokens; retrieval/textualize.py names_only)
TOKEN_TEXTS = ("full", "names", "relations")
# token_text -> (the rank whose slots carry what leaves the text, what leaves it, the text format it is written in)
TOKEN_TEXT_CELLS = {"names": (0, "node attributes", "compact"), "relations": (1, "relations", "csv")}
CACHEABLE_POSITIONS = ("before_question",)  # layouts with a frozen, cacheable part

# Retired config keys -> the only value a saved config may still hold (their old default).
RETIRED_KEYS: dict[str, Any] = {"graph_norm": False, "graph_label_weight": 0.0, "num_virtual_tokens": 10}
# Retired values of live keys.
RETIRED_VALUES: dict[str, tuple[str, ...]] = {"mode": ("prompt_tuning",), "graph_position": ("suffix",),
                                              "answer_style": ("cited-loops",)}


def graphqa_prompt(question: str) -> str:
    """GraphQA's prompt form, ``"Question: <question>\nAnswer:"`` (scene and WebQSP examples); a question
    already in that form is returned unchanged (idempotent, so training data and a user's question agree)."""
    return question if str(question).lstrip().startswith("Question:") else f"Question: {question}\nAnswer:"


# How a checkpoint's training examples phrased a question (``TopoRAGConfig.question_form``): applied to a
# user's question at answer time, so the LLM reads the form it was trained on (a scene checkpoint answered a
# bare "What is behind the stone table?" with "no" and its trained form with "dresser"). Tasks name theirs
# in the task registry (``Task(prompt=...)``); training copies it into the config.
QUESTION_FORMS: dict[str, Callable[[str], str]] = {"plain": lambda q: q, "graphqa": graphqa_prompt}


def _retired(key: str, value: Any, old: str = "") -> ValueError:
    return ValueError(f"TopoRAGConfig.{key}={value!r}: this option was retired (a losing experiment, removed "
                      f"with its code){old}")


def _choose(key: str, value: Any, allowed) -> None:
    """``ValueError`` unless ``value`` is one of ``allowed`` (a retired value says so)."""
    if value in RETIRED_VALUES.get(key, ()):
        raise _retired(key, value)
    if value not in allowed:
        raise ValueError(f"TopoRAGConfig.{key}: unknown {value!r}; choose one of {tuple(allowed)}")


@dataclass
class TopoRAGConfig:
    """Everything that defines a TopoRAG model (``to_dict``/``from_dict`` for ``config.json``)."""

    encoder: str = "cwn"  # an nn.ENCODERS name: "cwn" | "gcn" ("w/o MTR"); cwn.use_cells2=False is "w/o CRL"
    cwn: CWNConfig = field(default_factory=CWNConfig)
    use_graph: bool = True  # False: no encoder / soft prompt at all (the frozen-LLM baseline)
    num_graph_tokens: int = 1
    graph_path: str = "pooled"  # a GRAPH_PATHS name; "cells" needs the cwn encoder and >= 2 graph tokens
    # graph_path="cells": the ranks in the order they fill the T - 1 cell slots when a subcomplex has more cells
    # (1, 2, 0: relations first, ExplaGraphs' stance; scenes put 0-cells first, where the attributes live)
    cell_order: tuple[int, ...] = (1, 2, 0)
    # graph_path="cells": soft tokens per slot (k); the LLM reads T * k graph tokens (model/graph_tokens.py)
    tokens_per_cell: int = 1
    # graph_path="cells": a TOKEN_TEXTS name. "names" (nodes first) drops the attributes of the node lines whose
    # nodes have a slot of their own (local index below cell_slots); "relations" (relations first, CSV text) the
    # relation of the first cell_slots 1-cells (``0,?,2``): the graph tokens carry them
    token_text: str = "full"
    projector_hidden: int = 1024  # G-Retriever: Linear(d, 2048) -> Sigmoid -> Linear(2048, H) for 7B
    llm: str = "smollm2-135m-instruct"
    mode: str = "soft_prompt"  # "soft_prompt" (graph tokens only) | "lora" (plus LoRA adapters)
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    max_input_tokens: int = 512
    max_new_tokens: int = 32
    system_prompt: str | None = None  # None: the chat template's own default
    graph_position: str = "prefix"  # "prefix" (paper) | "before_question" (cached frozen context)
    question_first: bool = False  # the question also before the context (query-aware context; beyond the paper)
    answer_set: tuple[str, ...] = ()  # closed answer set trained on (answer() scores these); () = open answers
    answer_style: str = "label"  # an ANSWER_STYLES name (model/styles.py): "label" | "evidence" | "cited"
    question_form: str = "plain"  # a QUESTION_FORMS name: how training phrased questions (applied to users')

    def __post_init__(self) -> None:
        if isinstance(self.cwn, dict):
            self.cwn = CWNConfig.from_dict(self.cwn)
        self.lora_targets = tuple(self.lora_targets)
        self.cell_order = tuple(int(r) for r in self.cell_order)
        self.answer_set = tuple(str(a) for a in self.answer_set)
        _choose("mode", self.mode, MODES)
        _choose("graph_position", self.graph_position, GRAPH_POSITIONS)
        _choose("answer_style", self.answer_style, ANSWER_STYLES)
        _choose("question_form", self.question_form, sorted(QUESTION_FORMS))
        _choose("graph_path", self.graph_path, GRAPH_PATHS)
        _choose("token_text", self.token_text, TOKEN_TEXTS)
        _choose("encoder", self.encoder, ENCODERS)
        if self.graph_path == "cells" and self.use_graph:
            if not ENCODERS[self.encoder].cell_states:
                with_states = " or ".join(repr(n) for n in encoder_names(cell_states=True))
                raise ValueError(f"TopoRAGConfig.graph_path='cells' needs per-cell states: encoder {with_states}, "
                                 f"got {self.encoder!r} (use graph_path='pooled')")
            if self.num_graph_tokens < 2:
                raise ValueError("TopoRAGConfig.graph_path='cells' needs num_graph_tokens >= 2 (a whole-subcomplex "
                                 f"slot and at least one cell), got {self.num_graph_tokens}")
        if sorted(self.cell_order) != [0, 1, 2]:
            raise ValueError(f"TopoRAGConfig.cell_order: the ranks 0, 1, 2 once each, got {list(self.cell_order)}")
        if self.token_text != "full":
            rank, what, _ = TOKEN_TEXT_CELLS[self.token_text]
            if not (self.use_graph and self.graph_path == "cells" and self.cell_order[0] == rank):
                first = "nodes" if rank == 0 else "relations"
                raise ValueError(f"TopoRAGConfig.token_text={self.token_text!r} moves {what} from the text into their "
                                 f"cells' graph tokens: it needs use_graph, graph_path='cells' and cell_order starting "
                                 f"with {rank} ({first} first), got use_graph={self.use_graph}, "
                                 f"graph_path={self.graph_path!r}, cell_order={list(self.cell_order)}")
        if self.tokens_per_cell != 1 and self.graph_path != "cells":
            raise ValueError(f"TopoRAGConfig.tokens_per_cell={self.tokens_per_cell} needs graph_path='cells' "
                             f"(the pooled path has no cell slots)")
        for name in ("num_graph_tokens", "max_new_tokens", "tokens_per_cell"):
            if getattr(self, name) < 1:
                raise ValueError(f"TopoRAGConfig.{name}: must be >= 1, got {getattr(self, name)}")
        if len(set(self.answer_set)) != len(self.answer_set) or any(not a.strip() for a in self.answer_set):
            raise ValueError(f"TopoRAGConfig.answer_set: needs distinct non-empty answers, got {self.answer_set}")

    @property
    def soft_tokens(self) -> int:
        """Graph token positions the LLM reads per example: ``num_graph_tokens * tokens_per_cell``."""
        return self.num_graph_tokens * self.tokens_per_cell if self.use_graph else 0

    @property
    def cell_slots(self) -> int:
        """Slots for retrieved cells (``graph_path="cells"``): ``num_graph_tokens - 1`` (slot 0 is the whole
        subcomplex's); with nodes first, the nodes of local index below it have a slot of their own."""
        return max(1, self.num_graph_tokens - 1)

    @property
    def token_rank(self) -> int:
        """The rank whose slots carry what the text leaves out (:data:`TOKEN_TEXT_CELLS`): 1-cells under
        ``token_text = "relations"``, else nodes (also for ``"full"``: the node lines are the readback target)."""
        return TOKEN_TEXT_CELLS[self.token_text][0] if self.token_text in TOKEN_TEXT_CELLS else 0

    def reads(self, context: str) -> str:
        """The context as the LLM reads it: unchanged for ``token_text="full"``; for ``"names"`` the compact node
        lines of the nodes that have a slot (local index below :attr:`cell_slots`) keep their name and index only;
        for ``"relations"`` the CSV relation lines of the first :attr:`cell_slots` 1-cells lose their relation
        (``0,?,2``). What left the text is in the graph tokens."""
        if self.token_text == "full" or not context:
            return context
        from ..retrieval.textualize import names_only, relations_hidden

        if self.token_text == "relations":
            return relations_hidden(context, self.cell_slots)
        return names_only(context, self.cell_slots)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cwn"] = self.cwn.to_dict()
        d["lora_targets"] = list(self.lora_targets)
        d["cell_order"] = list(self.cell_order)
        d["answer_set"] = list(self.answer_set)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TopoRAGConfig:
        """The config of a saved ``config.json``: unknown keys are refused; a retired key is accepted at
        its old default value only (:data:`RETIRED_KEYS`), another value raises naming the key."""
        d = dict(d)
        for key, default in RETIRED_KEYS.items():
            value = d.pop(key, default)
            if value != default:
                raise _retired(key, value, f"; only its old default {default!r} loads")
        extra = set(d) - {f.name for f in fields(cls)}
        if extra:
            raise ValueError(f"TopoRAGConfig: unknown keys {sorted(extra)}")
        return cls(**d)
