"""Error-analysis support: prediction files, failure verdicts, comparisons, exports, live evaluation.

Prediction files are the JSONL that ``toporag eval`` streams (one object per line: ``id,
question, prediction, label, correct, cells {nodes, edges, cells2, counts}, context, qtype,
method, dataset``). :func:`parse_predictions` keeps every good line and reports each bad one
with its line number (a half-written last line of a killed run is just one such line).

Failure verdicts (:func:`verdict`), for a wrong prediction:

* **the data names the answer-bearing objects** (SceneGraphs ``support``; the record carries
  ``support_covered``, written by ``toporag eval``): *retrieval failure* when retrieval missed one of
  them, else *reasoning/generation failure*. This is exact, and it comes first: a loop question's
  gold colour often occurs in the context on some other object, which the text rules below would
  count as "the evidence was there".
* **entity labels** (WebQSP answers, SceneGraphs objects / colours / materials): *retrieval
  failure* when no gold answer occurs (normalised, as whole words) in any retrieved cell text -
  node, edge triple or 2-cell - else *reasoning/generation failure* (the evidence was there).
* **non-entity labels** (ExplaGraphs ``support`` / ``counter``, ``yes`` / ``no``, numbers): the
  label can never be "in the retrieved cells", so the rule asks whether retrieval found
  anything *about the question*: *retrieval failure* when no retrieved node text occurs in the
  question (for ExplaGraphs: in either argument) - an empty subcomplex included - else
  *reasoning/generation failure*. This is a proxy, and the drill-down says which rule was used.

Showing a record: :func:`user_question` strips the benchmark's prompt wrapper (``Question: ...
Answer:``; ExplaGraphs' fixed support/counter instruction) so tables show what was asked (the
verdict still reads the whole prompt); :func:`gold_nodes` finds the retrieved nodes whose text
holds a gold answer (the GraphQA normalisation of :func:`~toporag_core.metrics.normalize`,
whole words), which the drill-down highlights. A file whose every line is bad is not a set of
predictions: :func:`require_records` says why (file, line, field) and the page keeps the
previous file.
"""
from __future__ import annotations

import io
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ..graph import TextualGraph
from ..metrics import normalize
from ..retrieval.citations import CITATION_SEP, NODE_ID, CitationGrammar

CORRECT, RETRIEVAL, REASONING = "correct", "retrieval failure", "reasoning/generation failure"
VERDICTS = (CORRECT, RETRIEVAL, REASONING)
CLOSED_SETS = (("support", "counter"), ("yes", "no"))
NON_ENTITY = {"support", "counter", "yes", "no", "true", "false"}
REQUIRED = ("id", "prediction", "label", "correct")
OTHER = "(other)"
VERDICT_RULE = ("Where the data names the answer-bearing objects (SceneGraphs), a wrong answer is a retrieval failure "
                "when retrieval missed one of them, else a reasoning/generation failure. Otherwise: a retrieval "
                "failure when no gold answer occurs in the retrieved cells, else a reasoning/generation failure; "
                "labels that are not graph entities (ExplaGraphs support/counter, yes/no, numbers): a retrieval "
                "failure when no retrieved node occurs in the question.")


# ----------------------------------------------------------------------------- loading
@dataclass
class LineError:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass
class Predictions:
    """The good records of one prediction file (each with its ``line``) and the bad lines."""

    name: str
    records: list[dict[str, Any]] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {str(r["id"]): r for r in self.records}


