"""The Error-analysis page (AppTest) and toporag_core.studio.errors.

Prediction files are written here with known outcomes, so every count on the page is checked
against numbers worked out by hand; one test runs a live evaluation from the page on a tiny
registered dataset with the tiny checkpoint and checks the page against the file it streamed.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import networkx as nx
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from toporag_core.tasks import TASKS, RawExample, Task, register_task  # noqa: E402
from toporag_core.graph import TextualGraph  # noqa: E402
from toporag_core.cells.lift import lift  # noqa: E402
from toporag_core.studio import errors  # noqa: E402
from toporag_core.model.tiny import build_tiny_checkpoint  # noqa: E402
from toporag_core.predictions import field_names  # noqa: E402

MISSING_LABEL = field_names('label')  # how a missing field is named: with the names read for it
MISSING_BOTH = f"{field_names('prediction')}, {MISSING_LABEL}"

ROOT = Path(__file__).resolve().parents[1]
Q_GUNS = "Argument 1: Guns cause harm. Argument 2: Guns should be banned. Answer support or counter:"


def rec(id, label, prediction, correct, nodes=(), edges=(), cells2=(), question=Q_GUNS, qtype="", method="toporag",
        dataset="expla_graphs"):
    return {"id": id, "question": question, "prediction": prediction, "label": label, "correct": correct,
            "cells": {"nodes": list(nodes), "edges": [list(t) for t in edges], "cells2": [list(c) for c in cells2],
                      "counts": {}}, "context": f"context of {id}", "qtype": qtype, "method": method,
            "dataset": dataset}


TRI = [("guns", "causes", "harm"), ("harm", "capable of", "death"), ("death", "not desires", "guns")]
# Outcomes by hand: correct 1 and 5; 2 = reasoning (guns/harm are in the question); 3 = retrieval (nothing
# retrieved); 4 = retrieval (retrieved 'sky', not in the question). Accuracy 2/5.
A_RECORDS = [rec("1", "support", "support", True, ["guns", "harm", "death"], TRI, [["guns", "harm", "death"]], qtype="t1"),
             rec("2", "counter", "support.", False, ["guns", "harm"], TRI[:1], qtype="t1"),
             rec("3", "support", "counter", False, qtype="t2"),
             rec("4", "counter", "I do not know", False, ["sky"], qtype="t2"),
             rec("5", "counter", "Counter", True, ["guns"], qtype="t2")]
B_RECORDS = [rec("1", "support", "counter", False, method="g-retriever"),
             rec("2", "counter", "counter", True, method="g-retriever"),
             rec("3", "support", "counter", False, method="g-retriever"),
             rec("5", "counter", "counter", True, method="g-retriever")]


def write_jsonl(path: Path, records, bad: dict[int, str] | None = None) -> Path:
    """Records as JSONL; ``bad`` puts raw text lines at given 1-based line numbers."""
    lines = [json.dumps(r) for r in records]
    for no, text in sorted((bad or {}).items()):
        lines.insert(no - 1, text)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(autouse=True)
def _test_mode(monkeypatch):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")


def page() -> AppTest:
    return AppTest.from_file(str(ROOT / "pages" / "5_Error_analysis.py"), default_timeout=120)


def load(at: AppTest, path: Path, prefix: str = "err") -> AppTest:
    at.text_input(key=f"{prefix}_path").set_value(str(path)).run()
    at.button(key=f"{prefix}_load_path").click()
    return at.run()


def frame(at: AppTest, column: str):
    """The first dataframe on the page with ``column`` (the predictions table has ``line``, the
    comparison ``right``)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


