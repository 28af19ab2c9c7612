"""SceneGraphs as a training dataset: registry loader (splits by image, qtypes, support), default
set generation, retrieval coverage on hand-checked subcomplexes, per-type accuracy, and the
eval JSONL carrying qtype end to end (tiny in-process model, HashingEncoder, no download)."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from toporag_core.retrieval import RetrievalSetting
from toporag_core.tasks import TASKS, load_raw, metric_of
from toporag_core.tasks.prep import PrepConfig, prepare_dataset
from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.cells.lift import lift
from toporag_core.retrieval.result import make_subcomplex
from toporag_core.tasks.scenes import QUESTION_TYPES, read_gqa, write_dataset
from toporag_core.tasks.scenes import dataset as sd
from toporag_core.evaluation.scene_accuracy import accuracy_by_type
from toporag_core.tasks.scenes.dataset import (CoverageSetting, SceneRawExample, paper_settings, scene_retrieval_coverage,
                                         stratified_subset, support_covered)

ENC = HashingEncoder(dim=16)


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scenes")
    write_dataset(folder, n=10, seed=3, per_type=2)
    return folder


def test_registered_with_scene_metric():
    assert TASKS["scene_graphs"].loader is sd.load_scene_examples
    assert metric_of("scene_graphs") == "scene_graphs"


def test_loader_splits_by_image_with_types_and_support(mini):
    raw = load_raw("scene_graphs", mini)
    assert set(raw) == {"train", "val", "test"}
    images = {s: {e.graph.name for e in v} for s, v in raw.items()}
    assert [len(images[s]) for s in ("train", "val", "test")] == [6, 2, 2]  # 60/20/20 of 10 images
    assert not (images["train"] & images["val"] or images["train"] & images["test"] or images["val"] & images["test"])
    every = [e for v in raw.values() for e in v]
    src = {e.q_id: e for e in read_gqa(mini)}
    assert len(every) == len(src)
    assert {e.qtype for e in every} == set(QUESTION_TYPES)
    for e in every:
        s = src[e.id]
        assert isinstance(e, SceneRawExample)
        assert e.qtype == s.type and e.label == e.answer == s.answer and e.query == s.question
        assert e.question == f"Question: {s.question}\nAnswer:"
        assert e.support and [e.graph.node_ids[i] for i in e.support] == s.support
    # closed-loop questions name at least three objects of the loop
    assert all(len(e.support) >= 3 for e in every if e.qtype == "2-cell")


def test_data_dir_resolution(mini, tmp_path, monkeypatch):
    monkeypatch.setenv("TOPORAG_SCENES_DIR", str(mini))
    assert sd.scenes_dir() == mini
    assert sd.scenes_dir(tmp_path) == tmp_path  # an explicit folder wins over the environment
    monkeypatch.delenv("TOPORAG_SCENES_DIR")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path))
    first = sd.default_scenes_dir(n=3, seed=5)
    assert first == tmp_path / "scenes" / "default-n3-s5"
    stamp = (first / "questions.csv").stat().st_mtime_ns
    assert sd.default_scenes_dir(n=3, seed=5) == first
    assert (first / "questions.csv").stat().st_mtime_ns == stamp  # generated once, then reused
    assert [p.name for p in first.parent.iterdir()] == ["default-n3-s5"]  # no temp folder left behind
    with pytest.raises(FileNotFoundError):
        load_raw("scene_graphs", tmp_path / "absent")


def _line_graph() -> TextualGraph:
    # 0 - 1 - 2 - 0 (a triangle) and 2 - 3
    return TextualGraph(node_text=["name: cup", "name: table", "name: lamp", "name: chair"],
                        edge_index=np.array([[0, 1, 2, 2], [1, 2, 0, 3]]), edge_text=["on", "left of", "above", "near"],
                        node_ids=["a", "b", "c", "d"], name="img")


def _examples() -> list[SceneRawExample]:
    g = _line_graph()
    mk = lambda i, t, sup: SceneRawExample(id=str(i), graph=g, question=f"q{i}", label="x", answer="x",  # noqa: E731
                                           query=f"q{i}", qtype=t, support=sup)
    return [mk(0, "0-cell", [0]), mk(1, "0-cell", [3]), mk(2, "1-cell", [0, 1]), mk(3, "2-cell", [0, 1, 2]),
            mk(4, "2-cell", [1, 2, 3]), mk(5, None, [])]  # the last has no support: skipped


def test_coverage_whole_graph_is_one_and_empty_is_zero(monkeypatch):
    rows = scene_retrieval_coverage(_examples(), ENC, [CoverageSetting("whole", RetrievalSetting("whole"))])
    assert rows[0]["questions"] == 5
    assert rows[0]["all"] == rows[0]["0-cell"] == rows[0]["1-cell"] == rows[0]["2-cell"] == 1.0
    assert (rows[0]["cells0"], rows[0]["cells1"], rows[0]["cells2"]) == (4.0, 4.0, 1.0)

    def fixed(nodes, edges):
        def fixed_retrieve(ecx, query, setting=None):
            z = (np.zeros(ecx.complex.num_nodes), np.zeros(ecx.complex.num_edges), np.zeros(ecx.complex.num_cells2))
            return make_subcomplex(ecx.complex, np.array(nodes), np.array(edges), np.array([]), z, "fixed", {}, {})
        return fixed_retrieve

    monkeypatch.setattr(sd, "retrieve", fixed([], []))
    empty = scene_retrieval_coverage(_examples(), ENC, [CoverageSetting("empty", RetrievalSetting())])[0]
    assert empty["all"] == 0.0 and empty["cells0"] == 0.0
    # nodes {0, 1} (cup, table): covers q0 and q2 only -> 2/5; per type 1/2, 1/1, 0/2
    monkeypatch.setattr(sd, "retrieve", fixed([0, 1], []))
    part = scene_retrieval_coverage(_examples(), ENC, [CoverageSetting("part", RetrievalSetting())])[0]
    assert (part["all"], part["0-cell"], part["1-cell"], part["2-cell"]) == (0.4, 0.5, 1.0, 0.0)
    # an edge pulls in its boundary: retrieving edge (2, 3) adds nodes 2 and 3 -> every question
    edge23 = int(np.flatnonzero((lift(_line_graph()).edges == [2, 3]).all(axis=1))[0])
    monkeypatch.setattr(sd, "retrieve", fixed([0, 1], [edge23]))
    full = scene_retrieval_coverage(_examples(), ENC, [CoverageSetting("more", RetrievalSetting())])[0]
    assert full["all"] == 1.0 and full["cells0"] == 4.0 and full["cells1"] == 1.0


def test_coverage_missing_type_is_nan_and_support_rule():
    only0 = [e for e in _examples() if e.qtype == "0-cell"]
    row = scene_retrieval_coverage(only0, ENC, [CoverageSetting("whole", RetrievalSetting("whole"))])[0]
    assert row["0-cell"] == 1.0 and math.isnan(row["1-cell"]) and math.isnan(row["2-cell"])
    sub = SimpleNamespace(nodes=np.array([1, 4, 7]))
    assert support_covered(sub, [1, 7]) and not support_covered(sub, [1, 2]) and not support_covered(sub, [])


def test_coverage_tokens_column_and_per_setting_tree(mini):
    """``count_tokens`` adds the mean length of the textualized subcomplex; a setting's own ``tree`` is
    the lifting it is retrieved on (a DFS tree has other fundamental cycles than BFS)."""
    from toporag_core.retrieval import EmbeddedComplex, retrieve, textualize

    raw = load_raw("scene_graphs", mini)["test"][:12]
    st = RetrievalSetting.make("toporag", k0=3, k1=3, k2=3)
    words = lambda text: len(text.split())  # noqa: E731
    rows = scene_retrieval_coverage(raw, ENC, [CoverageSetting("bfs", st), CoverageSetting("dfs", st, "dfs"),
                                               CoverageSetting("whole", RetrievalSetting("whole"))],
                                    count_tokens=words)
    by = {r["method"]: r for r in rows}
    # the same numbers, computed by hand for each tree
    for label, tree in (("bfs", "bfs"), ("dfs", "dfs")):
        subs = [retrieve(EmbeddedComplex.from_graph(e.graph, ENC, tree=tree), e.query, setting=st) for e in raw]
        assert by[label]["tokens"] == pytest.approx(np.mean([words(textualize(s, fmt="compact")) for s in subs]))
        assert by[label]["cells2"] == pytest.approx(np.mean([s.counts[2] for s in subs]))
    assert by["whole"]["tokens"] > by["bfs"]["tokens"] > 0
    assert by["dfs"]["tokens"] != by["bfs"]["tokens"]  # so the hand check above tells the two trees apart
    assert "tokens" not in scene_retrieval_coverage(raw, ENC, [CoverageSetting("bfs", st)])[0]


def test_coverage_on_generated_scenes_is_monotone_in_k2(mini):
    raw = load_raw("scene_graphs", mini)["test"]
    settings = paper_settings() + [CoverageSetting("whole", RetrievalSetting("whole"))]
    rows = {r["method"]: r for r in scene_retrieval_coverage(raw, ENC, settings)}
    assert rows["whole"]["all"] == 1.0
    assert all(0.0 <= r["all"] <= 1.0 for r in rows.values())
    assert rows["toporag k2=0"]["cells2"] == 0.0 and rows["g-retriever (PCST)"]["cells2"] == 0.0
    assert rows["toporag k2=3"]["cells2"] > 0
    # more 2-cells only ever add cells, so coverage cannot drop from k2=0 to k2=3
    assert rows["toporag k2=3"]["all"] >= rows["toporag k2=0"]["all"]


def test_accuracy_by_type_hand_written(tmp_path):
    recs = [{"id": "1", "qtype": "0-cell", "correct": True}, {"id": "2", "qtype": "0-cell", "correct": False},
            {"id": "3", "qtype": "1-cell", "correct": True}, {"id": "4", "qtype": "2-cell", "correct": False},
            {"id": "5", "qtype": "2-cell", "correct": False}, {"id": "6", "qtype": None, "correct": True}]
    path = tmp_path / "pred.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"id": "7", "qty')  # last line cut by a kill
    acc = accuracy_by_type(path)
    assert acc["all"] == {"accuracy": 0.5, "correct": 3, "n": 6}
    assert acc["0-cell"]["accuracy"] == 0.5 and acc["1-cell"]["accuracy"] == 1.0 and acc["2-cell"]["correct"] == 0
    assert accuracy_by_type(recs) == acc
    path.write_text('{"id": "1"}\n')
    with pytest.raises(ValueError, match="line 1"):
        accuracy_by_type(path)


def test_stratified_subset_keeps_order_and_quotas():
    xs = [SimpleNamespace(i=i, qtype=t) for i, t in enumerate(["0-cell", "0-cell", "1-cell", "2-cell", "0-cell",
                                                                "2-cell", "1-cell", None, "2-cell"])]
    got = stratified_subset(xs, 2)
    assert [x.i for x in got] == [0, 1, 2, 3, 5, 6]


def test_prepared_scene_examples_evaluate_with_qtype(mini, tmp_path):
    from tests.test_train_eval import tiny_model
    from toporag_core.evaluation.evaluate import evaluate

    setting = PrepConfig(RetrievalSetting.make("toporag", k0=3, k1=5, k2=1))
    data = prepare_dataset("scene_graphs", setting, splits=("test",), encoder=ENC, data_dir=mini,
                           cache_dir=tmp_path / "prep", show_progress=False)
    test = stratified_subset(data["test"], 2)
    assert [e.qtype for e in test].count("2-cell") == 2 and len(test) == 6
    assert all(e.context and e.tensors.x0.shape[1] == 16 for e in test)
    out = tmp_path / "pred.jsonl"
    res = evaluate(tiny_model(), test, "scene_graphs", out=out, batch_size=4, show_progress=False)
    lines = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert [r["qtype"] for r in lines] == [e.qtype for e in test]
    acc = accuracy_by_type(out)
    assert acc["all"]["n"] == res["n"] == 6
    assert {t: acc[t]["accuracy"] for t in QUESTION_TYPES} == res["by_type"]
    # the scene metric: the label contained in the prediction
    assert all(r["correct"] == (str(r["label"]).lower() in r["prediction"].lower()) for r in lines)


def test_scene_evidence_is_the_full_answer_without_its_yes_no(mini):
    """Evidence-first targets come from the data's full answers: polar rows only, "Yes,"/"No," dropped,
    first letter raised; a row whose full answer contradicts its label gets none."""
    raw = load_raw("scene_graphs", mini)
    every = [e for v in raw.values() for e in v]
    polar = [e for e in every if e.answer in ("yes", "no")]
    assert polar and all(sd.scene_evidence(e) is None for e in every if e.answer not in ("yes", "no"))
    for e in polar:
        ev = sd.scene_evidence(e)
        assert ev and ev[0].isupper() and not ev.endswith(".")
        assert e.full_answer.lower().startswith(e.answer) and ev.lower() in e.full_answer.lower()
    e = polar[0]
    flipped = SceneRawExample(**{**e.__dict__, "answer": "no" if e.answer == "yes" else "yes"})
    assert sd.scene_evidence(flipped) is None
    assert TASKS["scene_graphs"].evidence is sd.scene_evidence and TASKS["expla_graphs"].evidence is None


@pytest.mark.training
def test_train_with_evidence_targets_then_eval_writes_the_evidence(mini, tmp_path, monkeypatch, capsys):
    """`toporag train --answer-style evidence` trains yes/no rows on "<evidence>. Answer: <label>",
    records the style in the checkpoint, and `toporag eval` then answers polar questions with a label
    (probability) plus the evidence it wrote. ExplaGraphs has no full answers: refused in one line
    before anything is prepared."""
    from toporag_core.cli import main
    from toporag_core.model.tiny import save_tiny_llm

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    llm = save_tiny_llm(tmp_path / "llm")
    common = ["--dataset", "scene_graphs", "--data-dir", str(mini), "--device", "cpu"]
    layout = tmp_path / "layout.toml"  # the layout is a recipe setting, not an option
    layout.write_text('graph_position = "before_question"\n')
    code = main(["train", "--recipe", str(layout), *common, "--llm", str(llm), "--hidden", "16",
                 "--projector-hidden", "32", "--answer-style", "evidence", "--batch-size", "4",
                 "--max-steps", "2", "--eval-every", "2", "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 0 and "evidence-first targets:" in out
    n_polar = sum(e.answer in ("yes", "no") for e in load_raw("scene_graphs", mini)["train"])
    assert f"evidence-first targets: {n_polar} of " in out
    cfg = json.loads((tmp_path / "run" / "best" / "config.json").read_text())["config"]
    assert cfg["answer_style"] == "evidence"
    # no target loses its label to the answer cut: the limit grows to the longest target (the tiny
    # tokenizer is character-level, so evidence targets are longer than the default 32 here)
    from toporag_core.model import ANSWER_STYLES, evidence_target
    from toporag_core.model.tiny import tiny_tokenizer

    raw_train = load_raw("scene_graphs", mini)["train"]
    longest = max(len(tiny_tokenizer()(evidence_target(sd.scene_evidence(e), e.answer),
                                       add_special_tokens=False)["input_ids"])
                  for e in raw_train if sd.scene_evidence(e))
    assert longest > 32 and cfg["max_new_tokens"] >= longest
    from toporag_core.cli import build_parser

    for style in set(ANSWER_STYLES) - {"cited-loops"}:  # every style the model knows is a CLI choice (but the
        assert build_parser().parse_args(["train", "--answer-style", style]).answer_style == style  # retired one)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--answer-style", "cited-loops"])
    code = main(["eval", *common, "--split", "test", "--checkpoint", str(tmp_path / "run" / "best"),
                 "--out", str(tmp_path / "p.jsonl")])
    out_eval = capsys.readouterr().out
    assert code == 0
    recs = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    polar = [r for r in recs if r["gold"] in ("yes", "no")]
    assert polar and all(r["answer"] in ("yes", "no") and "evidence" in r and r["probability"] >= 0.5 for r in polar)
    assert all("evidence" not in r for r in recs if r["gold"] not in ("yes", "no"))
    # --qtype: exactly the closed-loop rows of the same split, in the same order; an unknown type is one line
    code = main(["eval", *common, "--split", "test", "--checkpoint", str(tmp_path / "run" / "best"),
                 "--qtype", "2-cell", "--out", str(tmp_path / "loops.jsonl")])
    loops = [json.loads(x) for x in (tmp_path / "loops.jsonl").read_text().splitlines()]
    assert code == 0 and loops and [r["id"] for r in loops] == [r["id"] for r in recs if r["qtype"] == "2-cell"]
    assert len(loops) < len(recs)
    # every scene record says whether retrieval kept all of its answer-bearing objects: the same verdict
    # as reading the support objects' node texts off the record's retrieved nodes
    raw_test = {r.id: r for r in load_raw("scene_graphs", mini)["test"]}
    kept = {r["id"]: all(raw_test[r["id"]].graph.node_text[i] in r["cells"]["nodes"] for i in raw_test[r["id"]].support)
            for r in recs}
    assert all(isinstance(r["support_covered"], bool) for r in recs)
    assert [r["support_covered"] for r in recs] == [kept[r["id"]] for r in recs]
    assert set(kept.values()) == {True, False}  # the tiny set has both: the check can fail
    hit = [r["correct"] for r in recs if r["support_covered"]]
    assert f"answer objects retrieved: {len(hit)} questions, accuracy {sum(hit) / len(hit):.4f}" in out_eval
    capsys.readouterr()
    assert main(["eval", *common, "--split", "test", "--checkpoint", str(tmp_path / "run" / "best"),
                 "--qtype", "3-cell"]) == 2
    err = capsys.readouterr().err
    assert "3-cell" in err and "0-cell, 1-cell, 2-cell" in err and len(err.strip().splitlines()) == 1
    # `toporag ask` on a GQA record shows the evidence too (JSON key and text line)
    q = next(r for r in load_raw("scene_graphs", mini)["test"] if r.answer in ("yes", "no"))
    ask = ["ask", str(mini / "train_sceneGraphs.json"), "--format", "gqa", "--record", q.graph.name, "-q", q.query,
           "--checkpoint", str(tmp_path / "run" / "best"), "--device", "cpu"]
    assert main([*ask, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["answer"] in ("yes", "no") and isinstance(d["evidence"], str) and set(d["label_probs"]) == {"yes", "no"}
    assert main(ask) == 0 and "\nevidence: " in capsys.readouterr().out
    code = main(["train", "--dataset", "expla_graphs", "--data-dir", str(tmp_path / "absent"), "--answer-style",
                 "evidence", "--out", str(tmp_path / "run2")])
    err = capsys.readouterr().err
    assert code == 2 and "has no evidence" in err and "scene_graphs" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run2").exists()


def test_scene_citation_copies_the_context_lines_from_the_asked_object_to_the_answer(mini, tmp_path):
    """`--answer-style cited` targets for open scene questions: every cited part is a line of the
    example's own context; the chain starts at the object the question names (its node line) and ends
    at the answer (the answer's node id closes the last relation line, or the attribute is on the node
    line); yes/no rows, a support object outside the retrieved subcomplex and a text format without
    such lines (CSV) cite nothing."""
    from toporag_core.retrieval.textualize import node_label
    from toporag_core.tasks.scenes import question_template

    def prepared(text: str):
        setting = PrepConfig(RetrievalSetting.make("toporag", k0=30, k1=60, k2=4), text=text)
        return prepare_dataset("scene_graphs", setting, splits=("train",), encoder=ENC, data_dir=mini,
                               cache_dir=tmp_path / f"prep-{text}", show_progress=False)["train"]

    raw = {r.id: r for r in load_raw("scene_graphs", mini)["train"]}
    seen = set()
    for e in prepared("compact"):
        r = raw[e.id]
        cite = sd.scene_citation(r, e)
        template = question_template(r.question, r.qtype)
        if r.answer in ("yes", "no"):
            assert cite is None
            continue
        if cite is None:
            continue
        seen.add((r.qtype, template))
        parts = cite.split("; ")
        lines = {ln.strip() for ln in e.context.splitlines()}
        assert all(p in lines for p in parts), cite
        ids = [e.cells["nodes"].index(r.graph.node_text[s]) for s in r.support]
        labels = [node_label(e.cells["nodes"][i], i) for i in ids]
        if template in ("one-hop", "two-hop"):
            assert len(parts) == len(ids) and parts[0].startswith(labels[-1] + ":")
            assert parts[-1].endswith(" " + labels[0]) or parts[-1].startswith(labels[0] + " ")
            assert labels[0].rsplit(" [", 1)[0] == r.answer
        else:  # the asked object's node line, which names the answer
            assert len(parts) == 1 and parts[0].split(":", 1)[0] in labels
            assert r.answer in parts[0].split(":", 1)[1].replace(",", " ").split()
    assert {("0-cell", "colour"), ("1-cell", "one-hop"), ("1-cell", "two-hop")} <= seen, seen
    # a support object that was not retrieved, and the CSV format: nothing to cite
    e = next(x for x in prepared("compact") if raw[x.id].answer not in ("yes", "no") and sd.scene_citation(raw[x.id], x))
    gone = raw[e.id].graph.node_text[raw[e.id].support[0]]
    missing = SimpleNamespace(context=e.context, cells={"nodes": [t for t in e.cells["nodes"] if t != gone]})
    assert sd.scene_citation(raw[e.id], missing) is None
    assert all(sd.scene_citation(raw[x.id], x) is None for x in prepared("csv"))
    assert TASKS["scene_graphs"].citation is sd.scene_citation and TASKS["expla_graphs"].citation is None


@pytest.mark.training
def test_train_cited_then_eval_writes_evidence_for_open_answers(mini, tmp_path, monkeypatch, capsys):
    """`toporag train --answer-style cited` trains yes/no rows on their evidence and open rows on their
    cited context lines (the count is printed and equals what the hooks give), records the style, and
    `toporag eval` writes an ``evidence`` for open rows as well. A dataset without citations is refused
    in one line."""
    from toporag_core.cli import main
    from toporag_core.model.tiny import save_tiny_llm

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    llm = save_tiny_llm(tmp_path / "llm")
    common = ["--dataset", "scene_graphs", "--data-dir", str(mini), "--device", "cpu", "--text", "compact"]
    layout = tmp_path / "layout.toml"  # the layout is a recipe setting, not an option
    layout.write_text('graph_position = "before_question"\n')
    code = main(["train", "--recipe", str(layout), *common, "--llm", str(llm), "--hidden", "16",
                 "--projector-hidden", "32", "--answer-style", "cited", "--batch-size", "4",
                 "--max-steps", "2", "--eval-every", "2", "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 0
    import re

    line = next(ln for ln in out.splitlines() if ln.startswith("evidence-first targets:"))
    m = re.match(r"evidence-first targets: (\d+) of (\d+) training and (\d+) of (\d+) validation examples "
                 r"\((\d+) of them cited\)", line)
    assert m, line
    n_train, n_all, n_val, _, n_cited = map(int, m.groups())
    n_polar = sum(e.answer in ("yes", "no") for e in load_raw("scene_graphs", mini)["train"])
    # open training rows got citations on top of the polar rows' evidence; all cited rows are counted
    assert n_polar < n_train <= n_all and 0 < n_cited and n_train - n_polar <= n_cited
    cfg = json.loads((tmp_path / "run" / "best" / "config.json").read_text())["config"]
    assert cfg["answer_style"] == "cited"
    code = main(["eval", *common, "--split", "test", "--checkpoint", str(tmp_path / "run" / "best"),
                 "--out", str(tmp_path / "p.jsonl")])
    assert code == 0
    recs = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert recs and all("evidence" in r for r in recs)
    capsys.readouterr()
    code = main(["train", "--dataset", "expla_graphs", "--data-dir", str(tmp_path / "absent"), "--answer-style",
                 "cited", "--out", str(tmp_path / "run2")])
    err = capsys.readouterr().err
    assert code == 2 and "has no evidence" in err and "citations" in err and len(err.strip().splitlines()) == 1