def _check(obj: Any) -> dict[str, Any]:
    """One parsed line -> a clean record, or ``ValueError`` naming the field."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    missing = [k for k in REQUIRED if k not in obj]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}")
    if not isinstance(obj["correct"], (bool, int)) or isinstance(obj["correct"], int) and obj["correct"] not in (0, 1):
        raise ValueError(f"field 'correct' must be true/false, got {obj['correct']!r}")
    if not isinstance(obj["label"], (str, int, float, list)):
        raise ValueError(f"field 'label' must be a string or a list, got {type(obj['label']).__name__}")
    cells = obj.get("cells") or {}
    if not isinstance(cells, dict):
        raise ValueError("field 'cells' must be an object {nodes, edges, cells2}")
    edges = cells.get("edges") or []
    if not isinstance(edges, list) or any(not isinstance(t, (list, tuple)) or len(t) != 3 for t in edges):
        raise ValueError("field 'cells.edges' must be a list of [head, relation, tail] triples")
    if obj.get("support_covered") is not None and not isinstance(obj["support_covered"], bool):
        raise ValueError(f"field 'support_covered' must be true/false, got {obj['support_covered']!r}")
    rec = dict(obj)
    rec["id"] = str(obj["id"])
    rec["prediction"] = "" if obj["prediction"] is None else str(obj["prediction"])
    rec["correct"] = bool(obj["correct"])
    rec["cells"] = {"nodes": [str(n) for n in cells.get("nodes") or []],
                    "edges": [[str(x) for x in t] for t in edges],
                    "cells2": [[str(n) for n in c] for c in cells.get("cells2") or [] if isinstance(c, list)]}
    for k in ("question", "context", "qtype", "method", "dataset", "evidence"):
        rec[k] = "" if obj.get(k) is None else str(obj[k])
    return rec


def parse_predictions(text: str, name: str = "predictions") -> Predictions:
    """Every good line of a predictions JSONL; a bad line becomes a :class:`LineError` (1-based
    line number) and the rest still loads. Blank lines are skipped; a repeated id keeps the
    first record and reports the repeat."""
    out = Predictions(name=name)
    seen: dict[str, int] = {}
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = _check(json.loads(line))
        except json.JSONDecodeError as e:
            out.errors.append(LineError(no, f"not valid JSON ({e.msg}, column {e.colno})"))
            continue
        except ValueError as e:
            out.errors.append(LineError(no, str(e)))
            continue
        if rec["id"] in seen:
            out.errors.append(LineError(no, f"id {rec['id']!r} repeats line {seen[rec['id']]}; kept the first"))
            continue
        seen[rec["id"]] = no
        rec["line"] = no
        out.records.append(rec)
    return out


def require_records(preds: Predictions) -> Predictions:
    """``preds`` when it has at least one good record, else ``ValueError`` naming the file and its
    first bad line(s) with the field (so a fully invalid file never replaces loaded predictions)."""
    if preds.records:
        return preds
    if not preds.errors:
        raise ValueError(f"{preds.name}: no predictions (the file is empty)")
    first = "; ".join(str(e) for e in preds.errors[:3])
    more = f" (and {len(preds.errors) - 3} more bad line(s))" if len(preds.errors) > 3 else ""
    raise ValueError(f"{preds.name}: no valid prediction in {len(preds.errors)} line(s): {first}{more}")


def load_predictions(source: str | os.PathLike | bytes, name: str | None = None) -> Predictions:
    """From a path or the bytes of an upload. A missing / unreadable file or non-UTF-8 bytes raise
    ``ValueError`` with the file name (the page shows it); bad lines never raise."""
    if isinstance(source, bytes):
        label = name or "upload"
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{label}: not UTF-8 text (byte {e.start})") from e
        return parse_predictions(text, label)
    path = Path(source).expanduser()
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"{path}: cannot read ({e.strerror or e})") from e
    return load_predictions(data, name or path.name)


# ----------------------------------------------------------------------------- showing a record
# The prompt wrappers the tasks put around a question (tasks/webqsp.py, tasks/scenes/dataset.py:
# "Question: {q}\nAnswer:"; io/explagraphs.py: two arguments, then a fixed instruction).
_QA_WRAPPER = re.compile(r"\A\s*Question:\s*(?P<q>.*?)\s*Answer:\s*\Z", re.S)
_EXPLA_WRAPPER = re.compile(r"\A\s*Argument 1:\s*(?P<a1>.*?)\s*\n\s*Argument 2:\s*(?P<a2>.*?)\s*\n\s*Question:"
                            r".*\bAnswer:\s*\Z", re.S)


def user_question(prompt: str) -> str:
    """The user's question inside a benchmark prompt: ``"Question: Q\\nAnswer:"`` -> ``Q``; an
    ExplaGraphs prompt -> ``"Argument 1: A | Argument 2: B"`` (its instruction is the same for
    every row); any other text is returned stripped, unchanged."""
    text = str(prompt or "")
    m = _EXPLA_WRAPPER.match(text)
    if m:
        return f"Argument 1: {m['a1']} | Argument 2: {m['a2']}"
    m = _QA_WRAPPER.match(text)
    if m and m["q"]:
        return m["q"]
    return text.strip()


def gold_nodes(node_texts: list[str], label: Any) -> dict[int, str]:
    """``{node index: the gold answer it holds}``, both texts normalised as the GraphQA metrics do
    (:func:`~toporag_core.metrics.normalize`): the nodes whose text *equals* a gold answer, or,
    when none does, those that contain one as whole words (``"Paris, France"`` for ``Paris``).
    Empty when the label is not a graph entity (a stance, yes/no, a number: no node holds it)."""
    if not label_is_entity(label):
        return {}
    golds = [(g, n) for g, n in ((g, normalize(g)) for g in gold_answers(label)) if n]
    texts = [normalize(t) for t in node_texts]
    for match in (lambda n, t: n == t, lambda n, t: f" {n} " in f" {t} "):  # equal first, else contained
        out: dict[int, str] = {}
        for i, t in enumerate(texts):
            hit = next((g for g, n in golds if match(n, t)), None)
            if hit is not None:
                out[i] = hit
        if out:
            return out
    return {}


def gold_note(node_texts: list[str], label: Any, found: dict[int, str]) -> str:
    """One line for the drill-down: which node(s) hold the gold answer, or why none is marked."""
    golds = " | ".join(gold_answers(label))
    if not label_is_entity(label):
        return f"The label ({golds}) is not a graph entity: no node can hold it."
    if not found:
        return f"No retrieved node holds the gold answer ({golds})."
    names = ", ".join(repr(node_texts[i]) for i in found)
    return f"Gold answer ({golds}) found in {len(found)} retrieved node(s), highlighted in gold: {names}."


# ----------------------------------------------------------------------------- verdicts
def gold_answers(label: Any) -> list[str]:
    """The label as a list of gold answer strings."""
    return [str(a) for a in label] if isinstance(label, list) else [str(label)]


def label_is_entity(label: Any) -> bool:
    """Whether a gold answer could be a graph entity (not a stance, a yes/no or a number)."""
    golds = [normalize(a) for a in gold_answers(label)]
    return any(g and g not in NON_ENTITY and not re.fullmatch(r"\d+(\s*\d+)*", g) for g in golds)


def _cell_texts(rec: dict[str, Any]) -> list[str]:
    c = rec["cells"]
    return [*c["nodes"], *(" ".join(t) for t in c["edges"]), *(" ".join(cyc) for cyc in c["cells2"])]


def _occurs(needle: str, hay: str) -> bool:
    """``needle`` in ``hay`` as whole words, both normalised."""
    n, h = normalize(needle), normalize(hay)
    return bool(n) and f" {n} " in f" {h} "


def verdict(rec: dict[str, Any]) -> tuple[str, str]:
    """``(verdict, reason)`` of one record (see the module docstring for the rules)."""
    if rec["correct"]:
        return CORRECT, "the prediction is correct"
    covered = rec.get("support_covered")
    if covered is False:
        return RETRIEVAL, "an answer-bearing object (the question's support) was not retrieved"
    if covered is True:
        return REASONING, "every answer-bearing object was retrieved, the answer is still wrong"
    if label_is_entity(rec["label"]):
        texts = _cell_texts(rec)
        hits = [a for a in gold_answers(rec["label"]) if any(_occurs(a, t) for t in texts)]
        if not hits:
            return RETRIEVAL, "no gold answer occurs in the retrieved cells"
        return REASONING, f"the gold answer {hits[0]!r} is in the retrieved cells, the answer is still wrong"
    anchored = [n for n in rec["cells"]["nodes"] if _occurs(n, rec.get("question", ""))]
    if not anchored:
        why = "nothing was retrieved" if not rec["cells"]["nodes"] else "no retrieved node occurs in the question"
        return RETRIEVAL, f"label is not a graph entity; {why}"
    return REASONING, (f"label is not a graph entity; retrieval found question concepts ({', '.join(anchored[:3])})"
                       ", the answer is still wrong")


# ----------------------------------------------------------------------------- citations


def is_citation(evidence: str | None) -> bool:
    """Whether evidence is cited context lines (names a node id such as ``[5]``), not a sentence."""
    return bool(evidence) and bool(NODE_ID.search(str(evidence)))


def citation_check(evidence: str, context: str) -> tuple[int, int, list[str]] | None:
    """Whether a cited answer (``--answer-style cited``: ``"cabinet [5]: yellow, wooden; cabinet [5]
    in front of clock [9]"``) cites lines that are really in its context: ``(found, cited, missing)``
    over its ``"; "``-separated parts, each compared with the context's lines (whitespace-stripped).
    ``None`` when the evidence names no node id (``[5]``: a sentence, not a citation) or there is no
    context. A wrong answer whose citations are all found read the wrong line; one with a missing
    citation wrote a line that does not exist."""
    if not context or not is_citation(evidence):
        return None
    parts = [p.strip() for p in str(evidence).split(CITATION_SEP) if p.strip()]
    missing = CitationGrammar(context).missing(evidence)
    return len(parts) - len(missing), len(parts), missing


def citation_text(rec: dict) -> str:
    """``"2/2"`` (cited lines found in the context / cited), ``""`` for a record without citations."""
    c = citation_check(rec.get("evidence", ""), rec.get("context", ""))
    return "" if c is None else f"{c[0]}/{c[1]}"


def citation_note(rec: dict) -> str:
    """The drill-down line about a cited answer's lines (``""`` without citations)."""
    c = citation_check(rec.get("evidence", ""), rec.get("context", ""))
    if c is None:
        return ""
    found, n, missing = c
    tail = "" if not missing else "; not in the context: " + " | ".join(repr(m) for m in missing[:3])
    return f"Citations:  {found} of {n} cited lines are in the context{tail}\n"


# ----------------------------------------------------------------------------- tables
COLUMNS = ["line", "id", "question", "label", "prediction", "evidence", "cited", "correct", "verdict", "qtype",
           "template", "method", "dataset", "0-cells", "1-cells", "2-cells"]


def predictions_frame(preds: Predictions) -> pd.DataFrame:
    """One row per record (label lists joined with ``|``) with its verdict and cell counts; ``template``
    is the generated-SceneGraphs template that wrote the question (``""`` for any other question);
    ``evidence`` what an evidence-first checkpoint wrote before its answer (``""`` otherwise); ``cited``
    how many of a cited answer's lines are in its context (:func:`citation_text`)."""
    from ..tasks.scenes import question_template

    rows = []
    for r in preds.records:
        c = r["cells"]
        rows.append({"line": r["line"], "id": r["id"], "question": user_question(r["question"]),
                     "label": "|".join(gold_answers(r["label"])), "prediction": r["prediction"],
                     "evidence": r["evidence"], "cited": citation_text(r),
                     "correct": r["correct"], "verdict": verdict(r)[0], "qtype": r["qtype"] or "untyped",
                     "template": question_template(str(r["question"]), r["qtype"] or None) or "",
                     "method": r["method"] or "unknown", "dataset": r["dataset"], "0-cells": len(c["nodes"]),
                     "1-cells": len(c["edges"]), "2-cells": len(c["cells2"])})
    return pd.DataFrame(rows, columns=COLUMNS)


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


# ----------------------------------------------------------------------------- subcomplex of a record
def subcomplex_graph(rec: dict[str, Any]) -> TextualGraph:
    """The retrieved cells of a record as a small graph: nodes by text (stored texts are all a
    record has, so two nodes with one text become one), edges from the stored triples."""
    c = rec["cells"]
    index: dict[str, int] = {}
    for n in c["nodes"]:
        index.setdefault(n, len(index))
    src, dst, rel = [], [], []
    for h, r, t in c["edges"]:
        src.append(index.setdefault(h, len(index)))
        dst.append(index.setdefault(t, len(index)))
        rel.append(r)
    import numpy as np

    return TextualGraph(node_text=list(index), edge_index=np.array([src, dst], dtype=np.int64).reshape(2, -1),
                        edge_text=rel, name=f"retrieved for {rec['id']}", meta={"question": rec.get("question", "")})


def matching_cells2(cx, rec: dict[str, Any]) -> list[int]:
    """2-cells of the re-lifted small complex ``cx`` whose node texts equal a stored 2-cell's."""
    want = {frozenset(cyc) for cyc in rec["cells"]["cells2"]}
    t = cx.graph.node_text
    return [f for f in range(cx.num_cells2) if frozenset(t[i] for i in cx.cell2_nodes(f).tolist()) in want]


def subcomplex_json(rec: dict[str, Any]) -> str:
    """The record's retrieved subcomplex (and the example it belongs to) as JSON text."""
    keys = ("id", "question", "label", "prediction", "correct", "qtype", "method", "dataset")
    return json.dumps({**{k: rec.get(k) for k in keys}, "verdict": verdict(rec)[0],
                       "nodes": rec["cells"]["nodes"], "edges": rec["cells"]["edges"],
                       "cells2": rec["cells"]["cells2"]}, indent=2, ensure_ascii=False)


def subcomplex_graphml(rec: dict[str, Any]) -> str:
    """GraphML (networkx) of the retrieved subcomplex: nodes and edges carry ``text``; each
    stored 2-cell is a graph attribute ``cell2_<j>`` (its node texts joined by `` -> ``)."""
    import networkx as nx

    g = subcomplex_graph(rec).to_networkx()
    g.graph = {"id": rec["id"], "question": rec.get("question", "")}
    for j, cyc in enumerate(rec["cells"]["cells2"]):
        g.graph[f"cell2_{j}"] = " -> ".join(cyc)
    buf = io.BytesIO()
    nx.write_graphml(g, buf)
    return buf.getvalue().decode("utf-8")


def frame_csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode("utf-8")


# ----------------------------------------------------------------------------- live evaluation
def prepare_slice(dataset: str, split: str, start: int, count: int, encoder, setting,
                  data_dir: str | os.PathLike | None = None, on_progress: Callable[[int, int], None] | None = None):
    """Preprocess only ``raw[split][start:start+count]`` (lift, embed, retrieve), reporting progress."""
    from ..tasks import load_raw
    from ..tasks.prep import prepare_example

    raw = load_raw(dataset, data_dir)
    if split not in raw:
        raise ValueError(f"{dataset} has no split {split!r}; one of {sorted(raw)}")
    rows = raw[split][max(0, int(start)):max(0, int(start)) + max(0, int(count))]
    out = []
    for i, r in enumerate(rows):
        out.append(prepare_example(r, encoder, setting))
        if on_progress:
            on_progress(i + 1, len(rows))
    return out


def run_evaluation(model, examples: list, dataset: str, out: str | os.PathLike, method: str = "toporag",
                   batch_size: int = 1, on_progress: Callable[[int, int], None] | None = None,
                   should_stop: Callable[[], bool] | None = None,
                   lock: threading.Lock | None = None) -> dict[str, Any]:
    """``toporag eval`` in small chunks: every chunk's predictions are appended (and flushed) to
    ``out`` before ``should_stop`` is asked again, so a stop keeps everything answered so far.
    ``lock``: held per chunk (the pipeline's, so Ask sessions interleave with a long run).

    Returns ``{"done", "total", "stopped", "path"}``.
    """
    import contextlib

    from ..evaluate import evaluate

    done, stopped = 0, False
    for i in range(0, len(examples), max(1, batch_size)):
        if should_stop is not None and should_stop():
            stopped = True
            break
        chunk = examples[i:i + max(1, batch_size)]
        with lock if lock is not None else contextlib.nullcontext():
            evaluate(model, chunk, dataset, out=out, batch_size=len(chunk), method=method, resume=True,
                     show_progress=False)
        done += len(chunk)
        if on_progress is not None:
            on_progress(done, len(examples))
    return {"done": done, "total": len(examples), "stopped": stopped, "path": str(out)}
