"""The general open-answer task and Ask's model routing.

* Generator: every answer is computed from the fact store (checked against the store's facts per
  question kind), all kinds are present, the Curie facts give the Curie question with "polonium",
  the same seed writes the same files, splits never share a graph, bad files name file/line/field.
* Routing: which model answers on ExplaGraphs, scene and knowledge graphs (the committed checkpoints'
  configs; no model loaded), a label set never answers an open question, ``toporag ask`` routes like
  the page (tiny checkpoints).
* The shipped general checkpoint answers the Curie question "polonium" (slow: loads SmolLM2).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from toporag_core.graph import GraphFormatError, TextualGraph
from toporag_core.tasks.general import KINDS, RELATIONS, FactStore, make_questions, make_world, write_dataset
from toporag_core.tasks.general.dataset import GRAPHS_FILE, PER_KIND, QUESTIONS_FILE, load_general
from toporag_core.tasks.general.questions import QuestionMaker

ROOT = Path(__file__).resolve().parents[1]
CURIE_QUESTION = "Which element named after Poland did Marie Curie discover?"
CURIE_KEYS = {"born in": "born_in", "capital of": "capital_of", "citizen of": "citizen_of", "spouse": "spouse",
              "award received": "award_received", "child of": "child_of", "discovered": "discovered",
              "named after": "named_after", "employer": "employer", "located in": "located_in",
              "buried in": "buried_in"}
CURIE_TYPES = {"Marie Curie": "person", "Pierre Curie": "person", "Henri Becquerel": "person",
               "Irène Joliot-Curie": "person", "Frédéric Joliot-Curie": "person", "polonium": "element",
               "radium": "element", "Poland": "country", "France": "country", "Warsaw": "city", "Paris": "city"}


def curie_store() -> FactStore:
    fs = FactStore()
    for h, r, t in json.loads((ROOT / "assets" / "samples" / "kg_curie.json").read_text()):
        fs.add(h, CURIE_KEYS[r], t, CURIE_TYPES.get(h), CURIE_TYPES.get(t))
    return fs


def _linked(fs: FactStore, a: str, b: str) -> set[str]:
    return {k for h, k, t in fs.facts if (h, t) in ((a, b), (b, a))}


# ====================================================================== generator
def test_every_answer_is_what_the_fact_store_says():
    """Per kind, the answers satisfy the question's path in the store, and the store holds no other entity
    that satisfies it (1-hop: every neighbour by that relation; which / closed-loop: the filter)."""
    seen = set()
    for seed in range(12):
        rng = np.random.default_rng(seed)
        fs = make_world(rng, size=1 + seed % 2)
        for q in make_questions(fs, rng, PER_KIND):
            seen.add(q.kind)
            ents = set(fs.entities())
            assert q.answers and set(q.answers) <= ents and len(set(q.answers)) == len(q.answers)
            assert q.target == ", ".join(q.answers[:3])
            if q.kind == "1-hop":
                x = q.support[0]
                keys = set.intersection(*(_linked(fs, x, a) for a in q.answers))
                assert keys, q
                # complete: no other neighbour of x by one of those relations is left out
                assert any({t for h, k2, t in fs.facts if h == x and k2 == k} == set(q.answers) or
                           {h for h, k2, t in fs.facts if t == x and k2 == k} == set(q.answers) for k in keys), q
            elif q.kind == "2-hop":
                x, b = q.support[:2]
                assert _linked(fs, x, b) and all(_linked(fs, b, a) for a in q.answers), q
            elif q.kind in ("which", "closed-loop"):
                x, y = q.support[:2]
                assert all(_linked(fs, x, a) and _linked(fs, a, y) for a in q.answers), q
                assert bool(_linked(fs, x, y)) == (q.kind == "closed-loop"), q
            else:  # comparison: one of the two compared entities, by the number the store holds
                a, b = q.support
                assert q.answers[0] in (a, b)
                key = "population" if "population" in q.question else (
                    "inception" if "founded" in q.question else "date_of_birth")
                va, vb = (float(fs.tails(e, key)[0].replace(",", "")) for e in (a, b))
                best = max if ("larger" in q.question or "younger" in q.question) else min
                assert q.answers[0] == (a if best(va, vb) == va else b)
    assert seen == set(KINDS)


def test_the_curie_facts_give_the_curie_question_with_polonium():
    """The sample's question is a closed-loop "which X ... Y" question of the generator: over the Curie
    facts it is asked with the answer polonium (radium, also discovered by her, is filtered out)."""
    fs = curie_store()
    found = []
    for seed in range(40):
        q = QuestionMaker(fs, np.random.default_rng(seed)).which(closed=True)
        if q is not None and q.support[:2] == ["Marie Curie", "Poland"]:
            found.append(q)
    assert found and all(q.answers == ["polonium"] and q.kind == "closed-loop" for q in found)
    assert any(q.question in (CURIE_QUESTION, CURIE_QUESTION.rstrip("?").lower()) for q in found)


def test_write_dataset_is_seeded_has_every_kind_and_splits_by_graph(tmp_path):
    a = write_dataset(tmp_path / "a", n=24, seed=5)
    b = write_dataset(tmp_path / "b", n=24, seed=5)
    write_dataset(tmp_path / "c", n=24, seed=6)
    for f in (GRAPHS_FILE, QUESTIONS_FILE, "scenes/questions.csv"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert a == b and (tmp_path / "a" / GRAPHS_FILE).read_bytes() != (tmp_path / "c" / GRAPHS_FILE).read_bytes()
    assert all(a["questions"][k] > 0 for k in KINDS) and set(a["graphs"]) == {"world", "kg-store", "scene"}
    graphs = [json.loads(x) for x in (tmp_path / "a" / GRAPHS_FILE).read_text().splitlines()]
    rels = {r for g in graphs for _, r, _ in g["triples"]}
    assert "people.person.place_of_birth" in rels or "people.person.nationality" in rels  # WebQSP-like texts
    assert rels & {"born in", "citizen of", "discovered", "award received"}  # Curie-like texts
    splits = load_general(tmp_path / "a")
    names = {s: {e.graph.name for e in splits[s]} for s in splits}
    assert all(splits[s] for s in splits) and not (names["train"] & names["val"]) and not (names["train"] & names["test"])
    every = [e for s in splits.values() for e in s]
    assert all(isinstance(e.label, list) and e.label and e.question.startswith("Question: ") for e in every)
    assert not any(e.answer.lower() in ("yes", "no") for e in every)  # open answers only (scene yes/no left out)
    # answers are nodes of the question's own graph: they come from its facts
    assert all(set(e.label) <= set(e.graph.node_text) for e in every if not str(e.qtype).startswith("scene"))
    with pytest.raises(ValueError, match="not empty"):
        write_dataset(tmp_path / "a", n=24, seed=5)


def test_kg_store_cuts_are_answered_from_the_store(tmp_path):
    """The store-cut family: questions start at the cut's seed, answers are its neighbours in the
    generated KG store (relation names of toporag_core.kg.generate)."""
    from toporag_core.kg.generate import REL

    write_dataset(tmp_path / "d", n=20, seed=2)
    graphs = {g["id"]: g for g in map(json.loads, (tmp_path / "d" / GRAPHS_FILE).read_text().splitlines())}
    rows = [json.loads(x) for x in (tmp_path / "d" / QUESTIONS_FILE).read_text().splitlines()]
    cut = [r for r in rows if r["family"] == "kg-store"]
    assert cut
    for r in cut:
        g = graphs[r["graph"]]
        assert {RELATIONS[k].freebase for k in REL} | set(REL) >= {t[1] for t in g["triples"]}
        if r["kind"] == "1-hop":
            x = r["support"][0]
            assert all(any({h, t} == {x, a} for h, _, t in g["triples"]) for a in r["answers"])


def test_bad_general_files_name_file_line_and_field(tmp_path):
    write_dataset(tmp_path / "d", n=6, seed=0)
    q = tmp_path / "d" / QUESTIONS_FILE
    lines = q.read_text().splitlines()
    row = json.loads(lines[1])
    del row["answers"]
    q.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n")
    with pytest.raises(GraphFormatError) as e:
        load_general(tmp_path / "d")
    assert "questions.jsonl" in str(e.value) and "line 2" in str(e.value) and "answers" in str(e.value)
    q.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(GraphFormatError, match="line 2"):
        load_general(tmp_path / "d")
    with pytest.raises(FileNotFoundError, match="toporag data general"):
        load_general(tmp_path / "absent")


def test_cli_data_general(tmp_path, capsys):
    from toporag_core.cli import main

    assert main(["data", "general", "--n", "9", "--seed", "1", "--out", str(tmp_path / "g")]) == 0
    out = capsys.readouterr().out
    assert "wrote 9 graphs" in out and "closed-loop" in out and (tmp_path / "g" / QUESTIONS_FILE).is_file()
    assert main(["data", "general", "--n", "9", "--out", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert "not empty" in err and len(err.strip().splitlines()) == 1


# ====================================================================== routing
def _config_only(folder: Path, dataset: str, labels: tuple[str, ...] = ()) -> str:
    """A checkpoint folder as routing reads it: config.json only (no model is loaded)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"dataset": dataset, "config": {"answer_set": list(labels)}}))
    return str(folder)


