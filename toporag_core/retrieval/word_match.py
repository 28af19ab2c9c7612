"""Word match: which of the question's own words a relation's words name.

The seeded method's relation relevance (:mod:`.seeded`) and the relation-path match (:mod:`.path_match`) are
cosines of whole texts with the whole question. On a movie graph those cosines are weak and noisy: for "what
languages are the films directed by Felix Kowalski in", MiniLM ranks ``starred actors`` (0.27) above
``directed by`` (0.22) and ``in language`` (0.17), because "films" pulls every movie relation up; the walk
then follows ``directed by`` and ``starred actors`` and stops at the actors. A question names the relations
it follows with its own words ("languages", "directed"; "writers" for ``written by``, "born" for ``place of
birth``), so each relation also counts the question words it names:

    Q = content words of the question, minus the words of the seed entities' names      (n <= 62)
    match(q, w) = stem(q) == stem(w) (one suffix of -s, -es, -ed, -er, -or, -ing, -ion, ... dropped),
                  or a common prefix of >= 4 letters and >= half the longer word,
                  or cos(enc(q), enc(w)) >= 0.7                                           (MiniLM words)
                  or q and w share a synonym group (``synonyms``, :mod:`.lexicon`)  ("appeared" / "starred")
    mask(r) = sum_j 2^j [some word w of r matches Q_j]                                    (an int64 bit set)
    C(path) = |mask(r1) | mask(r2) | ...|                                                 (popcount)

A relation's relevance gains ``lexical x C(r)`` (cosine units) and a path's match ``lexical x C(path)``: a
path counts each question word once, so ``directed by, in language`` (2 words) outranks ``directed by,
starred actors`` (1) and the bridge (``directed by``: 1), and a 1-hop question ("who directed Rain") gives
no extra credit to a second hop. Function words (:data:`~.claims.STOP_WORDS`) and words of <= 2 letters are
not content words. The stem rule catches "acted" / "actors", the prefix rule "writers" / "written" (cosine
0.57) and "discovered" / "discoverer"; the cosine rule "wrote" / "written" (0.89), "born" / "birth" (0.84),
"married" / "spouse" (0.82), and not "films" / "actors" (0.64); the synonym groups what neither reaches:
"appeared" / "starred" (cosine 0.34 to "starred actors"), "kind" / "genre", "describe" / "tags",
"screenwriter" / "written". Measured: docs/results/kg.md.

Shapes: question words ``(n,)``; relation word texts ``(W,)``; the match ``(n, V)`` over the ``V`` distinct
relation words, reduced to ``(W,)`` bit masks by one ``np.bitwise_or.at``. The relation vocabulary
(:class:`RelationVocab`) is built once per graph, and every word vector is encoded once per graph
(:func:`text_vectors`, the cache the relation-path texts share).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .claims import STOP_WORDS, words
from .lexicon import FINAL_ONLY, group_bits, lexicon_words
from .result import EmbeddedComplex

PREFIX = 4  # letters a word pair must share at the start (and half the longer word)
SUFFIXES = ("ings", "ions", "ers", "ors", "ing", "ion", "ed", "er", "or", "es", "s")  # longest first
COSINE = 0.7  # word-vector cosine that counts as the same word
MAX_WORDS = 62  # question words kept (bits of an int64)
NAMING_STOP_WORDS = STOP_WORDS & lexicon_words()  # "about", "kind", "sort": question words only by synonym


def content_words(text: str) -> list[str]:
    """Distinct content words of ``text`` in order (lower case, no function words, at least 3 letters)."""
    return list(dict.fromkeys(w for w in words(text) if len(w) > 2 and w not in STOP_WORDS))


def question_words(question: str, names=(), synonyms: bool = False) -> list[str]:
    """The question's content words that are not words of ``names`` (the seed entities' names); with
    ``synonyms``, also the function words that name a relation through :mod:`.lexicon` ("what is X *about*";
    "do" only as the last word: "what did X *do*")."""
    named = {w for n in names for w in words(n)}
    ws = words(question)
    keep = list(dict.fromkeys(w for i, w in enumerate(ws) if w not in named and (
        (len(w) > 2 and w not in STOP_WORDS)
        or (synonyms and w in NAMING_STOP_WORDS and (w not in FINAL_ONLY or i == len(ws) - 1)))))
    return keep[:MAX_WORDS]


def stem(word: str) -> str:
    """``word`` without its longest suffix of :data:`SUFFIXES` when at least 3 letters remain ("acted",
    "actors" -> "act"; "directed", "director" -> "direct")."""
    for s in SUFFIXES:
        if word.endswith(s) and len(word) - len(s) >= 3:
            return word[:-len(s)]
    return word


def _same_form(a: np.ndarray, b: np.ndarray, b_stems: list[str]) -> np.ndarray:
    """``(len(a), len(b))`` bool: equal stems, or sharing a prefix of >= PREFIX letters and >= half the
    longer word (``b_stems``: the stems of ``b``). String comparisons: ``len(a)`` question words by the
    graph's relation vocabulary, a few thousand pairs."""
    out = np.zeros((a.size, b.size), bool)
    for i, x in enumerate(a.tolist()):
        sx = stem(x)
        for j, y in enumerate(b.tolist()):
            n = 0
            for p, q in zip(x, y):
                if p != q:
                    break
                n += 1
            out[i, j] = sx == b_stems[j] or (n >= PREFIX and 2 * n >= max(len(x), len(y)))
    return out