# ====================================================================== page
def test_loading_a_file_shows_accuracy_failure_counts_and_bad_lines(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", A_RECORDS, bad={4: '{"id": "x", "prediction": "supp', 7: '{"id": "y"}'})
    at = load(page().run(), path)
    assert not at.exception and not at.error
    m = metrics(at)
    assert (m["Examples"], m["Accuracy"], m["Correct"]) == ("5", "40.0%", "2")
    assert (m["Retrieval failures"], m["Reasoning/generation failures"]) == ("2", "1")
    warn = at.warning[0].value
    assert "2 bad line(s) skipped, 5 loaded" in warn
    assert "line 4: not valid JSON" in warn and errors.escape_markdown(f"a.jsonl, line 7: missing field(s) {MISSING_BOTH}") in warn
    table = frame(at, "line")
    assert list(table["id"]) == ["1", "2", "3", "4", "5"]
    assert list(table["line"]) == [1, 2, 3, 5, 6]  # line numbers of the file, around the bad lines
    confusion = at.dataframe[0].value
    assert confusion.loc["support"].tolist() == [1, 1, 0] and confusion.loc["counter"].tolist() == [1, 1, 1]


def test_filters_drill_down_and_exports(tmp_path):
    at = load(page().run(), write_jsonl(tmp_path / "a.jsonl", A_RECORDS))
    at.radio(key="err_outcome").set_value("wrong").run()
    at.multiselect(key="err_verdicts").set_value([errors.RETRIEVAL]).run()
    assert list(frame(at, "line")["id"]) == ["3", "4"]
    assert at.selectbox(key="err_pick").options == ["3: " + Q_GUNS[:90], "4: " + Q_GUNS[:90]]
    assert any("Verdict: retrieval failure" in md.value and "nothing was retrieved" in md.value for md in at.markdown)
    at.multiselect(key="err_verdicts").set_value([]).run()
    at.radio(key="err_outcome").set_value("all").run()
    at.multiselect(key="err_qtypes").set_value(["t1"]).run()
    assert list(frame(at, "line")["id"]) == ["1", "2"]
    at.selectbox(key="err_pick").set_value("1").run()
    assert any("Verdict: correct" in md.value for md in at.markdown)
    assert "context of 1" in [c.value for c in at.code]
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Table as CSV", "Subcomplex as JSON", "Subcomplex as GraphML"]


def test_compare_lists_the_disagreements(tmp_path):
    at = load(page().run(), write_jsonl(tmp_path / "topo.jsonl", A_RECORDS))
    at = load(at, write_jsonl(tmp_path / "gret.jsonl", B_RECORDS), prefix="err_b")
    assert not at.exception
    diff = frame(at, "right")
    assert list(diff["id"]) == ["1", "2"]
    assert list(diff["right"]) == ["only topo.jsonl", "only gret.jsonl"]
    assert any("4 examples in both files; 2 where exactly one is right" in c.value for c in at.caption)
    at.selectbox(key="err_diff_pick").set_value("2").run()
    verdicts = [md.value for md in at.markdown if md.value.startswith("**Verdict")]
    assert any("reasoning/generation failure" in v for v in verdicts) and any("correct" in v for v in verdicts)


def test_missing_file_is_an_error_and_keeps_the_loaded_set(tmp_path):
    at = load(page().run(), write_jsonl(tmp_path / "a.jsonl", A_RECORDS))
    at = load(at, tmp_path / "nope.jsonl")
    assert not at.exception
    assert "nope.jsonl: cannot read" in at.error[0].value
    assert metrics(at)["Examples"] == "5"


def tiny_dataset(_data_dir):
    graphs = [[("cats", "are", "pets"), ("pets", "need", "care"), ("care", "helps", "cats")],
              [("guns", "cause", "harm"), ("harm", "is", "bad")],
              [("sun", "gives", "energy"), ("energy", "powers", "homes"), ("homes", "face", "sun")]]
    out = []
    for i, t in enumerate(graphs):
        label = "support" if i % 2 == 0 else "counter"
        out.append(RawExample(id=f"e{i}", graph=TextualGraph.from_triples(t), question=f"{t[0][0]} and {t[-1][2]}?",
                              label=label, answer=label, qtype=f"q{i % 2}"))
    return {"train": out, "val": out, "test": out}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny_ckpt") / "ckpt")


@pytest.fixture
def tiny_studio(tmp_path, monkeypatch, checkpoint) -> Path:
    """The page set up to evaluate the tiny checkpoint on the registered ``tiny_studio`` task; the cache folder."""
    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(checkpoint))
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))
    if "tiny_studio" not in TASKS:
        register_task(Task("tiny_studio", tiny_dataset, metric="expla_graphs"))
    return tmp_path / "cache"


def run_evaluation(count: int):
    """Open the page and run an evaluation of ``count`` examples of ``tiny_studio`` from it."""
    at = page().run()
    at.selectbox(key="err_dataset").set_value("tiny_studio")
    at.number_input(key="err_count").set_value(count)
    at.button(key="err_run").click()
    return at.run()


def test_run_an_evaluation_from_the_page(tmp_path, tiny_studio):
    at = run_evaluation(3)
    assert not at.exception and not at.error
    files = list((tmp_path / "cache" / "studio_eval").glob("tiny_studio-test-0-3-toporag-*.jsonl"))
    assert len(files) == 1
    lines = [json.loads(x) for x in files[0].read_text().splitlines()]
    assert [r["id"] for r in lines] == ["e0", "e1", "e2"] and all(r["cells"]["nodes"] for r in lines)
    m = metrics(at)
    assert m["Examples"] == "3"
    assert m["Accuracy"] == f"{sum(r['correct'] for r in lines) / 3:.1%}"
    assert any("Finished: 3 of 3 examples answered" in s.value for s in at.success)


def test_run_without_the_data_shows_an_error_and_keeps_the_loaded_set(tmp_path, monkeypatch, checkpoint):
    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(checkpoint))
    monkeypatch.setenv("TOPORAG_SHARED_DATA", str(tmp_path / "nowhere"))
    at = load(page().run(), write_jsonl(tmp_path / "a.jsonl", A_RECORDS))
    at.selectbox(key="err_dataset").set_value("webqsp")
    at.button(key="err_run").click()
    at.run()
    assert not at.exception
    assert "shared data folder not found" in at.error[0].value
    assert metrics(at)["Examples"] == "5"