@pytest.fixture
def committed(tmp_path, monkeypatch):
    """A checkpoint root like assets/checkpoints: ExplaGraphs (label set), SceneGraphs, general."""
    from toporag_core.answering import route

    root = tmp_path / "checkpoints"
    paths = {"expla": _config_only(root / "expla_graphs", "expla_graphs", ("counter", "support")),
             "scene": _config_only(root / "scene_graphs", "scene_graphs"),
             "general": _config_only(root / "general", "general")}
    monkeypatch.setattr(route, "CHECKPOINT_ROOT", root)
    return paths


def webqsp_like() -> TextualGraph:
    return TextualGraph(["Jamaica", "Jamaican English", "Kingston"], [[1, 2], [0, 0]],
                        ["language.human_language.countries_spoken_in", "location.location.containedby"],
                        meta={"q_entity": ["Jamaica"], "answers": ["Jamaican English"],
                              "question": "what does jamaican people speak"})


def test_which_model_answers_on_each_kind_of_graph(committed):
    from toporag_core.io import samples
    from toporag_core.answering.route import ZERO_SHOT, auto_checkpoint, committed_checkpoints, route

    options = {**committed_checkpoints(), ZERO_SHOT: "zero-shot"}
    assert list(options.values())[:3] == ["ExplaGraphs (committed)", "SceneGraphs (committed)", "General (committed)"]
    arg, kg, sc = (samples.load_sample(k) for k in ("argument", "kg", "scene"))
    wq = webqsp_like()
    # the default model per graph: its task's checkpoint, else the general one
    assert [auto_checkpoint(g, options) for g in (arg, sc, kg, wq)] == \
        [committed["expla"], committed["scene"], committed["general"], committed["general"]]
    # the task checkpoints answer their own graphs' questions
    r = route(committed["expla"], arg, arg.meta["question"], options)
    assert (r.checkpoint, r.rerouted) == (committed["expla"], False)
    r = route(committed["scene"], sc, "What is next to the red cup?", options)
    assert (r.checkpoint, r.rerouted) == (committed["scene"], False)
    # no task checkpoint matches the Curie KG or a WebQSP graph: the general one, and the page says why
    for g, q, what in ((kg, CURIE_QUESTION, "a graph of no trained task"), (wq, wq.meta["question"], "webqsp")):
        r = route(auto_checkpoint(g, options), g, q, options)
        assert (r.checkpoint, r.model, r.rerouted) == (committed["general"], "the General checkpoint", False)
        assert "no task-specific checkpoint matches the loaded graph" in r.reason and what in r.reason
        assert r.line().startswith("Answering model: **the General checkpoint** - ")
        # chosen by hand, the label-set checkpoint gives way to it, saying why
        r = route(committed["expla"], g, q, options)
        assert (r.checkpoint, r.rerouted) == (committed["general"], True)
        assert "counter / support" in r.reason and "general checkpoint answers open questions" in r.reason
    # an open question on an ExplaGraphs graph: not the label set either
    r = route(committed["expla"], arg, "What do libraries provide?", options)
    assert r.checkpoint == committed["general"] and "asks for neither" in r.reason


