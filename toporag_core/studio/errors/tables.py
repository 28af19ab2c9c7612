"""The Error-analysis page's tables: one row per record, filters, accuracy per question type and
per generator template, verdict counts, the confusion matrix of a closed label set, and the
disagreements between two prediction files.
"""
from __future__ import annotations

import re

import pandas as pd

from ...metrics import normalize
from ...predictions import Predictions
from .display import citation_text, user_question
from .verdicts import VERDICTS, gold_answers, verdict

CLOSED_SETS = (("support", "counter"), ("yes", "no"))
OTHER = "(other)"
COLUMNS = ["line", "id", "question", "label", "prediction", "evidence", "cited", "correct", "low confidence",
           "verdict", "qtype", "template", "method", "dataset", "0-cells", "1-cells", "2-cells"]
FLAG_TEXT = {True: "yes", False: "no"}  # a record's low_confidence as the table shows it ("" when not recorded)


def predictions_frame(preds: Predictions) -> pd.DataFrame:
    """One row per record (label lists joined with ``|``) with its verdict and cell counts; ``template``
    is the generated-SceneGraphs template that wrote the question (``""`` for any other question);
    ``evidence`` what an evidence-first checkpoint wrote before its answer (``""`` otherwise); ``cited``
    how many of a cited answer's lines, or of an evidence sentence's claims, are in its context
    (:func:`~.display.citation_text`); ``low confidence``: the record's ``low_confidence`` (``toporag eval``
    and ``kg eval`` with a calibrated checkpoint; ``""`` when the file does not say)."""
    from ...tasks.scenes import question_template

    rows = []
    for r in preds.records:
        c = r["cells"]
        rows.append({"line": r["line"], "id": r["id"], "question": user_question(r["question"]),
                     "label": "|".join(gold_answers(r["label"])), "prediction": r["prediction"],
                     "evidence": r["evidence"], "cited": citation_text(r),
                     "correct": r["correct"], "low confidence": FLAG_TEXT.get(r.get("low_confidence"), ""),
                     "verdict": verdict(r)[0], "qtype": r["qtype"] or "untyped",
                     "template": question_template(str(r["question"]), r["qtype"] or None) or "",
                     "method": r["method"] or "unknown", "dataset": r["dataset"], "0-cells": len(c["nodes"]),
                     "1-cells": len(c["edges"]), "2-cells": len(c["cells2"])})
    return pd.DataFrame(rows, columns=COLUMNS)


def low_confidence_summary(df: pd.DataFrame) -> str | None:
    """``"Low confidence (the checkpoint's calibrated flag, as Ask shows it): 12 of 20 wrong answers flagged, 5 of
    80 right ones."`` over the records that say whether they were flagged (``None`` when none does)."""
    known = df[df["low confidence"] != ""]
    if known.empty:
        return None
    low = known["low confidence"] == "yes"
    wrong, right = ~known["correct"].astype(bool), known["correct"].astype(bool)
    unknown = f" ({len(df) - len(known)} records do not say)" if len(known) < len(df) else ""
    return (f"Low confidence (the checkpoint's calibrated flag, as Ask shows it): {int((low & wrong).sum())} of "
            f"{int(wrong.sum())} wrong answers flagged, {int((low & right).sum())} of {int(right.sum())} right ones"
            f"{unknown}.")


def filter_frame(df: pd.DataFrame, outcome: str = "all", qtypes=None, methods=None, verdicts=None,
                 templates=None) -> pd.DataFrame:
    """Rows matching every filter; ``outcome`` is ``all`` | ``correct`` | ``wrong``; an empty or
    ``None`` list means no filter on that column."""
    keep = pd.Series(True, index=df.index)
    if outcome == "correct":
        keep &= df["correct"]
    elif outcome == "wrong":
        keep &= ~df["correct"]
    for col, values in (("qtype", qtypes), ("method", methods), ("verdict", verdicts), ("template", templates)):
        if values:
            keep &= df[col].isin(list(values))
    return df[keep]


