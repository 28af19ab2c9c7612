"""What the LLM reads: the prompt layout in token ids, the question's phrasing and its answer set.
The one place for both the model and the answering pipeline.

Layouts (``TopoRAGConfig.graph_position``)::

    "prefix" (the paper's):   [chat prefix] [graph tokens] context \\n question [chat suffix] (answer <eos>)
    "before_question"         [chat prefix] context \\n | [graph tokens] question [chat suffix] (answer <eos>)
      (cacheable):

``question_first=True`` (beyond the paper, either layout) puts the question once more in front of the
context: ``[chat prefix] question \\n context \\n ...``. A causal LM's context states cannot see a
question that comes after them; read after the question, they are question-aware ("query-aware
contextualization", Liu et al. 2024, *Lost in the Middle*; SceneGraphs attribute questions: 0.553 ->
0.735, the checkpoint's README). In the cacheable layout this is free while training: the frozen part
is cached per example anyway, so it simply starts with the question.

The chat prefix/suffix come from the tokenizer's chat template, or G-Retriever's ``<s>[INST] ...
[/INST]`` layout when it has none. The context must fit ``context_budget(question) = max_input_tokens
- (fixed + soft + question tokens)``; the question is never cut. The answering pipeline fits the
context by prize first (:func:`~toporag_core.retrieval.budget.fit_context`); :meth:`Prompter.context_ids`'
prefix cut is only the last-resort safety net for contexts that come in unfitted (prepared datasets).
In ``"before_question"`` everything left of ``|`` (the *frozen part*) is read by the plain frozen LLM
(LoRA off, no soft token before it), so its key/value cache depends on nothing trainable
(:func:`~toporag_core.model.frozen_kv.context_kv`); the question moves into the *tail*, after the graph
tokens, so LoRA re-reads it with the graph tokens in view while the context stays cached.

What the context says is ``config.reads(context)``: the context as written, or, for a model with
``token_text = "names"``, the context with the attributes of the nodes that have a graph token of their own
taken out (``lamp [6]: brown, glass, small`` -> ``lamp [6]``, by the node's local index, so a context that the
token-budget fit cut still loses exactly those nodes' attributes), so that those attributes reach the LLM through
the graph tokens alone. Every prompt goes through :meth:`Prompter.context_ids`, so training, the key/value
cache, evaluation, the ablation arms, Ask and the app's prompt view all read the same text.
"""
from __future__ import annotations

from typing import Any

from .answer_text import yes_no_choices
from .config import CACHEABLE_POSITIONS, QUESTION_FORMS, TopoRAGConfig

_SPLIT = "\x00TOPORAG_USER\x00"  # placeholder to cut the chat template around the user content


def question_prompt(config: TopoRAGConfig, question: str) -> str:
    """A user's question in the form the checkpoint's training examples used (``config.question_form``,
    a :data:`~toporag_core.model.config.QUESTION_FORMS` entry): ``"Question: ...\\nAnswer:"`` for a
    scene or WebQSP checkpoint (unchanged when already so), the question itself for ``"plain"``."""
    return QUESTION_FORMS[config.question_form](question)


def choices_for(config: TopoRAGConfig, question: str) -> tuple[str, ...] | None:
    """The closed answer set of ``question``: the checkpoint's ``answer_set`` (ExplaGraphs:
    support/counter), else ``("yes", "no")`` for a polar question (scenes, WebQSP), else ``None``
    (an open question: greedy generation). The one rule ``toporag ask``, ``toporag eval``, the
    pipeline and the app share."""
    return tuple(config.answer_set) or yes_no_choices(question)