# ====================================================================== library
def test_parse_reports_each_bad_line_and_keeps_the_rest():
    text = "\n".join([json.dumps(A_RECORDS[0]), "", "[1, 2]", json.dumps({**A_RECORDS[1], "correct": "yes"}),
                      json.dumps(A_RECORDS[2]), json.dumps(A_RECORDS[2]), json.dumps({**A_RECORDS[3], "cells": {
                          "edges": [["a", "b"]]}}), '{"id": 9, "prediction": "x", "label": "y", "correct": tr'])
    p = errors.parse_predictions(text, "f.jsonl")
    assert [r["id"] for r in p.records] == ["1", "3"]
    assert [(e.line, e.message.split(" (")[0]) for e in p.errors] == [
        (3, "expected a JSON object, got list"), (4, "field 'correct' must be true/false, got 'yes'"),
        (6, "id '3' repeats line 5; kept the first"),
        (7, "field 'cells.edges' must be a list of [head, relation, tail] triples"), (8, "not valid JSON")]


def test_load_predictions_bad_bytes_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="up.jsonl: not UTF-8"):
        errors.load_predictions(b"\xff\xfe{", "up.jsonl")
    with pytest.raises(ValueError, match="cannot read"):
        errors.load_predictions(tmp_path / "missing.jsonl")


def test_verdicts_for_entity_and_non_entity_labels():
    v = lambda r: errors.verdict(errors.check_record(r))[0]  # noqa: E731
    assert [v(r) for r in A_RECORDS] == [errors.CORRECT, errors.REASONING, errors.RETRIEVAL, errors.RETRIEVAL,
                                         errors.CORRECT]
    web = dict(question="Where is the Eiffel Tower?", dataset="webqsp")
    assert v(rec("w1", ["Paris"], "London", False, ["Paris", "France"], **web)) == errors.REASONING
    assert v(rec("w2", ["Berlin", "Bonn"], "Paris", False, ["Paris"], **web)) == errors.RETRIEVAL
    # the answer only appears inside an edge triple: it was retrieved
    assert v(rec("w3", ["Seine"], "x", False, ["Paris"], [("Paris", "on river", "Seine")], **web)) == errors.REASONING
    assert v(rec("w4", ["Par"], "x", False, ["Paris"], **web)) == errors.RETRIEVAL  # whole words only
    # where the record says whether the answer-bearing objects were retrieved, that decides: a loop
    # question's gold colour on another retrieved object does not make a missed loop "reasoning"
    scene = dict(question="Question: The cup is on the table ...: what colour is the cup?", dataset="scene_graphs")
    red_elsewhere = rec("s1", "red", "blue", False, ["name: chair; attribute: red"], **scene)
    assert v(red_elsewhere) == errors.REASONING  # text rule: "red" occurs in a retrieved cell
    assert v({**red_elsewhere, "support_covered": False}) == errors.RETRIEVAL
    assert v({**rec("s2", "red", "blue", False, ["name: mug"], **scene), "support_covered": True}) == errors.REASONING
    assert v({**red_elsewhere, "support_covered": False, "correct": True}) == errors.CORRECT
    with pytest.raises(ValueError, match="field 'support_covered' must be true/false"):
        errors.check_record({**red_elsewhere, "support_covered": "no"})
    assert not errors.label_is_entity("Support") and not errors.label_is_entity("12")
    assert errors.label_is_entity(["no", "Paris"])


def test_accuracy_by_type_confusion_and_closed_sets():
    p = errors.parse_predictions("\n".join(json.dumps(r) for r in A_RECORDS))
    df = errors.predictions_frame(p)
    acc = errors.accuracy_by_type(df).set_index("qtype")
    assert acc.loc["t1", "accuracy"] == 0.5 and acc.loc["t2", "n"] == 3 and acc.loc["all", "correct"] == 2
    assert errors.closed_label_set(p) == ("support", "counter")
    assert errors.predicted_label("I'd say Counter, not support", ("support", "counter")) == "counter"
    cm = errors.confusion_matrix(df, ("support", "counter"))
    assert int(cm.values.sum()) == 5 and cm.loc["counter", errors.OTHER] == 1
    web = errors.parse_predictions(json.dumps(rec("w", ["Paris"], "x", False, dataset="webqsp")))
    assert errors.closed_label_set(web) is None
    yesno = errors.parse_predictions(json.dumps(rec("s", "yes", "no", False, dataset="scene_graphs")))
    assert errors.closed_label_set(yesno) == ("yes", "no")
    assert errors.verdict_counts(df) == {errors.CORRECT: 2, errors.RETRIEVAL: 2, errors.REASONING: 1,
                                         errors.UNKNOWN: 0}
    assert list(errors.filter_frame(df, "wrong", qtypes=["t2"])["id"]) == ["3", "4"]


def test_compare_only_counts_shared_ids():
    a = errors.parse_predictions("\n".join(json.dumps(r) for r in A_RECORDS), "a")
    b = errors.parse_predictions("\n".join(json.dumps(r) for r in B_RECORDS), "b")
    d = errors.compare(a, b)
    assert list(zip(d["id"], d["right"])) == [("1", "only a"), ("2", "only b")]
    assert errors.shared_ids(a, b) == 4 and errors.compare(a, a).empty


