"""Task decoding (:meth:`~toporag_core.model.TopoRAGModel.answer`): which decoder answers which row.

Rows are grouped by their closed answer set (``None``: open). A **closed set** is scored
(:func:`~toporag_core.model.decode.score_choices`): the label is the arg max, its probability
``softmax(scores)`` over the candidates. **Open questions**: greedy generation cut to a short phrase
(:func:`~toporag_core.model.answer_text.short_answer`), with the per-token geometric-mean probability of that
phrase under the same prompt and what was generated before it (a cited answer's evidence),
``exp(ll / n_tokens)`` (:func:`answer_scores`), as its ``probability``;
:func:`~toporag_core.model.answer_text.is_clean` flags an
answer that dumps the context or repeats the question; a style with cited open answers reads the
answer after the generated ``Answer:``. **Evidence first** (yes/no rows of a style with
``polar_evidence``): the evidence is generated greedily and the labels are scored after it, one prompt
pass shared by both steps (its cache is copied for generation). **Candidate names** (the name reader):
every name scored in one fused pass (:func:`~toporag_core.model.decode.score_names`), the answer the best
name(s) by log-likelihood plus the retrieval's path prior; its confidence compares the chosen name with
itself under the question-free prompt (:data:`QUESTION_FREE`, one more pass over that one name):

    r = p(name | question) / p(name | "N/A")^w,   confidence = r / (1 + r)   (metrics.name_confidence)
"""
from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor

from ..metrics import name_confidence
from .answer_text import evidence_target, is_clean, short_answer, split_evidence
from .frozen_kv import with_context_kv
from .qa_batch import QABatch
from .prompt import choices_for, question_prompt
from .styles import get_style


def row_choices(model, batch: QABatch, choices) -> list[tuple[str, ...] | None]:
    """Each row's closed answer set (``None``: open) from :func:`answer`'s ``choices``."""
    n = len(batch)
    if choices is None:
        return [choices_for(model.config, q) for q in batch.questions]
    if len(choices) and all(isinstance(c, (list, tuple)) or c is None for c in choices):
        if len(choices) != n:
            raise ValueError(f"answer: {len(choices)} candidate lists for {n} rows")
        return [tuple(c) if c else None for c in choices]
    return [tuple(choices) or None] * n


def _scored(cands: tuple[str, ...], sc: Tensor, r: int, raw: str | None = None) -> dict[str, Any]:
    """Scored row ``r`` of ``sc`` ``(B, C)``: the arg-max candidate, its softmax probability over the
    candidates and every candidate's score; ``raw``: the generated text (default: the candidate)."""
    prob = torch.softmax(sc, -1)
    j = int(sc[r].argmax())
    return {"answer": cands[j], "probability": float(prob[r, j]),
            "scores": {c: float(sc[r, k]) for k, c in enumerate(cands)}, "raw": cands[j] if raw is None else raw,
            "clean": True, "kind": "label"}


def answer_scores(model, sub: QABatch, answers: list[str], soft, prefixes: list[str] | None = None
                  ) -> tuple[list[float | None], list[float | None]]:
    """Per row, ``(p, q)``: ``p`` the per-token geometric-mean probability of answering ``answers[r]`` and
    stopping, under the row's own prompt followed by ``prefixes[r]`` (what the model generated before the
    answer: a cited answer's evidence and ``Answer:``; default none):

        p = exp((ll(prefix + answer + <eos>) - ll(prefix)) / n)

    with ``ll`` the log-likelihood of a continuation of the prompt (:func:`~.decode.score_token_lists`)
    and ``n`` the tokens of the answer plus the end token (the answer's tokens are those of
    ``prefix + answer`` after the tokens it shares with ``prefix``; nothing is cut at ``max_new_tokens``).
    So ``p`` lies in ``(0, 1]``, does not shrink with the answer's length, and for a cited answer
    measures the answer given the evidence the model wrote (scored without it, a right answer reads as
    unlikely: the model expects evidence first). ``q`` is the per-token probability of *everything* the
    model wrote, evidence included, from the same pass: ``q = exp(ll(prefix + answer + <eos>) / m)``, ``m``
    the tokens of ``prefix + answer`` plus the end token. A wrong cited answer mostly comes from wrong
    evidence, after which the answer itself is nearly certain, so ``q`` tells right from wrong where ``p``
    cannot (the scene checkpoint's confidence: docs/results/confidence.md). One batched scoring pass over
    the rows with a non-empty answer; an answer that adds no token gets ``None`` twice. It reads the model,
    never changes the answer."""
    from .decode import score_token_lists

    ids, eos = model.prompter.ids, list(model.prompter.pieces["eos"])
    out: list[float | None] = [None] * len(answers)
    joint: list[float | None] = [None] * len(answers)
    idx, cands, n, cuts = [], [], [], []
    for i, a in enumerate(answers):
        pre = (prefixes[i] if prefixes else "") or ""
        pre = pre if pre.strip() else ""  # white space before the answer: scored as the answer alone
        if not a.strip():
            continue
        full = ids(pre + a)
        head = ids(pre)
        cut = 0
        while cut < min(len(head), len(full)) and head[cut] == full[cut]:
            cut += 1
        if cut == len(full):
            continue
        idx.append(i)
        cands.append([full + eos, full[:cut] if cut else full + eos])
        n.append(len(full) - cut + len(eos))
        cuts.append(cut)
    if not idx:
        return out, joint
    sc = score_token_lists(model, sub.select(idx), cands, soft[idx] if soft is not None else None).double()
    ll = sc[:, 0] - torch.where(torch.tensor(cuts) > 0, sc[:, 1], torch.zeros_like(sc[:, 1]))  # minus ll(prefix)
    m = torch.tensor([len(c[0]) for c in cands], dtype=torch.float64)  # prefix + answer + <eos>
    for i, p, q in zip(idx, torch.exp(ll / torch.tensor(n, dtype=torch.float64)).clamp(max=1.0).tolist(),
                       torch.exp(sc[:, 0] / m).clamp(max=1.0).tolist()):
        out[i], joint[i] = float(p), float(q)
    return out, joint