def text_vectors(ecx: EmbeddedComplex, texts: list[str]) -> np.ndarray:
    """``(len(texts), d)`` unit vectors of short texts (single words, relation paths), each encoded once per
    graph and kept in ``ecx.cache``; ``d = 0`` without an encoder."""
    store = ecx.cache.setdefault("text-vectors", {})
    new = [t for t in dict.fromkeys(texts) if t not in store]
    if new and ecx.encoder is not None:
        vec = np.asarray(ecx.encoder.encode(new), np.float32)
        vec /= np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
        store.update(zip(new, vec))
    if not texts or ecx.encoder is None:
        return np.zeros((len(texts), 0), np.float32)
    return np.stack([store[t] for t in texts])


@dataclass(frozen=True)
class RelationVocab:
    """The words of ``W`` relation texts: ``vocab (V,)`` distinct content words, their ``stems``, their synonym
    ``groups`` (``(V,)`` int64 bit sets, :mod:`.lexicon`), and per word occurrence its relation ``owner`` and
    its ``word`` id (both ``(O,)``). Once per graph."""

    size: int
    vocab: np.ndarray
    stems: list[str]
    owner: np.ndarray
    word: np.ndarray
    groups: np.ndarray


def relation_vocab(relation_texts) -> RelationVocab:
    """:class:`RelationVocab` of the relation texts (each read as words: :func:`content_words`)."""
    per = [content_words(str(t)) for t in relation_texts]
    flat = [w for p in per for w in p]
    vocab, word = np.unique(np.asarray(flat, dtype=object), return_inverse=True) if flat else \
        (np.zeros(0, dtype=object), np.zeros(0, np.int64))
    owner = np.repeat(np.arange(len(per)), [len(p) for p in per])
    return RelationVocab(len(per), vocab, [stem(w) for w in vocab.tolist()], owner, word.reshape(-1),
                         group_bits(vocab.tolist(), stem))


def relation_masks(ecx: EmbeddedComplex, question: str, relations, names=(), synonyms: bool = True) -> np.ndarray:
    """``(W,)`` int64: for each relation text, the bit set of the question words it names; ``relations``:
    a :class:`RelationVocab` or the texts themselves; ``synonyms``: words of one :mod:`.lexicon` group match
    too ("appeared" / "starred")."""
    rv = relations if isinstance(relations, RelationVocab) else relation_vocab(relations)
    out = np.zeros(rv.size, np.int64)
    q = np.asarray(question_words(question, names, synonyms), dtype=object)
    if q.size == 0 or rv.vocab.size == 0:
        return out
    hit = _same_form(q, rv.vocab, rv.stems)
    if synonyms:
        hit |= (group_bits(q.tolist(), stem)[:, None] & rv.groups[None, :]) != 0
    qv, wv = text_vectors(ecx, q.tolist()), text_vectors(ecx, rv.vocab.tolist())
    if qv.shape[1]:
        hit |= qv @ wv.T >= COSINE
    bits = (hit.astype(np.int64) << np.arange(q.size, dtype=np.int64)[:, None]).sum(axis=0)  # (V,)
    np.bitwise_or.at(out, rv.owner, bits[rv.word])
    return out


def count(masks: np.ndarray) -> np.ndarray:
    """Question words named: the popcount of each bit set."""
    return np.bitwise_count(np.asarray(masks, np.int64)).astype(np.float64)