def test_exports_are_valid_json_graphml_and_csv():
    r = errors.check_record(A_RECORDS[0])
    d = json.loads(errors.subcomplex_json(r))
    assert d["nodes"] == ["guns", "harm", "death"] and d["edges"] == [list(t) for t in TRI]
    assert d["verdict"] == errors.CORRECT
    g = nx.read_graphml(io.BytesIO(errors.subcomplex_graphml(r).encode()))
    assert sorted(g.nodes[n]["text"] for n in g.nodes) == ["death", "guns", "harm"]
    assert sorted(e["text"] for _, _, e in g.edges(data=True)) == sorted(t[1] for t in TRI)
    assert g.graph["cell2_0"] == "guns -> harm -> death"
    small = errors.subcomplex_graph(r)
    cx = lift(small)
    assert errors.matching_cells2(cx, r) == [0]  # the stored 2-cell is the re-lifted triangle
    csv = errors.frame_csv(errors.predictions_frame(errors.Predictions("x", [dict(r, line=1)])))
    assert csv.decode().splitlines()[0].startswith("line,id,question,label,prediction,evidence,cited,correct,low confidence,verdict")


def test_run_evaluation_stops_between_chunks_and_keeps_what_it_wrote(tmp_path):
    from toporag_core.retrieval import RetrievalSetting
    from toporag_core.tasks.prep import PrepConfig, prepare_example
    from toporag_core.embed import HashingEncoder
    from toporag_core.model.tiny import tiny_model

    model = tiny_model(in_dim=16)
    raw = tiny_dataset(None)["test"]
    exs = [prepare_example(r, HashingEncoder(dim=16), PrepConfig(RetrievalSetting())) for r in raw]
    calls = []
    out = tmp_path / "p.jsonl"
    res = errors.run_evaluation(model, exs, "expla_graphs", out, on_progress=lambda d, n: calls.append((d, n)),
                                should_stop=lambda: len(calls) >= 2)
    assert res == {"done": 2, "total": 3, "stopped": True, "path": str(out)}
    assert calls == [(1, 3), (2, 3)]
    p = errors.load_predictions(out)
    assert [r["id"] for r in p.records] == ["e0", "e1"] and not p.errors


# ====================================================================== issue 12: banner, invalid files, questions, gold
def test_finished_banner_belongs_to_the_evaluated_file_only(tmp_path, tiny_studio):
    at = run_evaluation(2)
    assert any("Finished: 2 of 2 examples answered" in s.value for s in at.success)
    at = load(at, write_jsonl(tmp_path / "a.jsonl", A_RECORDS))
    assert not at.exception and metrics(at)["Examples"] == "5"
    assert not any("Finished" in s.value for s in at.success)  # the banner was about the other file
    # a failed load keeps a.jsonl, and the old banner does not come back either
    at = load(at, tmp_path / "nope.jsonl")
    assert not any("Finished" in s.value for s in at.success) and metrics(at)["Examples"] == "5"


def test_fully_invalid_file_keeps_the_previous_predictions(tmp_path):
    at = load(page().run(), write_jsonl(tmp_path / "a.jsonl", A_RECORDS))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "prediction": "x"}\nnot json\n')
    at = load(at, bad)
    assert not at.exception
    err = at.error[0].value
    assert "bad.jsonl: no valid prediction in 2 line(s)" in err
    assert errors.escape_markdown(f"line 1: missing field(s) {MISSING_LABEL}") in err and "line 2: not valid JSON" in err
    assert "Still using the previously loaded predictions: a.jsonl." in [i.value for i in at.info]
    m = metrics(at)
    assert (m["Examples"], m["Accuracy"]) == ("5", "40.0%")
    assert not any("no valid predictions" in w.value for w in at.warning)
    # the same for the comparison file, and a good file afterwards clears the error
    at = load(at, write_jsonl(tmp_path / "gret.jsonl", B_RECORDS), prefix="err_b")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    at = load(at, empty, prefix="err_b")
    assert any("empty.jsonl: no predictions (the file is empty)" in e.value for e in at.error)
    assert "Still using the previously loaded second file: gret.jsonl." in [i.value for i in at.info]
    assert list(frame(at, "right")["id"]) == ["1", "2"]
    at = load(at, write_jsonl(tmp_path / "b.jsonl", B_RECORDS))
    assert metrics(at)["Examples"] == "4" and not any("bad.jsonl" in e.value for e in at.error)