def test_without_a_general_checkpoint_the_zero_shot_llm_answers_and_no_label_set_ever_does(committed, tmp_path):
    """No general checkpoint: the route falls back to the zero-shot LLM and says so; over every sample and
    question tried, a label-set checkpoint answers only questions that ask for its labels."""
    import shutil

    from toporag_core.io import samples
    from toporag_core.answering.route import ZERO_SHOT, checkpoint_info, committed_checkpoints, label_question, route

    shutil.rmtree(committed["general"])
    options = {**committed_checkpoints(), ZERO_SHOT: "zero-shot"}
    kg = samples.load_sample("kg")
    r = route(committed["expla"], kg, CURIE_QUESTION, options)
    assert (r.checkpoint, r.model) == (ZERO_SHOT, "the zero-shot LLM") and "no graph tokens" in r.reason
    graphs = [samples.load_sample(k) for k in ("argument", "kg", "scene")] + [webqsp_like()]
    questions = [CURIE_QUESTION, "What is next to the red cup?", "Do the arguments support or counter each other?",
                 "what does jamaican people speak"]
    for g in graphs:
        for q in questions + [g.meta.get("question") or "x"]:
            for sel in options:
                r = route(sel, g, q, options)
                labels = checkpoint_info(r.checkpoint).answer_set
                assert not labels or label_question(g, q, labels), (g.name, q, r)