def answer_prefix(raw: str, text: str, answer: str) -> str:
    """What was generated before ``answer`` in ``raw`` (``text``: the part the answer was cut from, e.g.
    the words after a cited answer's last ``Answer:``); ``""`` when the answer is not found as written."""
    start = raw.rfind(text) if text else -1
    pos = raw.find(answer, max(start, 0)) if answer else -1
    return raw[:pos] if pos > 0 else ""


def _open_rows(model, sub: QABatch, soft, max_new_tokens) -> list[dict[str, Any]]:
    """Open rows: greedy generation cut to a short phrase; ``probability`` is :func:`answer_scores`' ``p``
    of that phrase after what was generated before it (scored after generation, so the answer is the
    generated one); a style with cited answers adds ``confidence``, the per-token probability of the
    evidence and the answer together (:func:`answer_scores`' ``q``: its confidence)."""
    style = get_style(model.config.answer_style)
    sub = with_context_kv(model, sub)  # generation and the answer's scoring read the same frozen part
    out = []
    for question, context, raw in zip(sub.questions, sub.contexts,
                                      model.generate(sub, max_new_tokens=max_new_tokens, soft=soft)):
        evidence, text = style.read_open(raw)
        ans = short_answer(text)
        out.append({"answer": ans, "probability": None, "scores": None, "raw": raw,
                    "clean": is_clean(ans, question, context), "kind": "generated",
                    **({"evidence": evidence} if style.open_citations else {})})
    texts = [style.read_open(r["raw"])[1] for r in out]
    prefixes = [answer_prefix(r["raw"], t, r["answer"]) for r, t in zip(out, texts)]
    cond, joint = answer_scores(model, sub, [r["answer"] for r in out], soft, prefixes)
    for row, p, q in zip(out, cond, joint):
        row["probability"] = p
        if style.open_citations and q is not None:
            row["confidence"] = q
    return out


MAX_LIST = 5  # at most this many names in one list answer
QUESTION_FREE = "N/A"  # the question the name reader's confidence compares with (metrics.name_confidence)


def _named_rows(model, sub: QABatch, names: list[tuple[str, ...]], soft, list_ratio: float,
                priors=None, path_weight: float = 0.0) -> list[dict[str, Any]]:
    """Open rows read from candidate names (:func:`~.decode.score_names`): each name's logit is its
    log-likelihood ``ll`` plus ``path_weight x prior`` (the retrieval's path score of the name, when given);
    the answer is the best name, then every name whose probability (softmax over the row's names) is at
    least ``list_ratio`` times the best one's (at most :data:`MAX_LIST`), comma-separated; ``probability``
    is the best name's, ``margin`` its lead over the runner-up, ``candidates`` the top names with their
    probabilities; ``name_scores`` / ``name_priors`` the parts of every name's logit; ``name_free`` the chosen
    name's log-likelihood with the question replaced by :data:`QUESTION_FREE` (same graph tokens and context;
    a second pass over that one name; it reuses the frozen part's cache when the layout reads the context
    before the question);
    ``confidence`` :func:`~toporag_core.metrics.name_confidence` of the two, not relative to the other names.
    (The softmax over the names tells right from wrong answers little better than chance on the general
    validation split, and the mass on all names ``sum_j exp(ll_j)`` worse than the chosen name's own
    likelihood: docs/results/confidence.md.)"""
    from .decode import score_names

    out = []
    priors = priors or [None] * len(names)
    orders = []
    scores = score_names(model, sub, [list(x) for x in names], soft=soft)
    for sc, pr in zip(scores, priors):
        logit = torch.tensor(sc, dtype=torch.float64)
        if pr is not None and path_weight:
            logit = logit + path_weight * torch.tensor(pr, dtype=torch.float64)
        orders.append((logit, torch.argsort(-logit, stable=True).tolist()))
    # the frozen part's caches hold no question unless the layout reads the question first
    free = QABatch(None, [question_prompt(model.config, QUESTION_FREE)] * len(sub), sub.contexts,
                   kv=None if model.config.question_first else sub.kv)
    frees = score_names(model, free, [[r[order[0]]] for r, (_, order) in zip(names, orders)], soft=soft)
    for r, sc, pr, (logit, order), (ll_free,) in zip(names, scores, priors, orders, frees):
        prob = torch.softmax(logit, 0)
        best = float(prob[order[0]])
        chosen = [r[i] for i in order if float(prob[i]) >= list_ratio * best][:MAX_LIST]
        runner = float(prob[order[1]]) if len(order) > 1 else 0.0
        out.append({"answer": ", ".join(chosen), "probability": best, "margin": best - runner, "scores": None,
                    "confidence": name_confidence(sc, order[0], ll_free), "name_free": float(ll_free),
                    "name_scores": [float(x) for x in sc], "name_priors": list(pr) if pr is not None else None,
                    "candidates": [{"name": r[i], "probability": float(prob[i])} for i in order[:MAX_LIST]],
                    "raw": ", ".join(chosen), "clean": True, "kind": "names"})
    return out


