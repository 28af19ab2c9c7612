"""Load once, answer many: the object the app and ``toporag ask`` hold.

>>> pipe = TopoRAGPipeline.load()                  # committed ExplaGraphs checkpoint, packaged LLM
>>> ecx = pipe.prepare(graph)                        # lift + embed once per graph
>>> out = pipe.answer(ecx, "Do argument 1 and ...?", pipe.default_setting(k=3))
>>> out["answer"], out["subcomplex"], out["timings"]

Retrieval settings are :class:`~toporag_core.retrieval.RetrievalSetting` objects;
:meth:`TopoRAGPipeline.default_setting` gives the one the checkpoint was trained with (with
overrides on top), and a checkpoint without 2-cells ("w/o CRL") retrieves with ``k2 = 0``.

Context budget: the textualized subcomplex is fitted to the model's input limit *by prize*
(:meth:`TopoRAGPipeline.fit_context`, :func:`~toporag_core.retrieval.budget.fit_context`): a cut
keeps the 2-cells and the highest-prize cells, and the answer says what was dropped (``"context_fit"``,
and ``prompt["context_cut"]``). The model's prefix cut stays as the last-resort safety net only.

Thread-safe for a Streamlit server: retrieval runs concurrently (numpy; the sentence encoder has
its own lock), the neural part (encoder, projector, LLM) runs under one lock, so two visitors
asking at once each get their own, correct answer.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from ..model import FrozenKVStore, QABatch, TopoRAGConfig, TopoRAGModel, choices_for, question_prompt
from ..nn import collate, subcomplex_tensors
from ..predictions.calibrate import context_check, is_low, threshold_for
from ..retrieval import EmbeddedComplex, RetrievalSetting, Subcomplex, retrieve
from ..retrieval.budget import ContextFit, fit_context
from ..retrieval.candidates import answer_candidates, candidate_priors, topic_nodes
from ..retrieval.textualize import DEFAULT_TEXT, check_text_format
from .answer import Answer

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CHECKPOINT = REPO_ROOT / "assets" / "checkpoints" / "expla_graphs"


@dataclass
class DecodeJob:
    """One retrieved subcomplex to answer: what :meth:`TopoRAGPipeline.decode` needs per row."""

    sub: Subcomplex
    ecx: EmbeddedComplex
    question: str
    context: str
    choices: tuple[str, ...] | None = None  # a closed answer set (label scoring), or None (open answer)
    names: tuple[str, ...] | None = None  # an open answer read from these candidate names (entity reader)
    priors: tuple[float, ...] | None = None  # the retrieval's score of each name (added x path_weight)
    fit: ContextFit | None = None  # the context's fit to the token budget (what a cut dropped)
    setting: RetrievalSetting | None = None  # the setting it was retrieved with
    query: str | None = None  # the text retrieval read (the user's words)
    retrieve_s: float = 0.0  # seconds of retrieval and context fitting


class EncoderMismatch(ValueError):
    """The graph's cell embeddings have another width than the checkpoint's encoder reads."""


def topic_names(sub: Subcomplex, question: str) -> list[str]:
    """The names of the topic entities (the nodes the question names) of a retrieval."""
    text = sub.complex.graph.node_text
    return [text[i] for i in topic_nodes(sub, question).tolist()]


class TopoRAGPipeline:
    """A trained (or frozen-only) model plus the sentence encoder used for retrieval."""

    def __init__(self, model: TopoRAGModel, encoder=None, checkpoint: str | None = None,
                 meta: dict[str, Any] | None = None) -> None:
        self.model = model.eval()
        self._encoder = encoder
        self.checkpoint = checkpoint
        self.meta = meta or {}
        self._lock = threading.Lock()
        self._enc_lock = threading.Lock()
        # Frozen-part caches reused across decode() calls (cacheable layouts; the core service sets one)
        self.kv_store: FrozenKVStore | None = None
        self.reader_override: str | None = None  # "names" | "generate": overrides the checkpoint's reader

    # -- construction ---------------------------------------------------------------
    @classmethod
    def load(cls, checkpoint_dir: str | os.PathLike | None = None, llm: str | None = None,
             device: str = "auto", encoder=None, dtype: str | None = "auto") -> "TopoRAGPipeline":
        """``checkpoint_dir=None``: the committed ExplaGraphs checkpoint when present, else the frozen
        LLM alone (no soft prompt). ``llm``: override the checkpoint's LLM (folder or hub id)."""
        import json

        from ..model.llm import checkpoint_llm_dtype, load_llm

        folder = Path(checkpoint_dir) if checkpoint_dir is not None else (
            DEFAULT_CHECKPOINT if (DEFAULT_CHECKPOINT / "config.json").is_file() else None)
        if folder is None:
            return cls.text_only(llm, device=device, dtype=dtype, encoder=encoder)
        meta = json.loads((folder / "config.json").read_text())
        try:  # a bad text format fails here, before minutes of LLM loading, naming the file
            check_text_format(str((meta.get("retrieval") or {}).get("text", DEFAULT_TEXT)))
        except ValueError as err:
            raise ValueError(f"{folder / 'config.json'}: retrieval.text: {err}") from None
        model_llm, tok = load_llm(llm or meta["config"]["llm"], device=device, dtype=dtype,
                                  trained_dtype=checkpoint_llm_dtype(meta))
        model = TopoRAGModel.load(folder, llm=model_llm, tokenizer=tok, device=device)
        return cls(model, encoder, str(folder), meta)

    @classmethod
    def text_only(cls, llm: str | None = None, device: str = "auto", dtype: str | None = "auto", model=None,
                  tokenizer=None, encoder=None, **config) -> "TopoRAGPipeline":
        """The frozen LLM alone, no soft prompt and no checkpoint: it reads a context *text* and a
        question (prompt ``[chat prefix] context \\n question [chat suffix]``, the context truncated
        to ``max_input_tokens``, the question never). The project's one text-only answering path
        (``load`` without a checkpoint, the hybrid and document-graph systems); answer with
        :meth:`answer_texts`.

        Args:
            llm: name or folder for :func:`~toporag_core.model.llm.load_llm` (default: the packaged LLM);
                ignored when ``model`` (a causal LM) and its ``tokenizer`` are given.
            config: :class:`~toporag_core.model.TopoRAGConfig` fields (``max_new_tokens``,
                ``max_input_tokens``, ...); ``use_graph`` is always ``False``.
        """
        if model is None:
            from ..model.llm import load_llm

            model, tokenizer = load_llm(llm, device=device, dtype=dtype)
        config.pop("use_graph", None)
        return cls(TopoRAGModel(TopoRAGConfig(use_graph=False, **config), model, tokenizer), encoder, None, {})

    @property
    def tokenizer(self):
        """The LLM's tokenizer (counts context tokens the way the LLM reads them)."""
        return self.model.tokenizer

    def answer_texts(self, questions: Sequence[str], contexts: Sequence[str], max_new_tokens: int | None = None,
                     batch_size: int = 8) -> list[str]:
        """Greedy open answers of a text-only pipeline (:meth:`text_only`) for context texts, no
        retrieval; ``batch_size`` rows per decoding pass, under :attr:`lock`. Left padding, so a
        row's answer does not depend on its batch."""
        if self.model.config.use_graph:
            raise ValueError("answer_texts needs a text-only pipeline (TopoRAGPipeline.text_only); "
                             "this one reads a retrieved subcomplex: use answer()")
        if len(questions) != len(contexts):
            raise ValueError(f"questions ({len(questions)}) and contexts ({len(contexts)}) differ in number")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        out: list[str] = []
        with self._lock, torch.no_grad():
            for i in range(0, len(questions), batch_size):
                batch = QABatch(cells=None, questions=list(questions[i:i + batch_size]),
                                contexts=[c or "" for c in contexts[i:i + batch_size]])
                out += self.model.generate(batch, max_new_tokens=max_new_tokens)
        return out

    @property
    def encoder(self):
        """The sentence encoder (created on first use by :func:`~toporag_core.embed.get_encoder`:
        ``$TOPORAG_ENCODER``, else the packaged MiniLM, behind the embedding cache)."""
        with self._enc_lock:
            if self._encoder is None:
                from ..embed import get_encoder

                self._encoder = get_encoder()
            return self._encoder

    @property
    def lock(self) -> threading.Lock:
        """The lock the neural part runs under: hold it to use :attr:`model` directly from several threads."""
        return self._lock

    @property
    def reader(self) -> str:
        """How open questions are answered: ``"names"`` (scored from the candidate names of the retrieved
        nodes, :func:`~toporag_core.retrieval.candidates.answer_candidates`) when the checkpoint's
        ``config.json`` says ``"reader": {"open": "names"}``, else ``"generate"`` (greedy decoding);
        :attr:`reader_override` wins when set."""
        if self.reader_override:
            return self.reader_override
        return str((self.meta.get("reader") or {}).get("open", "generate"))

    @property
    def list_ratio(self) -> float:
        """A name joins a list answer when its probability is at least this share of the best name's
        (``config.json`` ``"reader": {"list_ratio": ...}``, fitted on the validation split; default 0.5)."""
        return float((self.meta.get("reader") or {}).get("list_ratio", 0.5))

    @property
    def path_weight(self) -> float:
        """Weight of the retrieval's path score of a candidate name beside the model's log-likelihood in the
        name reader (``config.json`` ``"reader": {"path_weight": ...}``, fitted on the validation split;
        default 0: the model alone)."""
        return float((self.meta.get("reader") or {}).get("path_weight", 0.0))

    @property
    def match_weight(self) -> float:
        """Weight of a candidate's relation-path match (the cosine of the question with the relations that
        lead to it) inside its retrieval score (``config.json`` ``"reader": {"match_weight": ...}``, fitted on
        the validation split; default 0: the path score alone)."""
        return float((self.meta.get("reader") or {}).get("match_weight", 0.0))

    def confidence_threshold(self, kind: str | None = None) -> float | None:
        """The calibrated probability threshold of answers of ``kind`` (``"label"``: a closed label set,
        ``"names"``: the name reader, ``"generated"``: greedy generation): ``config.json``
        ``"confidence": {"threshold": {kind: t, ...}}`` as ``benchmarks/bench_confidence.py --write`` fits
        it on the validation split (the largest ``t`` below which at most 25% of right answers fall); a
        single number applies to every kind; ``None`` when the checkpoint has none for ``kind``
        (:func:`~toporag_core.predictions.calibrate.threshold_for`)."""
        return threshold_for(self.meta.get("confidence"), kind)

    def confidence_of(self, probability: float | None, kind: str | None = None,
                      unsupported: list[str] | None = None) -> dict[str, Any]:
        """``{"confidence", "low_confidence"}`` of an answer's probability: low below the checkpoint's
        calibrated threshold for answers of ``kind`` (:meth:`confidence_threshold`), or, for a kind the
        checkpoint checks (``"evidence_check"``: the kinds whose threshold was fitted beside the check), when
        ``unsupported`` (the claims of its evidence its context does not hold,
        :func:`~toporag_core.retrieval.claims.unsupported_claims`) is not empty
        (:func:`~toporag_core.predictions.calibrate.is_low`, the rule ``toporag eval`` records use too);
        ``None`` when there is no probability (``confidence`` too) or no threshold for the kind."""
        if probability is None:
            return {"confidence": None, "low_confidence": None}
        return {"confidence": float(probability),
                "low_confidence": is_low(self.meta.get("confidence"), kind, float(probability), unsupported)}

    @property
    def use_cells2(self) -> bool:
        return bool(self.model.config.cwn.use_cells2) if self.model.config.use_graph else True

    @property
    def text_format(self) -> str:
        """How the checkpoint reads a subcomplex (:data:`~toporag_core.retrieval.TEXT_FORMATS`; its saved
        retrieval setting's ``text``, ``"csv"`` for a checkpoint saved before text formats existed)."""
        return str((self.meta.get("retrieval") or {}).get("text", DEFAULT_TEXT))

    def default_setting(self, method: str | None = None, k: int | None = None, **params) -> RetrievalSetting:
        """The retrieval setting the checkpoint was trained with (the method defaults without a
        checkpoint), with ``method`` / ``k`` / parameters given here on top (``None`` = keep)."""
        return RetrievalSetting.from_dict(self.meta.get("retrieval"), method=method, k=k, **params)

    def describe(self) -> dict[str, Any]:
        """Checkpoint, LLM, device, mode: what the app shows next to the model picker."""
        cfg = self.model.config
        return {"checkpoint": self.checkpoint, "llm": cfg.llm, "device": str(self.model.device),
                "dtype": str(self.model.dtype).replace("torch.", ""), "mode": cfg.mode if cfg.use_graph else
                "frozen LLM (no soft prompt)", "encoder": cfg.encoder if cfg.use_graph else None,
                "trainable_params": self.model.num_trainable()}

    def prepare(self, graph, tree: str = "bfs") -> EmbeddedComplex:
        """Lift and embed a :class:`~toporag_core.graph.TextualGraph` (do it once per graph)."""
        return EmbeddedComplex.from_graph(graph, self.encoder, tree=tree)

    # -- answering ------------------------------------------------------------------
    def fit_context(self, sub: Subcomplex, question: str) -> ContextFit:
        """The textualized ``sub`` (2-cells when the checkpoint reads them) fitted to the tokens left
        beside ``question`` (:meth:`~toporag_core.model.Prompter.context_budget`), by prize:
        2-cells first, then 0/1-cells by prize; what did not fit is listed as dropped."""
        model = self.model
        return fit_context(sub, model.prompter.context_budget(question), model.count_tokens,
                           include_cells2=self.use_cells2, fmt=self.text_format)

    def prompt_layout(self, fit: ContextFit, question: str) -> dict[str, Any]:
        """:meth:`~toporag_core.model.Prompter.layout` of the fitted context, plus
        ``"context_cut"`` (:meth:`ContextFit.to_dict`: full and kept tokens, budget, dropped cell
        ids, a summary); ``"context_truncated"``: the prize fit or the model's safety net cut it."""
        layout = self.model.prompter.layout(fit.text, question)
        layout["context_cut"] = fit.to_dict()
        layout["context_truncated"] = bool(layout.get("context_truncated") or fit.truncated)
        return layout

    def prompt_for(self, question: str) -> str:
        """A user's question as the checkpoint's task phrased questions in training
        (:func:`~toporag_core.model.question_prompt`, from the config's ``question_form``:
        ``"Question: ...\nAnswer:"`` for a scene or WebQSP checkpoint; unchanged when already so, or for
        a ``"plain"`` checkpoint such as ExplaGraphs). A bare question would be a prompt the model never
        saw: a scene checkpoint answered "What is behind the stone table?" with "no" and its prompt form
        with "dresser". The form lives in the checkpoint, so answering needs no task registry."""
        return question_prompt(self.model.config, question)

    def choices_for(self, question: str) -> tuple[str, ...] | None:
        """The closed answer set of ``question`` (:func:`~toporag_core.model.choices_for`): the checkpoint's
        ``answer_set`` (ExplaGraphs: support/counter), else ``("yes", "no")`` for a polar question, else
        ``None`` (open)."""
        return choices_for(self.model.config, question)

    def names_for(self, sub: Subcomplex, fit: ContextFit, question: str) -> tuple[str, ...] | None:
        """The candidate names an open answer is read from under the ``"names"`` :attr:`reader` (the
        retrieved nodes whose lines are in the fitted context, topic entities left out), else ``None``."""
        if self.reader != "names":
            return None
        return answer_candidates(sub, question, fit.dropped_nodes) or None

    def decode(self, jobs: Sequence[DecodeJob], max_new_tokens: int | None = None
               ) -> tuple[list[dict[str, Any]], dict[str, float]]:
        """The neural step for ``B`` retrieved subcomplexes at once: one cell-complex encoder pass
        over the batch, then :meth:`TopoRAGModel.answer` (label scoring for rows with a closed answer
        set, batched greedy decoding for the rest; left padding, so a row's answer does not depend
        on its batch). Thread-safe (runs under :attr:`lock`); the core service batches requests here.
        With :attr:`kv_store` set (a :class:`~toporag_core.model.FrozenKVStore`) and a cacheable layout,
        the frozen part of each row (chat prefix + context) is read once per distinct context and
        reused from the store afterwards; only the tail and the label scoring run per batch.

        Returns ``([{"answer", "label_probs", "probability", "raw", "clean", "evidence", "unsupported_claims"},
        ...], {"encode", "generate", "batch_size"})``.
        """
        batch = QABatch(cells=None, questions=[j.question for j in jobs], contexts=[j.context for j in jobs])
        with self._lock, torch.no_grad():
            t0 = time.perf_counter()
            soft = None
            if self.model.config.use_graph:
                batch.cells = collate([subcomplex_tensors(j.sub, j.ecx.emb, use_cells2=self.use_cells2) for j in jobs])
                batch = batch.to(self.model.device)
                soft = self.model.graph_tokens(batch.cells)
            t1 = time.perf_counter()
            if self.kv_store is not None and self.model.cacheable:
                batch.kv = self.kv_store.lookup(self.model, batch)
            rows = self.model.answer(batch, choices=[j.choices for j in jobs], soft=soft, max_new_tokens=max_new_tokens,
                                     names=[j.names for j in jobs], list_ratio=self.list_ratio,
                                     priors=[j.priors for j in jobs], path_weight=self.path_weight)
            t2 = time.perf_counter()
        out = []
        for j, r in zip(jobs, rows):
            probs = None
            if r.get("scores"):  # softmax over the candidates' log-likelihoods, in float64
                z = torch.tensor(list(r["scores"].values()), dtype=torch.float64).softmax(0).tolist()
                probs = dict(zip(r["scores"], z))
            prob = probs[r["answer"]] if probs else r.get("probability")
            margin = r.get("margin")
            if probs and margin is None:
                top = sorted(probs.values(), reverse=True)
                margin = top[0] - (top[1] if len(top) > 1 else 0.0)
            cands = r.get("candidates") or ([{"name": k, "probability": v} for k, v in
                                             sorted(probs.items(), key=lambda kv: -kv[1])] if probs else None)
            kind = r.get("kind") or ("label" if probs else "generated")  # what the threshold is fitted per
            # what the context does not hold: a label's evidence claims, or a generated answer itself
            unsupported = context_check(kind, j.query or j.question, r["answer"], r.get("evidence"), j.context)
            out.append({"answer": r["answer"], "label_probs": probs, "probability": prob, "margin": margin,
                        "name_scores": r.get("name_scores"), "name_priors": r.get("name_priors"),
                        "name_free": r.get("name_free"),
                        "candidates": cands, "answer_kind": kind,
                        # names: judged by the chosen name's probability against the question-free one
                        **self.confidence_of(r.get("confidence", prob), kind, unsupported),
                        "raw": r.get("raw"), "clean": r.get("clean"), "evidence": r.get("evidence"),
                        "unsupported_claims": unsupported})
        return out, {"encode": t1 - t0, "generate": t2 - t1, "batch_size": len(jobs)}

    def check_embeddings(self, ecx: EmbeddedComplex) -> None:
        """:class:`EncoderMismatch` when the graph's cell embeddings do not have the width the checkpoint's
        cell-complex encoder was trained on (e.g. a MiniLM checkpoint with the hashing encoder)."""
        cfg = self.model.config
        if not cfg.use_graph:
            return
        width = int(ecx.emb.x0.shape[1])
        if width != cfg.cwn.in_dim:
            enc = getattr(ecx.encoder, "name", "?")
            raise EncoderMismatch(f"the checkpoint expects {cfg.cwn.in_dim}-d cell embeddings, but this graph was "
                                  f"embedded with {enc} ({width}-d); use the sentence encoder the checkpoint was "
                                  "trained with")

    def plan(self, ecx: EmbeddedComplex, question: str, setting: RetrievalSetting | None = None,
             query: str | None = None, choices: Sequence[str] | None | str = "auto") -> DecodeJob:
        """Everything before the neural step of one answer, the same for :meth:`answer` and the core
        service: checks (a non-empty question, a cell method, the embedding width), the setting (``k2 = 0``
        for a "w/o CRL" checkpoint), retrieval with the user's words (``query``, default the question), the
        context fitted by prize, and what the model chooses from: the closed answer set (``choices``;
        ``"auto"`` = :meth:`choices_for`), else the candidate names of the name reader (:meth:`names_for`),
        else nothing (greedy generation). Returns the :class:`DecodeJob` with its ``fit``, ``setting`` and
        ``retrieve_s``."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        setting = setting or self.default_setting()
        if setting.spec.dimension != "cells":
            raise ValueError(f"method {setting.method!r} retrieves nodes; answering needs a subcomplex (a cell method)")
        self.check_embeddings(ecx)
        if not self.use_cells2:  # a "w/o CRL" checkpoint never saw 2-cells: retrieve none
            setting = setting.without_cells2()
        query = query or question  # retrieval reads the user's words, as training retrieved with them
        prompt = self.prompt_for(question)
        if ecx.encoder is None:
            ecx.encoder = self.encoder
        t0 = time.perf_counter()
        sub = retrieve(ecx, query, setting=setting)
        fit = self.fit_context(sub, prompt)
        cands = self.choices_for(prompt) if isinstance(choices, str) else (tuple(choices or ()) or None)
        names = self.names_for(sub, fit, query) if cands is None else None
        priors = candidate_priors(sub, names or (), self.match_weight)
        return DecodeJob(sub, ecx, prompt, fit.text, cands, names, priors, fit=fit, setting=setting, query=query,
                         retrieve_s=time.perf_counter() - t0)

    def finish(self, job: DecodeJob, res: dict[str, Any], times: dict[str, float]) -> Answer:
        """The :class:`~.answer.Answer` of a planned and decoded job (see :meth:`answer`)."""
        sub = job.sub
        kind = res.get("answer_kind")
        return Answer(
            method=job.setting.method, answer=res["answer"], subcomplex=sub, context=job.context,
            prompt=self.prompt_layout(job.fit, job.question),
            timings={"retrieve": job.retrieve_s, "encode": times["encode"], "generate": times["generate"]},
            label_probs=res["label_probs"], evidence=res.get("evidence"),
            unsupported_claims=res.get("unsupported_claims"),
            choices=tuple(job.choices) if job.choices else None, candidates=res["candidates"],
            probability=res["probability"], low_confidence=res["low_confidence"], answer_kind=kind,
            confidence_threshold=self.confidence_threshold(kind), confidence=res["confidence"],
            margin=res["margin"], setting=job.setting, context_fit=job.fit, cells=sub.cell_texts(self.use_cells2),
            params=sub.params, topic=topic_names(sub, job.query or job.question),
            names=list(job.names) if job.names else None, name_scores=res.get("name_scores"),
            name_priors=res.get("name_priors"), name_free=res.get("name_free"), raw=res.get("raw"),
            clean=res.get("clean"))

    def answer(self, graph_or_ecx, question: str, setting: RetrievalSetting | None = None, query: str | None = None,
               max_new_tokens: int | None = None, choices: Sequence[str] | None | str = "auto") -> Answer:
        """Retrieve a subcomplex for ``question`` and answer it for its task: :meth:`plan`, :meth:`decode`,
        :meth:`finish` (the core service runs the same three steps, batching the middle one).

        A closed answer set (``choices``; ``"auto"`` = :meth:`choices_for`) is answered by scoring
        each candidate's log-likelihood (exactly one label, with probabilities); an open question by
        the name reader when the checkpoint has one (the retrieved entities' names, scored), else by
        greedy decoding cut to a short phrase at the end of the line.

        Args:
            graph_or_ecx: a ``TextualGraph`` (lifted and embedded here) or an ``EmbeddedComplex``.
            question: the question; the LLM reads it in its task's prompt form (:meth:`prompt_for`).
            setting: how to retrieve (default: :meth:`default_setting`); a cell method.
            query: text used for retrieval (default: the question).

        Returns:
            ``{"answer", "label_probs" ({label: probability} for a closed set, else None),
            "probability", "margin" (lead over the runner-up), "candidates" (top labels / names with
            probabilities), "confidence" (what the threshold judges: the probability; for a names answer
            the chosen name's probability against the question-free one; for a cited answer the evidence and
            answer together),
            "low_confidence" (:meth:`confidence_of`), "answer_kind" (``"label"`` /
            ``"names"`` / ``"generated"``), "topic" (the question's
            named entities), "raw" (the generated text), "clean", "evidence" (what an evidence-first
            checkpoint wrote before its yes/no, else None), "unsupported_claims" (the claims of that evidence
            the context does not hold; None: nothing checked), "subcomplex", "context" (what the
            LLM read: fitted to its input limit by prize), "context_fit" (:class:`ContextFit`: what
            a cut dropped), "prompt" (layout, with ``context_cut``), "cells" (texts), "timings"
            {prepare, retrieve, encode, generate, total} (seconds), "method", "setting", "params"}``.
        """
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        t0 = time.perf_counter()
        ecx = graph_or_ecx if isinstance(graph_or_ecx, EmbeddedComplex) else self.prepare(graph_or_ecx)
        t1 = time.perf_counter()
        job = self.plan(ecx, question, setting, query=query, choices=choices)
        (res,), times = self.decode([job], max_new_tokens=max_new_tokens)
        out = self.finish(job, res, times)
        out.timings = {"prepare": t1 - t0, **out.timings, "total": time.perf_counter() - t0}
        return out