def test_fully_invalid_first_file_loads_nothing(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1"}\n')
    at = load(page().run(), bad)
    assert not at.exception
    assert errors.escape_markdown(f"line 1: missing field(s) {MISSING_BOTH}") in at.error[0].value
    assert not any("Still using" in i.value for i in at.info) and not at.metric


def web_records():
    from toporag_core.io.explagraphs import explagraphs_question
    from toporag_core.tasks.scenes.dataset import scene_question

    w = dict(dataset="webqsp", qtype="", method="toporag")
    return [rec("w1", ["Paris"], "London", False, ["Paris", "France", "Paris Hilton"],
                [("Eiffel Tower", "located in", "Paris"), ("Paris", "capital of", "France")],
                question="Question: Where is the Eiffel Tower?\nAnswer:", **w),
            rec("w2", ["Berlin"], "Paris", False, ["Paris", "France"], [("Paris", "capital of", "France")],
                question="Question: What is the capital of Germany?\nAnswer:", **w),
            rec("s1", "red", "red", True, ["cup", "red"], [("cup", "has colour", "red")],
                question=scene_question("What colour is the cup?"), dataset="scene_graphs"),
            rec("e1", "support", "support", True, ["guns", "harm"], TRI[:1],
                question=explagraphs_question("Guns cause harm.", "Guns should be banned."))]


def test_question_column_and_drill_down_show_the_question_without_the_prompt_wrapper(tmp_path):
    at = load(page().run(), write_jsonl(tmp_path / "w.jsonl", web_records()))
    assert not at.exception
    questions = list(frame(at, "line")["question"])
    assert questions == ["Where is the Eiffel Tower?", "What is the capital of Germany?", "What colour is the cup?",
                         "Argument 1: Guns cause harm. | Argument 2: Guns should be banned."]
    assert at.selectbox(key="err_pick").options[0] == "w1: Where is the Eiffel Tower?"
    shown = [t.value for t in at.text if t.value.startswith("Question:")][0]
    assert shown.splitlines()[0] == "Question:   Where is the Eiffel Tower?" and "Answer:" not in shown


def test_drill_down_highlights_the_gold_answer_nodes(tmp_path):
    import re

    from toporag_core.studio import graph_view
    from tests._apptest import iframes

    def drawn(page_html):  # the vis-network node records, by node id
        return {n["id"]: n for n in json.loads(re.search(r"nodes = new vis\.DataSet\((.*?)\);", page_html).group(1))}

    at = load(page().run(), write_jsonl(tmp_path / "w.jsonl", web_records()))
    graph = errors.subcomplex_graph(errors.check_record(web_records()[0]))
    paris = graph.node_text.index("Paris")
    nodes = drawn(iframes(at)[0])
    assert nodes[paris]["color"] == graph_view.NODE_HIGHLIGHT
    assert "holds the gold answer" in nodes[paris]["title"]
    others = [i for i in nodes if i != paris]
    assert others and all(nodes[i]["color"] != graph_view.NODE_HIGHLIGHT for i in others)  # not 'Paris Hilton'
    assert any("Gold answer (Paris) found in 1 retrieved node(s), highlighted in gold: 'Paris'" in md.value
               for md in at.markdown)
    at.selectbox(key="err_pick").set_value("w2").run()
    assert any("No retrieved node holds the gold answer (Berlin)" in md.value for md in at.markdown)
    assert all(n["color"] != graph_view.NODE_HIGHLIGHT for n in drawn(iframes(at)[0]).values())
    at.selectbox(key="err_pick").set_value("e1").run()
    assert any("(support) is not a graph entity" in md.value for md in at.markdown)


def test_user_question_strips_every_task_wrapper():
    from toporag_core.io.explagraphs import explagraphs_question
    from toporag_core.tasks.scenes.dataset import scene_question

    assert errors.user_question(scene_question("What is left of the cup?")) == "What is left of the cup?"
    assert errors.user_question("Question: Who wrote Hamlet?\nAnswer:") == "Who wrote Hamlet?"  # WebQSP's
    assert errors.user_question(explagraphs_question("A b.", "C d.")) == "Argument 1: A b. | Argument 2: C d."
    assert errors.user_question("  no wrapper here?  ") == "no wrapper here?"
    assert errors.user_question(Q_GUNS) == Q_GUNS  # not a task wrapper: unchanged
    assert errors.user_question("Question: \nAnswer:") == "Question: \nAnswer:"  # nothing inside: kept as is


def test_gold_nodes_use_the_answer_normalisation():
    texts = ["The Paris", "France", "Paris Hilton", "Parisian"]
    assert errors.gold_nodes(texts, ["paris"]) == {0: "paris"}  # equal after normalisation (article dropped)
    assert errors.gold_nodes(["Paris, France", "Lyon"], "Paris") == {0: "Paris"}  # else contained, whole words
    assert errors.gold_nodes(["Parisian"], "Paris") == {}
    assert errors.gold_nodes(["Bonn", "Berlin."], ["Berlin", "Bonn"]) == {0: "Bonn", 1: "Berlin"}
    assert errors.gold_nodes(["support"], "support") == {}  # a stance is not a graph entity
    assert errors.gold_note(["Bonn"], ["Berlin"], {}) == "No retrieved node holds the gold answer (Berlin)."


def test_require_records_names_file_line_and_field():
    bad = errors.parse_predictions('{"id": 1, "prediction": "x", "label": "y", "correct": "no"}', "f.jsonl")
    with pytest.raises(ValueError, match=r"f\.jsonl: no valid prediction in 1 line\(s\): line 1: field 'correct'"):
        errors.require_records(bad)
    good = errors.parse_predictions(json.dumps(A_RECORDS[0]))
    assert errors.require_records(good) is good


SCENE_Q = "Question: {}\nAnswer:"
SCENE_RECORDS = [rec("s1", "picture", "jar", False, question=SCENE_Q.format("What is behind the oven?"), qtype="1-cell",
                     dataset="scene_graphs"),
                 rec("s2", "cup", "cup", True, question=SCENE_Q.format("What is on the table?"), qtype="1-cell",
                     dataset="scene_graphs"),
                 rec("s3", "yes", "yes", True, question=SCENE_Q.format("Is the cup to the left of the plate?"),
                     qtype="1-cell", dataset="scene_graphs"),
                 rec("s4", "red", "red", True, question=SCENE_Q.format("What colour is the cup?"), qtype="0-cell",
                     dataset="scene_graphs")]


def test_scene_predictions_split_by_template_and_filter(tmp_path):
    """Generated-SceneGraphs predictions get a template column, an accuracy-by-template table and a
    template filter; other predictions (ExplaGraphs above) get neither."""
    df = errors.predictions_frame(errors.parse_predictions(
        "\n".join(json.dumps(r) for r in SCENE_RECORDS + A_RECORDS[:1]), "mixed.jsonl"))
    assert list(df["template"]) == ["one-hop", "one-hop", "is-rel", "colour", ""]
    acc = errors.accuracy_by_template(df)
    assert acc.to_dict("records") == [
        {"qtype": "0-cell", "template": "colour", "n": 1, "correct": 1, "accuracy": 1.0},
        {"qtype": "1-cell", "template": "is-rel", "n": 1, "correct": 1, "accuracy": 1.0},
        {"qtype": "1-cell", "template": "one-hop", "n": 2, "correct": 1, "accuracy": 0.5}]
    assert list(errors.filter_frame(df, templates=["one-hop"])["id"]) == ["s1", "s2"]
    assert errors.accuracy_by_template(errors.predictions_frame(errors.parse_predictions(
        "\n".join(json.dumps(r) for r in A_RECORDS), "a.jsonl"))).empty

    at = load(page().run(), write_jsonl(tmp_path / "scenes.jsonl", SCENE_RECORDS))
    assert not at.exception and not at.error
    assert at.multiselect(key="err_templates").options == ["colour", "is-rel", "one-hop"]
    table = next(d.value for d in at.dataframe if "template" in d.value.columns and "line" not in d.value.columns)
    assert table.set_index("template").loc["one-hop", "accuracy"] == 0.5
    at.multiselect(key="err_templates").set_value(["one-hop"]).run()
    assert list(frame(at, "line")["id"]) == ["s1", "s2"]
    at = load(page().run(), write_jsonl(tmp_path / "expla.jsonl", A_RECORDS))
    assert not at.exception and not any(m.key == "err_templates" for m in at.multiselect)


def test_evidence_column_and_drill_down_show_what_the_model_wrote_first(tmp_path):
    """An evidence-first predictions file: the table has the evidence beside the prediction (empty for
    rows without it) and the drill-down prints it under the prediction."""
    q = "Question: Is the metal cup gray?\nAnswer:"
    recs = [{**rec("s1", "no", "yes", False, ["cup"], question=q, qtype="0-cell", dataset="scene_graphs"),
             "evidence": "The metal cup is gray"},
            rec("s2", "red", "red", True, ["cup"], question="Question: What colour is the cup?\nAnswer:",
                qtype="0-cell", dataset="scene_graphs")]
    at = load(page().run(), write_jsonl(tmp_path / "e.jsonl", recs))
    assert not at.exception
    assert list(frame(at, "line")["evidence"]) == ["The metal cup is gray", ""]
    shown = [t.value for t in at.text if t.value.startswith("Question:")][0]
    assert "Prediction: yes\nEvidence:   The metal cup is gray\n" in shown


def test_cited_answers_show_how_many_of_their_lines_are_in_the_context(tmp_path):
    """A cited predictions file (``--answer-style cited``): the ``cited`` column counts the evidence's
    ``"; "`` parts found among the context lines, and the drill-down names a line the model wrote that
    the context does not have (a hallucinated citation, not a misreading). Sentence evidence is no citation: its
    claims are checked against the context instead."""
    ctx = "nodes\ncabinet [5]: yellow, wooden\nclock [9]: white, metal\n\nrelations\ncabinet [5] in front of clock [9]"
    q = "Question: What is behind the yellow cabinet?\nAnswer:"
    recs = [{**rec("s1", "clock", "clock", True, ["cabinet", "clock"], question=q, qtype="1-cell",
                   dataset="scene_graphs"), "context": ctx,
             "evidence": "cabinet [5]: yellow, wooden; cabinet [5] in front of clock [9]"},
            {**rec("s2", "clock", "lamp", False, ["cabinet", "clock"], question=q, qtype="1-cell",
                   dataset="scene_graphs"), "context": ctx,
             "evidence": "cabinet [5]: yellow, wooden; cabinet [5] in front of lamp [3]"},
            {**rec("s3", "no", "no", True, ["cup"], question="Question: Is the cup red?\nAnswer:", qtype="0-cell",
                   dataset="scene_graphs"), "context": ctx, "evidence": "The cup is white"}]
    at = load(page().run(), write_jsonl(tmp_path / "c.jsonl", recs))
    assert not at.exception
    assert list(frame(at, "line")["cited"]) == ["2/2", "1/2", "0/1"]  # s3: its sentence's one claim
    at.selectbox(key="err_pick").set_value("s2").run()
    shown = [t.value for t in at.text if t.value.startswith("Question:")][0]
    assert ("Citations:  1 of 2 cited lines are in the context; not in the context: "
            "'cabinet [5] in front of lamp [3]'\n") in shown
    at.selectbox(key="err_pick").set_value("s1").run()
    shown = [t.value for t in at.text if t.value.startswith("Question:")][0]
    assert "Citations:  2 of 2 cited lines are in the context\n" in shown
    at.selectbox(key="err_pick").set_value("s3").run()
    shown = [t.value for t in at.text if t.value.startswith("Question:")][0]
    assert "Evidence:   The cup is white\n" in shown and "Citations:" not in shown
    assert ("Evidence:  0 of 1 claims of the evidence are facts of the context; not in the context: "
            "'The cup is white'\n") in shown  # the context has no cup


# ====================================================================== uploads with other field names
def test_page_names_the_fields_before_upload_and_accepts_an_answer_gold_upload():
    """A newcomer's JSONL with ``answer`` / ``gold`` (no ``prediction`` / ``label``, no ``correct``)
    loads through the uploader: correctness comes from the dataset's metric, and a bad line is one
    message naming the file, the line and the field while the rest loads."""
    at = page().run()
    captions = [c.value for c in at.caption]
    assert any("prediction (or answer, pred," in c and "label (or gold, answers, target," in c for c in captions)
    lines = [json.dumps({"id": "q1", "question": "Where is the Eiffel Tower?", "answer": "Paris", "gold": "Paris",
                         "dataset": "webqsp"}),
             json.dumps({"id": "q2", "question": "Capital of Germany?", "answer": "Bonn", "gold": ["Berlin"],
                         "dataset": "webqsp"}),
             json.dumps({"id": "q3", "answer": "x"}),
             json.dumps({"id": "q4", "question": "Is the sky blue?", "pred": "yes", "target": "yes",
                         "correct": True})]
    at.file_uploader(key="err_upload").set_value(("mine.jsonl", "\n".join(lines).encode(), "application/json"))
    at.run()
    at.button(key="err_load_upload").click()
    at.run()
    assert not at.exception and not at.error
    m = metrics(at)
    # q2 is wrong, but the file records no retrieved cells: no failure kind is invented for it
    assert (m["Examples"], m["Correct"], m["Unknown (no cells recorded)"]) == ("3", "2", "1")
    assert (m["Retrieval failures"], m["Reasoning/generation failures"]) == ("n/a", "n/a")
    assert any("cannot tell retrieval failures from reasoning failures" in i.value for i in at.info)
    table = frame(at, "line")
    assert list(table["id"]) == ["q1", "q2", "q4"] and list(table["prediction"]) == ["Paris", "Bonn", "yes"]
    assert list(table["label"]) == ["Paris", "Berlin", "yes"]
    warn = at.warning[0].value
    assert "1 bad line(s) skipped, 3 loaded" in warn
    assert errors.escape_markdown(f"mine.jsonl, line 3: missing field(s) {MISSING_LABEL}") in warn


def test_page_loads_files_without_ids_in_the_common_layouts():
    """The layouts people have: ``question/answer/gold`` with no id, ``prediction`` + ``answer`` (the
    reference), ``output`` / ``ground_truth``: each loads, a line is known by its number, and the
    fields (id optional) are named on the page before anything is uploaded."""
    at = page().run()
    captions = " ".join(c.value for c in at.caption)
    assert "id (or qid, question_id" in captions and "(else the line number)" in captions
    assert "with prediction present, answer is read as the label" in captions
    lines = [json.dumps({"question": "Where is the Eiffel Tower?", "answer": "Paris", "gold": "Paris"}),
             json.dumps({"question": "Capital of Germany?", "prediction": "Bonn", "answer": "Berlin"}),
             json.dumps({"qid": "w3", "query": "Largest planet?", "output": "Jupiter", "ground_truth": ["Jupiter"]})]
    at.file_uploader(key="err_upload").set_value(("plain.jsonl", "\n".join(lines).encode(), "application/json"))
    at.run()
    at.button(key="err_load_upload").click()
    at.run()
    assert not at.exception and not at.error and not at.warning
    table = frame(at, "line")
    assert list(table["id"]) == ["1", "2", "w3"]
    assert list(table["prediction"]) == ["Paris", "Bonn", "Jupiter"]
    assert list(table["label"]) == ["Paris", "Berlin", "Jupiter"]
    assert metrics(at)["Correct"] == "2"


def test_file_text_shown_as_markdown_is_escaped(tmp_path):
    """An id, a node text or a label in the file cannot become a link, an image or markup on the page."""
    evil = "[click](http://example.invalid) <b>x</b> ![i](http://example.invalid/i.png)"
    r = rec("e1", evil, "no", False, [evil], question=f"what about {evil}?", dataset="webqsp")
    at = load(page().run(), write_jsonl(tmp_path / "e.jsonl", [r, {"id": evil}]))
    assert not at.exception
    shown = [md.value for md in at.markdown] + [w.value for w in at.warning]
    assert any("Verdict:" in s for s in shown) and any("Gold answer" in s for s in shown)
    import re

    for s in shown:  # every bracket and angle bracket of the file text arrives backslash-escaped
        assert not re.search(r"(?<!\\)\]\(|(?<!\\)<b>", s), s
    assert errors.escape_markdown(evil).startswith(r"\[click\](http://example.invalid) \<b\>x\</b\>")


# ====================================================================== files without retrieved cells
def test_wrong_answers_without_cells_are_unknown_and_mixed_files_classify_the_rest(tmp_path):
    """A line without ``cells`` cannot be a retrieval or a reasoning failure: the page counts it as
    unknown, says so, and classifies only the lines that record cells (an empty recorded retrieval is
    still a retrieval failure)."""
    no_cells = [{k: v for k, v in r.items() if k != "cells"} for r in A_RECORDS]
    at = load(page().run(), write_jsonl(tmp_path / "bare.jsonl", no_cells))
    assert not at.exception and not at.error
    m = metrics(at)
    assert (m["Correct"], m["Unknown (no cells recorded)"]) == ("2", "3")
    assert (m["Retrieval failures"], m["Reasoning/generation failures"]) == ("n/a", "n/a")
    assert any("for any of its 3 wrong answer(s)" in i.value for i in at.info)
    assert set(frame(at, "line")["verdict"]) == {errors.CORRECT, errors.UNKNOWN}
    at.selectbox(key="err_pick").set_value("3").run()
    assert any("records no retrieved cells for this example" in i.value for i in at.info)
    assert not any("Nothing was retrieved" in i.value for i in at.info)
    assert any(errors.UNKNOWN in md.value for md in at.markdown)
    # mixed: records 2 and 3 keep their cells (reasoning, retrieval: nothing retrieved), 4 loses them
    mixed = [r if r["id"] != "4" else no_cells[3] for r in A_RECORDS]
    at = load(page().run(), write_jsonl(tmp_path / "mixed.jsonl", mixed))
    m = metrics(at)
    assert (m["Retrieval failures"], m["Reasoning/generation failures"], m["Unknown (no cells recorded)"]) == \
        ("1", "1", "1")
    assert any("1 of 3 wrong answers have no retrieved cells" in i.value for i in at.info)
    # a file where every line has cells shows no unknown column
    at = load(page().run(), write_jsonl(tmp_path / "full.jsonl", A_RECORDS))
    assert "Unknown (no cells recorded)" not in metrics(at) and not at.info


def test_kg_eval_rows_load_with_hit_answer_lists_and_retrieved_cells():
    """Rows shaped like ``toporag kg eval --out`` lines (``hit``, a list of ``answers``, ``retrieved``
    nodes and edges): ``hit`` is the correctness, ``retrieved`` the cells, and the verdict reads them."""
    rows = [{"id": "k1", "question": "Where was Marie Curie born?", "prediction": "She was born in Warsaw.",
             "answers": ["Warsaw"], "hit": True,
             "retrieved": {"nodes": ["Marie Curie", "Warsaw"], "edges": [["Marie Curie", "born in", "Warsaw"]]}},
            {"id": "k2", "question": "Which prize did Pierre Curie win?", "prediction": "Chemistry",
             "answers": ["Nobel Prize in Physics", "Nobel Prize"], "hit": False,
             "retrieved": {"nodes": [{"text": "Pierre Curie"}, {"text": "Nobel Prize in Physics"}],
                           "edges": [{"head": "Pierre Curie", "relation": "won", "tail": "Nobel Prize in Physics"}]}},
            {"id": "k3", "question": "Where did Marie Curie die?", "prediction": "Paris",
             "answers": ["Passy", "Sancellemoz"], "retrieved": {"nodes": ["Marie Curie"], "edges": []}},
            {"id": "k4", "question": "Who discovered radium?", "prediction": "Marie Curie discovered it",
             "label": ["Marie Curie", "Pierre Curie"]}]
    p = errors.parse_predictions("\n".join(json.dumps(r) for r in rows), "kg.jsonl")
    assert not p.errors
    by = p.by_id()
    assert [by[i]["correct"] for i in ("k1", "k2", "k3", "k4")] == [True, False, False, True]  # k3/k4: Hit
    assert by["k2"]["cells"]["edges"] == [["Pierre Curie", "won", "Nobel Prize in Physics"]]
    assert by["k2"]["cells"]["nodes"] == ["Pierre Curie", "Nobel Prize in Physics"]
    assert errors.verdict(by["k2"])[0] == errors.REASONING  # the gold prize was retrieved
    assert errors.verdict(by["k3"])[0] == errors.RETRIEVAL  # neither Passy nor Sancellemoz was retrieved
    assert by["k4"]["cells_recorded"] is False and by["k1"]["cells_recorded"] is True
    with pytest.raises(ValueError, match="field 'hit' must be true/false"):
        errors.check_record({**rows[0], "hit": "yes"})
    with pytest.raises(ValueError, match="retrieved.edges"):
        errors.check_record({**rows[0], "retrieved": {"edges": [["a", "b"]]}})