def test_the_curie_samples_own_question_is_not_called_another_question():
    from toporag_core.io import samples
    from toporag_core.answering.route import own_question

    pytest.importorskip("streamlit")
    from toporag_core.studio import ask

    kg = samples.load_sample("kg")
    assert own_question(kg, CURIE_QUESTION) and own_question(kg, "  " + CURIE_QUESTION.replace(" ", "  "))
    assert "not the example's own question" not in ask.gold_note(kg, CURIE_QUESTION)
    assert "not the example's own question" in ask.gold_note(kg, "Who was Pierre Curie married to?")


def test_cli_ask_routes_a_label_set_checkpoint_away_from_an_open_question(tmp_path, monkeypatch, capsys):
    """``toporag ask`` on the Curie sample with a label-set checkpoint chosen: the general checkpoint of
    the checkpoint root answers (tiny models), the JSON and the text say which model and why."""
    from toporag_core.cli import main
    from toporag_core.answering import route
    from toporag_core.model.tiny import build_tiny_checkpoint

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    root = tmp_path / "checkpoints"
    build_tiny_checkpoint(root / "general", dataset="general", question_form="graphqa")
    expla = build_tiny_checkpoint(tmp_path / "expla", dataset="expla_graphs")
    meta = json.loads((expla / "config.json").read_text())
    meta["config"]["answer_set"] = ["counter", "support"]
    (expla / "config.json").write_text(json.dumps(meta))
    monkeypatch.setattr(route, "CHECKPOINT_ROOT", root)
    curie = str(ROOT / "assets" / "samples" / "kg_curie.json")
    assert main(["ask", curie, "-q", CURIE_QUESTION, "--checkpoint", str(expla), "--device", "cpu", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["route"]["checkpoint"] == str(root / "general") and got["route"]["rerouted"] is True
    assert "counter / support" in got["route"]["reason"] and got["label_probs"] is None
    assert got["answer"].strip().lower() not in ("counter", "support")
    assert main(["ask", curie, "-q", CURIE_QUESTION, "--device", "cpu"]) == 0  # default: auto -> general
    text = capsys.readouterr().out
    assert text.startswith("model: the General checkpoint - no task-specific checkpoint matches")
    assert main(["ask", curie, "-q", CURIE_QUESTION, "--checkpoint", "none", "--device", "cpu", "--json",
                 "--llm", str(root / "general" / "llm")]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["route"]["model"] == "the zero-shot LLM" and got["prompt"].get("graph_tokens", 0) == 0


# ====================================================================== the shipped checkpoint
GENERAL = ROOT / "assets" / "checkpoints" / "general"


@pytest.mark.slow
@pytest.mark.skipif(not (GENERAL / "config.json").is_file(), reason="assets/checkpoints/general not shipped")
def test_shipped_general_checkpoint_answers_the_curie_question(capsys, monkeypatch):
    """`toporag ask` on the Curie sample, no checkpoint named: the general checkpoint answers, "polonium"."""
    from toporag_core.cli import main

    monkeypatch.delenv("TOPORAG_ENCODER", raising=False)
    meta = json.loads((GENERAL / "config.json").read_text())
    assert meta["dataset"] == "general" and not meta["config"]["answer_set"]
    assert main(["ask", str(ROOT / "assets" / "samples" / "kg_curie.json"), "-q", CURIE_QUESTION, "--device", "cpu",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["route"]["checkpoint"] == str(GENERAL) and got["route"]["model"] == "the General checkpoint"
    assert "polonium" in got["answer"].lower() and got["label_probs"] is None
