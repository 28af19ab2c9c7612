"""Decoders of a :class:`~toporag_core.model.TopoRAGModel` (passed in as ``model``): greedy generation
with a KV cache, its prompt-lookup variant, and label scoring.

* :func:`generate`: greedy decoding, at most ``max_new_tokens``, stopping at EOS or at the end of
  the first line (:class:`StopTokens`).
* **Prompt lookup** (one row): the draft is what followed the first occurrence, in the row's
  context, of the longest suffix (up to 3 tokens) of the text so far (:func:`lookup_draft`); one
  forward pass checks all drafts, the longest prefix that greedy decoding would have produced is
  kept and the cache is cropped to it. The output is greedy decoding's (up to float rounding between
  one-token and many-token passes), in fewer passes when the model copies.
* :func:`score_choices`: a closed answer set scored, as lm-evaluation-harness scores multiple choice,
  by ``score(c) = sum_t log p(c_t | prompt, c_<t) + log p(<eos> | prompt, c)`` - the log probability
  of answering exactly ``c`` and stopping, the sequence training fits; no length normalisation.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from .qa_batch import QABatch
from .styles import get_style

def lookup_draft(source, generated: Sequence[int], k: int, max_ngram: int = 3) -> list[int]:
    """Prompt-lookup draft: the (up to) ``k`` tokens that follow the first occurrence in ``source``
    (token ids, ``(S,)``) of the longest suffix of ``generated`` of ``max_ngram`` .. 1 tokens; ``[]``
    when no suffix occurs (or ``k <= 0``). The first occurrence: in a compact context a node's line
    (``cup [5]: white, glass``) comes before the relation lines that name it. Vectorised over
    ``source`` with one window comparison per n-gram length."""
    src = np.asarray(source, dtype=np.int64)
    if k <= 0 or not len(generated) or src.size < 2:
        return []
    for n in range(min(max_ngram, len(generated), src.size - 1), 0, -1):
        tail = np.asarray(generated[-n:], dtype=np.int64)
        win = np.lib.stride_tricks.sliding_window_view(src[:-1], n)  # windows followed by >= 1 token
        hits = np.flatnonzero((win == tail).all(axis=1))
        if hits.size:
            start = int(hits[0]) + n
            return src[start:start + k].tolist()
    return []


class StopTokens:
    """What ends a generated row, per vocabulary id, built once per model: the stop ids (the layout's
    EOS and the LLM's generation EOS), and whether each id decodes to text holding a newline / to
    non-space text; as tensors (batched steps) and Python containers (per-token tests)."""

    def __init__(self, llm, tokenizer, eos: list[int], device: torch.device) -> None:
        stop = set(eos)
        gen_eos = getattr(getattr(llm, "generation_config", None), "eos_token_id", None)
        stop |= set(gen_eos if isinstance(gen_eos, list) else [gen_eos] if gen_eos is not None else [])
        self.ids = torch.tensor(sorted(stop) or [-1], device=device)
        vocab = int(llm.get_output_embeddings().weight.shape[0])
        texts = tokenizer.batch_decode([[i] for i in range(vocab)])
        self.newline = torch.tensor(["\n" in t for t in texts], device=device)
        self.nonspace = torch.tensor([bool(t.strip()) for t in texts], device=device)
        self.id_set = frozenset(self.ids.tolist())
        self.newline_list: list[bool] = self.newline.tolist()
        self.nonspace_list: list[bool] = self.nonspace.tolist()

    def ends(self, t: int, has_text: bool, stop_at_newline: bool) -> bool:
        """Whether token ``t`` ends a row: EOS, or a newline once the row has text."""
        return t in self.id_set or (stop_at_newline and self.newline_list[t] and (has_text or self.nonspace_list[t]))

    def text(self, tokenizer, ids: list[int], stop_at_newline: bool) -> str:
        """A row's generated ids as text, stop ids dropped, cut at the first newline when ``stop_at_newline``."""
        text = tokenizer.decode([t for t in ids if t not in self.id_set], skip_special_tokens=True).strip()
        return text.split("\n")[0].strip() if stop_at_newline else text


def default_lookup(model) -> int:
    """Prompt-lookup draft length when ``generate`` is given none: the model's ``lookup_tokens``
    attribute when set (benchmarks switch it), else its answer style's (cited: on)."""
    if model.lookup_tokens is not None:
        return model.lookup_tokens
    return get_style(model.config.answer_style).lookup_tokens


@torch.no_grad()
def generate(model, batch: QABatch, max_new_tokens: int | None = None, soft: Tensor | None = None,
             stop_at_newline: bool = True, prompt: tuple | None = None, lookup: int | None = None) -> list[str]:
    """Greedy decoding with a KV cache. A row stops at EOS, after ``max_new_tokens``, or (when
    ``stop_at_newline``) at a token holding a newline once the row has produced some non-space
    text; the returned text is cut at that newline and stripped. ``soft``: precomputed
    ``graph_tokens`` (the pipeline times encoding and generation separately); ``prompt``: a
    :meth:`~toporag_core.model.TopoRAGModel.prompt_pass` result to start from (its cache is extended
    in place).

    ``lookup``: draft tokens per step for prompt-lookup decoding (one row only; ``None``:
    :func:`default_lookup`, 0 = off)."""
    max_new = model.config.max_new_tokens if max_new_tokens is None else max_new_tokens
    lookup = default_lookup(model) if lookup is None else lookup
    prompt = prompt if prompt is not None else model.prompt_pass(batch, soft)
    if lookup > 0 and len(batch) == 1 and max_new > 0:
        return [_generate_lookup(model, batch.contexts[0], prompt, max_new, stop_at_newline, lookup)]
    return _generate_greedy(model, len(batch), prompt, max_new, stop_at_newline)


def _generate_greedy(model, n: int, prompt: tuple, max_new: int, stop_at_newline: bool) -> list[str]:
    """:func:`generate` for ``n`` rows at once, one token per row and step."""
    stops = model.stops
    past, mask, pos, logits = prompt
    tokens = []
    done = torch.zeros(n, dtype=torch.bool, device=model.device)
    has_text = torch.zeros_like(done)
    nxt = logits.argmax(-1)
    for _ in range(max_new):
        tokens.append(torch.where(done, -1, nxt))
        done |= torch.isin(nxt, stops.ids)
        if stop_at_newline:
            done |= stops.newline[nxt] & (has_text | stops.nonspace[nxt])
        has_text |= stops.nonspace[nxt]
        if bool(done.all()) or len(tokens) == max_new:
            break
        mask = torch.cat([mask, mask.new_ones(n, 1)], dim=1)
        pos = pos + 1
        out = model.llm(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos, past_key_values=past,
                        use_cache=True)
        past = out.past_key_values
        nxt = out.logits[:, -1].argmax(-1)
    rows = torch.stack(tokens, 1).tolist() if tokens else [[] for _ in range(n)]
    return [stops.text(model.tokenizer, [t for t in row if t >= 0], stop_at_newline) for row in rows]


class _Row:
    """The ids one prompt-lookup row has generated, and whether it has produced non-space text."""

    def __init__(self, stops: StopTokens, stop_at_newline: bool, max_new: int) -> None:
        self.stops, self.stop_at_newline, self.max_new = stops, stop_at_newline, max_new
        self.ids: list[int] = []
        self.has_text = False

    def take(self, t: int) -> bool:
        """Append one token; ``True`` when the row stops after it."""
        self.ids.append(t)
        end = self.stops.ends(t, self.has_text, self.stop_at_newline)
        self.has_text = self.has_text or self.stops.nonspace_list[t]
        return end or len(self.ids) >= self.max_new


def _accepted(logits: Tensor, draft: list[int], row: _Row, choose) -> tuple[int, int]:
    """``(accepted draft tokens, the token after them)``: the greedy token at each position of one
    verification pass, while it equals the draft."""
    ok, text_before = 0, row.has_text
    while True:
        c = choose(logits[ok], row.ids + draft[:ok], text_before)
        if ok < len(draft) and draft[ok] == c:
            text_before = text_before or row.stops.nonspace_list[c]
            ok += 1
            continue
        return ok, c


def _generate_lookup(model, context: str, prompt: tuple, max_new: int, stop_at_newline: bool, k: int) -> str:
    """:func:`generate` for one row with prompt-lookup drafts of up to ``k`` tokens."""
    stops = model.stops
    device = model.device

    def choose(logits_i: Tensor, ids: list[int], text_before: bool) -> int:
        return int(logits_i.argmax(-1))

    source = np.asarray(model.tokenizer(context or "", add_special_tokens=False)["input_ids"], dtype=np.int64)
    past, mask, pos, logits = prompt
    row = _Row(stops, stop_at_newline, max_new)
    nxt = choose(logits[0], [], False)
    while not row.take(nxt):
        draft = lookup_draft(source, row.ids, min(k, max_new - len(row.ids) - 1))
        inp = [nxt, *draft]
        n_past = past.get_seq_length()
        mask = torch.cat([mask, mask.new_ones(1, len(inp))], dim=1)
        out = model.llm(input_ids=torch.tensor([inp], device=device), attention_mask=mask,
                        position_ids=pos + 1 + torch.arange(len(inp), device=device)[None],
                        past_key_values=past, use_cache=True)
        past = out.past_key_values
        ok, c = _accepted(out.logits[0], draft, row, choose)
        if any(row.take(t) for t in draft[:ok]):
            break
        keep = n_past + 1 + ok  # the cache holds nxt and the accepted drafts
        if past.get_seq_length() > keep:  # a negative crop removes that many (old and new transformers)
            past.crop(keep - past.get_seq_length())
        mask, pos, nxt = mask[:, :keep], pos + 1 + ok, c
    return stops.text(model.tokenizer, row.ids, stop_at_newline)


def _candidate_rows(choices, n: int) -> list[list[str]]:
    """One candidate list per row: ``choices`` per row, or one list for every row; checked."""
    per_row = bool(choices) and all(isinstance(c, (list, tuple)) for c in choices)
    rows = [list(c) for c in choices] if per_row else [list(choices)] * n
    if not rows or not rows[0]:
        raise ValueError("score_choices: empty candidate list")
    if len(rows) != n or len({len(r) for r in rows}) != 1:
        raise ValueError(f"score_choices: needs {n} candidate lists of one length, got {[len(r) for r in rows]}")
    return rows


def candidate_mask(fmask: Tensor, tmask: Tensor, real: Tensor, dtype: torch.dtype) -> Tensor:
    """The additive attention mask ``(B, 1, Q, K)`` of one pass over a prompt tail and its candidates
    (``Q = T + C*S`` queries, ``K = P + Q`` keys), from the frozen mask ``fmask (B, P)``, the tail's
    ``tmask (B, T)`` and which candidate steps are real, ``real (B, C, S)``:

    * a tail query ``q`` sees the real frozen positions and the real tail positions ``<= q``;
    * step ``s`` of candidate ``c`` sees the real frozen and tail positions and steps ``<= s`` of ``c``
      (never another candidate: ``C`` continuations of one prompt side by side, "tree attention");
    * every query sees itself (a padded position gets a finite output that no real query reads).
    """
    n_b, n_t = tmask.shape
    n_cs = real.shape[1] * real.shape[2]
    dev = tmask.device
    tm = tmask.bool()
    tail = torch.cat([torch.ones(n_t, n_t, dtype=torch.bool, device=dev).tril()[None] & tm[:, None, :],
                      tm[:, None, :].expand(n_b, n_cs, n_t)], dim=1)  # (B, Q, T)
    c_idx = torch.arange(real.shape[1], device=dev).repeat_interleave(real.shape[2])
    s_idx = torch.arange(real.shape[2], device=dev).repeat(real.shape[1])
    own = (c_idx[:, None] == c_idx[None, :]) & (s_idx[None, :] <= s_idx[:, None])  # (C*S, C*S)
    cand = torch.cat([torch.zeros(n_b, n_t, n_cs, dtype=torch.bool, device=dev),
                      own[None] & real.reshape(n_b, 1, n_cs)], dim=1)  # (B, Q, C*S)
    n_q = n_t + n_cs
    allowed = torch.cat([fmask.bool()[:, None, :].expand(n_b, n_q, fmask.shape[1]), tail, cand], dim=2)
    q = torch.arange(n_q, device=dev)
    allowed[:, q, fmask.shape[1] + q] = True
    out = torch.zeros(allowed.shape, dtype=dtype, device=dev).masked_fill_(~allowed, torch.finfo(dtype).min)
    return out[:, None]


def _score_fused(model, batch: QABatch, cands: list[list[list[int]]], soft: Tensor | None) -> Tensor:
    """:func:`score_choices` in one forward pass: the prompt tail and every row's ``C`` candidates
    (``S`` steps each, padded) run together under :func:`candidate_mask`, the frozen part (if any)
    from its cache; the vocabulary head only at the tail's last position and the candidate steps."""
    past, mask, pos, embeds = model.prompt_inputs(batch, soft)
    n_b, n_t = pos.shape
    n_c, steps = len(cands[0]), max(len(c) for r in cands for c in r) - 1
    dev, pad = model.device, model.pad_id
    ids = torch.tensor([[c[:-1] + [pad] * (steps - len(c) + 1) for c in r] for r in cands], device=dev)  # (B, C, S)
    real = torch.tensor([[[1] * (len(c) - 1) + [0] * (steps - len(c) + 1) for c in r] for r in cands],
                        dtype=torch.bool, device=dev)
    tgt = torch.tensor([[c[1:] + [0] * (steps - len(c) + 1) for c in r] for r in cands], device=dev)
    cand_e = model.llm.get_input_embeddings()(ids.view(n_b, n_c * steps)).to(embeds.dtype)
    cand_pos = (pos[:, -1:] + 1 + torch.arange(steps, device=dev)).repeat(1, n_c)  # (B, C*S)
    p_len = mask.shape[1] - n_t
    attn = candidate_mask(mask[:, :p_len], mask[:, p_len:], real, model.dtype)
    hidden = model.llm.get_decoder()(inputs_embeds=torch.cat([embeds, cand_e], 1), attention_mask=attn,
                                     position_ids=torch.cat([pos, cand_pos], 1), past_key_values=past,
                                     use_cache=past is not None).last_hidden_state
    last = hidden[:, n_t - 1:].reshape(n_b * (1 + n_c * steps), -1)  # 2-D: a 3-D slice would run as a slow bmm
    lp = torch.log_softmax(model.llm.get_output_embeddings()(last).float(), -1).view(n_b, 1 + n_c * steps, -1)
    first = torch.tensor([[c[0] for c in r] for r in cands], device=dev)
    scores = lp[:, 0].gather(1, first)  # (B, C)
    step_lp = lp[:, 1:].view(n_b, n_c, steps, -1).gather(-1, tgt[..., None])[..., 0]  # (B, C, S)
    return scores + (step_lp * real).sum(-1)


def _score_after_prompt(model, cands: list[list[list[int]]], prompt: tuple) -> Tensor:
    """:func:`score_choices` from a ``prompt_pass`` result: its cache repeated for the ``C``
    candidates, which run as one batch of ``B x C`` rows (the cache is used up)."""
    past, mask, pos, logits = prompt
    dev = model.device
    first = torch.log_softmax(logits, -1)  # (B, V)
    n_b, n_c = len(cands), len(cands[0])
    scores = first.gather(1, torch.tensor([[c[0] for c in r] for r in cands], device=dev)).clone()  # (B, C)
    flat = [c for r in cands for c in r]  # B*C, row-major (row b's candidates together)
    steps = max(len(c) for c in flat) - 1
    if steps > 0:
        past.batch_repeat_interleave(n_c)
        pad = model.pad_id
        ids = torch.tensor([c[:-1] + [pad] * (steps - len(c) + 1) for c in flat], device=dev)
        real = torch.tensor([[1] * (len(c) - 1) + [0] * (steps - len(c) + 1) for c in flat], device=dev)
        tgt = torch.tensor([c[1:] + [0] * (steps - len(c) + 1) for c in flat], device=dev)
        m = torch.cat([mask.repeat_interleave(n_c, 0), real], dim=1)
        p = pos.repeat_interleave(n_c, 0) + 1 + torch.arange(steps, device=dev)
        out = model.llm(input_ids=ids, attention_mask=m, position_ids=p, past_key_values=past, use_cache=True)
        lp = torch.log_softmax(out.logits.float(), -1).gather(-1, tgt[..., None])[..., 0]  # (B*C, steps)
        scores = scores + (lp * real).sum(-1).view(n_b, n_c)
    return scores


@torch.no_grad()
def score_token_lists(model, batch: QABatch, cands: list[list[list[int]]], soft: Tensor | None = None) -> Tensor:
    """``(B, C)`` log-likelihood ``sum_t log p(c_t | prompt, c_<t)`` of each row's ``C`` token lists as
    continuations of its prompt, exactly as given (no end token added, nothing cut): the machinery of
    :func:`score_choices` (one fused pass), for continuations that are not whole answers, such as a
    generated answer's evidence prefix."""
    if not cands or len(cands) != len(batch) or len({len(r) for r in cands}) != 1 or \
            any(not c for r in cands for c in r):
        raise ValueError(f"score_token_lists: needs {len(batch)} rows of one number of non-empty token lists")
    if not model.prompter.pieces["eos"]:
        return _score_after_prompt(model, cands, model.prompt_pass(batch, soft))
    return _score_fused(model, batch, cands, soft)


@torch.no_grad()
def score_choices(model, batch: QABatch, choices, soft: Tensor | None = None, prompt: tuple | None = None,
                  truncate: bool = True) -> Tensor:
    """``(B, C)`` log-likelihood of answering exactly each candidate and stopping:
    ``sum_t log p(c_t | prompt, c_<t) + log p(<eos> | prompt, c)`` (no length normalisation).

    ``choices``: one candidate list for every row, or one list per row (all of length ``C``;
    the evidence path scores ``"<row's evidence>. Answer: <label>"``). Without ``prompt`` the
    prompt and all candidates run in **one** forward pass (:func:`_score_fused`: the candidates side
    by side after the prompt under :func:`candidate_mask`; the frozen part's cache is read once, not
    copied ``C`` times, and the vocabulary head runs on ``1 + C*S`` positions a row). With
    ``prompt`` (a ``prompt_pass`` result, whose cache is then used up) its cache is repeated for
    the ``C`` candidates, which run as one batch of ``B x C`` rows. Both give the same scores up to
    float round-off. ``truncate``: cut candidates at ``max_new_tokens`` as training cuts answers.
    """
    rows = _candidate_rows(choices, len(batch))
    cut = model.config.max_new_tokens if truncate else None
    eos = model.prompter.pieces["eos"]
    cands = [[model.prompter.ids(c)[:cut] + eos for c in r] for r in rows]  # B x C token lists
    if any(len(c) == len(eos) for r in cands for c in r):
        raise ValueError(f"score_choices: a candidate tokenises to nothing: {rows}")
    if prompt is not None or not eos:
        return _score_after_prompt(model, cands, prompt if prompt is not None else model.prompt_pass(batch, soft))
    return _score_fused(model, batch, cands, soft)


@torch.no_grad()
def score_names(model, batch: QABatch, names: list[list[str]], soft: Tensor | None = None) -> list[list[float]]:
    """Per row, the log-likelihood that the answer *is or starts with* each candidate name:
    ``log(p(name + <eos> | prompt) + p(name + "," | prompt))`` (no length normalisation).

    The ``,`` arm matters: the general task trains list answers (``"A, B, C"``), so a right name that
    is one of several is followed by a comma, not by the end of the answer. Rows may hold different
    numbers of names (padded with their last name; the padding is not returned). All ``2 C`` candidates
    of a row run in one fused pass (:func:`score_choices`'s machinery).
    """
    if len(names) != len(batch) or any(not r for r in names):
        raise ValueError(f"score_names: needs one non-empty name list per row ({len(batch)} rows)")
    eos = model.prompter.pieces["eos"]
    cut = model.config.max_new_tokens
    width = max(len(r) for r in names)
    cands = []
    for r in names:
        row: list[list[int]] = []
        for c in list(r) + [r[-1]] * (width - len(r)):
            ids = model.prompter.ids(c)[:cut]
            if not ids:
                raise ValueError(f"score_names: a name tokenises to nothing: {c!r}")
            row += [ids + eos, model.prompter.ids(c + ",")[:cut + 1]]
        cands.append(row)
    sc = _score_fused(model, batch, cands, soft) if eos else _score_after_prompt(model, cands,
                                                                               model.prompt_pass(batch, soft))
    both = torch.logaddexp(sc[:, 0::2].double(), sc[:, 1::2].double())
    return [both[b, :len(r)].tolist() for b, r in enumerate(names)]
