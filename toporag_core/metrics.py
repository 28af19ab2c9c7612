"""The GraphQA benchmark's metrics, exactly as G-Retriever's evaluation computes them, the exact McNemar
test beside them, and the name reader's confidence (:func:`name_confidence`), which the decoder computes and
the calibration recomputes from records: one definition for both."""
from __future__ import annotations

import math
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize(s: str) -> str:
    """Lower-case, drop punctuation, drop articles a/an/the, collapse white space."""
    s = str(s).lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


_ITEM_SEP = re.compile(r",(?=\s|$)")  # a list answer's separator: "1,000,000" is one item, "A, B" two


def answer_items(answer: str) -> list[str]:
    """The items of a list answer (``"Pat Nixon, Gerald Ford"`` -> two names), stripped, empty ones dropped;
    a comma inside a number is not a separator (``"2,679,285"`` is one item)."""
    return [x.strip() for x in _ITEM_SEP.split(str(answer)) if x.strip()]


def expla_correct(prediction: str, label: str) -> bool:
    """ExplaGraphs: the first ``support|counter`` match (case-insensitive) equals the label."""
    m = re.search(r"support|counter", str(prediction).lower())
    return bool(m) and m.group(0) == str(label).strip().lower()


def scene_correct(prediction: str, label: str) -> bool:
    """SceneGraphs: the label is contained in the prediction (case-insensitive)."""
    return str(label).strip().lower() in str(prediction).lower()


def webqsp_hit(prediction: str, answers: list[str] | str) -> bool:
    """WebQSP Hit: any normalised gold answer is a substring of the normalised prediction."""
    if isinstance(answers, str):
        answers = [answers]
    pred = normalize(prediction)
    return any(normalize(a) and normalize(a) in pred for a in answers)


METRICS = {"expla_graphs": expla_correct, "scene_graphs": scene_correct, "webqsp": webqsp_hit}


def is_correct(dataset: str, prediction: str, label) -> bool:
    """Dispatch to the dataset's metric."""
    try:
        fn = METRICS[dataset]
    except KeyError:
        raise ValueError(f"unknown dataset {dataset!r}; one of {sorted(METRICS)}") from None
    return fn(prediction, label)


def mcnemar_exact(a: list[bool], b: list[bool]) -> tuple[int, int, float]:
    """Paired comparison of two systems on the same examples: ``(only a right, only b right, p)``.

    Exact McNemar test (= two-sided sign test on the discordant pairs): under H0 each discordant
    example is a fair coin, ``p = min(1, 2 * P[Binomial(n, 1/2) <= min(x, y)])`` with ``n = x + y``.
    """
    from math import comb

    if len(a) != len(b):
        raise ValueError(f"mcnemar_exact: paired lists differ in length ({len(a)} vs {len(b)})")
    x = sum(1 for u, v in zip(a, b) if u and not v)
    y = sum(1 for u, v in zip(a, b) if v and not u)
    n = x + y
    if n == 0:
        return 0, 0, 1.0
    tail = sum(comb(n, i) for i in range(min(x, y) + 1)) / 2 ** n
    return x, y, min(1.0, 2 * tail)


QUESTION_FREE_WEIGHT = 0.5  # w below: chosen on the general validation split (docs/results/confidence.md)


def name_confidence(ll, chosen: int, ll_free: float | None = None, weight: float = QUESTION_FREE_WEIGHT) -> float:
    """The name reader's confidence in its chosen name ``c``, ``r / (1 + r)`` of the ratio

        r = p(c | question) / p(c | no question)^w = exp(ll[c] - w ll_free),

    ``ll`` the log-likelihoods of the reader's candidate names (that the answer is, or starts with, the name),
    ``ll_free`` the chosen name's log-likelihood under the same graph tokens and context with the question
    replaced by ``"N/A"`` (:data:`~toporag_core.model.dispatch.QUESTION_FREE`), ``w`` = :data:`QUESTION_FREE_WEIGHT`;
    without ``ll_free`` (records written before it), ``p / (1 + p)`` of the name's probability ``p``. ``r`` can
    exceed 1; ``r / (1 + r)`` keeps its order in (0, 1) without ties.

    Why the question-free term: a small model's probability of a name is low for a name it would hardly say
    anyway (a rare word, a long name), right or wrong, and high for the name the context makes salient
    whatever was asked. Dividing by part of the question-free probability credits what the question itself
    adds. On the general validation split it separates right from wrong names answers better than the plain
    probability (AUROC 0.81 against 0.79; test 0.81 against 0.76) and better than the full ratio ``w = 1``;
    the softmax over the names and the mass on all of them separate worse (docs/results/confidence.md)."""
    z = [float(x) for x in ll]
    if not z or not 0 <= chosen < len(z):
        return 0.0
    s = z[chosen] - (0.0 if ll_free is None else weight * float(ll_free))
    return float(1.0 / (1.0 + math.exp(-s))) if s > -700 else 0.0
