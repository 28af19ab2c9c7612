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


def name_confidence(ll, chosen: int) -> float:
    """``min(1, exp(ll[chosen]))``: the model's probability that the answer is (or starts with) the chosen
    name, ``ll`` the log-likelihoods of the reader's candidate names (the name reader's confidence; chosen
    over the mass on all names by how well it separates right from wrong answers on the whole general
    validation split: docs/results/confidence.md)."""
    z = [float(x) for x in ll]
    if not z or not 0 <= chosen < len(z):
        return 0.0
    return float(min(1.0, math.exp(z[chosen])))