class Prompter:
    """Token ids of one model's prompts (its tokenizer and config): the fixed pieces, one example's
    row, the context budget, and what the app shows of a prompt. Tokenisations are memoised (epochs
    re-read the same texts)."""

    def __init__(self, config: TopoRAGConfig, tokenizer) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self._cache: dict[str, tuple[int, ...]] = {}
        self.pieces = self._pieces()

    def ids(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens), memoised."""
        if not text:
            return []
        ids = self._cache.get(text)
        if ids is None:
            ids = tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            if len(self._cache) < 200_000:
                self._cache[text] = ids
        return list(ids)

    def _pieces(self) -> dict[str, list[int]]:
        """Token ids of the fixed text before and after the user content, and of the answer's end."""
        tok = self.tokenizer
        eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
        if getattr(tok, "chat_template", None):
            msgs = [{"role": "user", "content": _SPLIT}]
            if self.config.system_prompt is not None:
                msgs.insert(0, {"role": "system", "content": self.config.system_prompt})
            text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            pre, post = text.split(_SPLIT)
            # The template writes BOS as text when it has one; tokenising it gives the special id.
            return {"pre": self.ids(pre), "post": self.ids(post), "sep": self.ids("\n"), "eos": eos}
        bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
        return {"pre": bos + self.ids("[INST]"), "post": self.ids("[/INST]"), "sep": self.ids("\n"), "eos": eos}

    def answer_ids(self, answer: str) -> list[int]:
        """The label tokens of one answer: its ids cut at ``max_new_tokens``, then EOS."""
        return self.ids(answer)[: self.config.max_new_tokens] + list(self.pieces["eos"])

    def num_soft_tokens(self) -> int:
        """Soft (non-text) input positions per example: the graph tokens."""
        return self.config.soft_tokens

    def context_budget(self, question: str) -> int:
        """Context tokens that fit beside ``question``: ``max_input_tokens`` minus the chat prefix,
        soft tokens, separator, question (twice, with its separator, when ``question_first``) and
        chat suffix (never negative)."""
        lay = self.pieces
        n_q = len(self.ids(question))
        fixed = len(lay["pre"]) + self.num_soft_tokens() + len(lay["sep"]) + n_q + len(lay["post"])
        if self.config.question_first:  # read twice: before the context and at its usual place
            fixed += n_q + len(lay["sep"])
        return max(0, self.config.max_input_tokens - fixed)

    def context_ids(self, context: str, question: str) -> tuple[list[int], list[int]]:
        """``(context ids, question ids)``; the question is never cut. A context longer than
        :meth:`context_budget` is cut by prefix here - the last-resort safety net."""
        return self.ids(self.config.reads(context))[:self.context_budget(question)], self.ids(question)

    def row(self, context: str, question: str) -> tuple[list[int], list[int], list[int]]:
        """``(frozen ids, tail ids before the soft tokens, tail ids after them)`` of one example."""
        lay = self.pieces
        c, q = self.context_ids(context, question)
        if self.config.question_first:  # the context is read knowing the question
            c = q + lay["sep"] + c
        if self.config.graph_position == "before_question":
            return lay["pre"] + c + lay["sep"], [], q + lay["post"]
        return [], lay["pre"], c + lay["sep"] + q + lay["post"]

    def frozen_ids(self, context: str, question: str) -> list[int]:
        """Token ids of the frozen part (what :func:`~toporag_core.model.frozen_kv.context_kv` caches) of one
        example; ``ValueError`` in a layout without one."""
        if self.config.graph_position not in CACHEABLE_POSITIONS:
            raise ValueError(f"frozen_ids: graph_position {self.config.graph_position!r} has no frozen part "
                             f"(cacheable layouts: {', '.join(CACHEABLE_POSITIONS)})")
        return self.row(context, question)[0]

    def layout(self, context: str, question: str) -> dict[str, Any]:
        """What the LLM actually reads for one example (for the app's prompt view)."""
        c, _ = self.context_ids(context, question)
        read = self.ids(self.config.reads(context))
        lay, dec = self.pieces, self.tokenizer.decode
        return {"soft_tokens": self.num_soft_tokens(), "graph_tokens": self.num_soft_tokens(),
                "graph_position": self.config.graph_position, "question_first": self.config.question_first,
                "prefix": dec(lay["pre"]), "context": dec(c), "context_truncated": len(c) < len(read),
                "question": question, "suffix": dec(lay["post"]),
                "input_tokens": sum(map(len, self.row(context, question))) + self.num_soft_tokens()}