def _tally(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``*keys, n, correct, accuracy`` per group of ``keys`` (``df`` not empty)."""
    g = df.groupby(keys)["correct"].agg(["size", "sum"]).reset_index()
    g.columns = [*keys, "n", "correct"]
    g["correct"] = g["correct"].astype(int)
    g["accuracy"] = g["correct"] / g["n"]
    return g


def accuracy_by_type(df: pd.DataFrame) -> pd.DataFrame:
    """``qtype, n, correct, accuracy`` per question type, then an ``all`` row."""
    if df.empty:
        return pd.DataFrame(columns=["qtype", "n", "correct", "accuracy"])
    everything = df.assign(qtype="all")
    return pd.concat([_tally(df, ["qtype"]), _tally(everything, ["qtype"])]).reset_index(drop=True)


def accuracy_by_template(df: pd.DataFrame) -> pd.DataFrame:
    """``qtype, template, n, correct, accuracy`` per generated-SceneGraphs template (rows without a
    template left out; empty when there is none)."""
    part = df[df["template"] != ""] if not df.empty else df
    if part.empty:
        return pd.DataFrame(columns=["qtype", "template", "n", "correct", "accuracy"])
    return _tally(part, ["qtype", "template"]).reset_index(drop=True)


def accuracy_chart(acc: pd.DataFrame):
    """Plotly bar chart of accuracy per question type (count in the hover)."""
    import plotly.express as px

    fig = px.bar(acc, x="qtype", y="accuracy", text=acc["accuracy"].map("{:.1%}".format), hover_data=["n", "correct"],
                 range_y=[0, 1], title="Accuracy by question type")
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=40, b=10))
    return fig


def verdict_counts(df: pd.DataFrame) -> dict[str, int]:
    """How many rows of each verdict (every verdict present, zeros included)."""
    counts = df["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICTS}


def closed_label_set(preds: Predictions) -> tuple[str, ...] | None:
    """The closed label set of these records (ExplaGraphs: support/counter), or ``None``."""
    if not preds.records or any(isinstance(r["label"], list) for r in preds.records):
        return None  # WebQSP-style answer lists are an open set
    labels = {normalize(r["label"]) for r in preds.records}
    if any(r["dataset"] == "expla_graphs" for r in preds.records):
        return CLOSED_SETS[0]
    for s in CLOSED_SETS:
        if labels and labels <= set(s):
            return s
    return None


def predicted_label(prediction: str, labels: tuple[str, ...]) -> str:
    """The first label of the closed set the prediction mentions (the ExplaGraphs metric's rule),
    else ``(other)``."""
    m = re.search("|".join(re.escape(x) for x in labels), prediction.lower())
    return m.group(0) if m else OTHER


def confusion_matrix(df: pd.DataFrame, labels: tuple[str, ...]) -> pd.DataFrame:
    """Counts, gold labels as rows, predicted labels (plus ``(other)``) as columns."""
    gold = df["label"].map(lambda s: normalize(s))
    pred = df["prediction"].map(lambda p: predicted_label(p, labels))
    cols = [*labels, OTHER]
    m = pd.crosstab(pd.Categorical(gold, categories=list(labels)), pd.Categorical(pred, categories=cols),
                    dropna=False)
    m.index.name, m.columns.name = "gold", "predicted"
    return m.reindex(index=list(labels), columns=cols, fill_value=0).astype(int)


def compare(a: Predictions, b: Predictions) -> pd.DataFrame:
    """Examples (by id, in both files) that one file gets right and the other wrong."""
    bb = b.by_id()
    rows = []
    for r in a.records:
        o = bb.get(r["id"])
        if o is None or o["correct"] == r["correct"]:
            continue
        rows.append({"id": r["id"], "right": f"only {a.name}" if r["correct"] else f"only {b.name}",
                     "question": user_question(r["question"]), "label": "|".join(gold_answers(r["label"])),
                     f"prediction ({a.name})": r["prediction"], f"prediction ({b.name})": o["prediction"],
                     f"verdict ({a.name})": verdict(r)[0], f"verdict ({b.name})": verdict(o)[0]})
    return pd.DataFrame(rows)


def shared_ids(a: Predictions, b: Predictions) -> int:
    return len(set(a.by_id()) & set(b.by_id()))


def frame_csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode("utf-8")