def _evidence_rows(model, sub: QABatch, cands: tuple[str, ...], soft, max_new_tokens) -> list[dict[str, Any]]:
    prompt = model.prompt_pass(sub, soft)
    raws = model.generate(sub, soft=soft, prompt=(copy.deepcopy(prompt[0]), *prompt[1:]),
                          max_new_tokens=max_new_tokens, lookup=0)
    evid = [split_evidence(t)[0] for t in raws]
    targets = [[evidence_target(e, c) for c in cands] for e in evid]
    sc = model.score_choices(sub, targets, prompt=prompt, truncate=False)
    eos = len(model.prompter.pieces["eos"])
    out = []
    for r in range(len(sub)):
        row = {**_scored(cands, sc, r, raws[r]), "evidence": evid[r]}
        j = cands.index(row["answer"])  # the confidence: the per-token probability of evidence + label
        row["confidence"] = float(torch.exp(sc[r, j].double() / (len(model.prompter.ids(targets[r][j])) + eos)
                                            ).clamp(max=1.0))
        out.append(row)
    return out


def _closed_rows(model, sub: QABatch, cands: tuple[str, ...], soft) -> list[dict[str, Any]]:
    sc = model.score_choices(sub, cands, soft=soft)
    return [_scored(cands, sc, r) for r in range(len(sub))]


@torch.no_grad()
def answer(model, batch: QABatch, choices=None, soft: Tensor | None = None,
           max_new_tokens: int | None = None, names=None, list_ratio: float = 0.5, priors=None,
           path_weight: float = 0.0) -> list[dict[str, Any]]:
    """Task decoding, one dict per row: ``{"answer", "probability", "scores", "raw", "clean", "kind"}``
    (``kind``: how the answer was chosen, ``"label"`` / ``"names"`` / ``"generated"``, what its
    probability is calibrated per).

    ``choices``: ``None`` (each row's :func:`~toporag_core.model.prompt.choices_for`: the config's
    ``answer_set``, else yes/no for a polar question, else open generation - the one rule ``toporag
    ask``, ``toporag eval``, the pipeline and the app share), one candidate list for every row, or a
    list with one candidate list (or ``None``: open) per row. Closed rows get the arg-max candidate and
    its softmax probability over the candidates (``scores``: candidate -> log-likelihood); open rows
    get greedy generation cut to a short phrase (``probability``: :func:`answer_scores`' ``p``); ``clean`` is
    :func:`~toporag_core.model.answer_text.is_clean`. Yes/no rows of an evidence-first style first generate
    their evidence greedily (``raw``; ``evidence`` is the part before ``Answer:``), then score
    ``"<evidence>. Answer: yes"`` against ``"... no"`` from the same prompt cache.

    ``names``: ``None``, or one tuple of candidate names per row (empty: none); an open row with names is
    read from them (:func:`_named_rows`: the best-scoring names, ``probability``, ``margin`` and
    ``candidates``) instead of generated.
    """
    per_row = row_choices(model, batch, choices)
    if soft is None and model.config.use_graph:
        soft = model.graph_tokens(batch.cells)
    style = get_style(model.config.answer_style)
    out: list[dict[str, Any] | None] = [None] * len(batch)
    groups: dict[tuple[str, ...] | None, list[int]] = {}
    named = [i for i, c in enumerate(per_row) if c is None and names is not None and names[i]]
    if named:
        rows = _named_rows(model, batch.select(named), [tuple(names[i]) for i in named],
                           soft[named] if soft is not None else None, list_ratio,
                           [priors[i] for i in named] if priors is not None else None, path_weight)
        for i, row in zip(named, rows):
            out[i] = row
    for i, c in enumerate(per_row):
        if out[i] is None:
            groups.setdefault(c, []).append(i)
    for cands, idx in groups.items():
        sub = batch.select(idx)
        s_soft = soft[idx] if soft is not None else None
        if cands is None:
            rows = _open_rows(model, sub, s_soft, max_new_tokens)
        elif style.evidence_first(cands):
            rows = _evidence_rows(model, sub, cands, s_soft, max_new_tokens)
        else:
            rows = _closed_rows(model, sub, cands, s_soft)
        for i, row in zip(idx, rows):
            out[i] = row
    return out  # type: ignore[return-value]
