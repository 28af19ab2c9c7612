"""SceneGraphs: GQA-format loader, generator, and an independent answer checker.

The checker at the bottom re-derives every generated answer from the *loaded* graph's
text (node text ``name: ...; attribute: ...; (x,y,w,h): (...)`` and relation names),
not from the generator's tables, so a generator bug shows up as a disagreement.
"""
from __future__ import annotations

import csv
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest

from toporag_core.graph import GraphFormatError
from toporag_core.cells.lift import lift
from toporag_core.metrics import scene_correct
from toporag_core.tasks.scenes import (read_gqa, scene_to_graph, split_by_image, write_dataset)

REPO = Path(__file__).resolve().parents[1]

# ----------------------------------------------------------------- hand-written real-format file
SCENES = {
    "2354786": {"width": 500, "height": 333, "objects": {
        "101": {"name": "cup", "x": 10, "y": 20, "w": 30, "h": 40, "attributes": ["white", "ceramic"],
                "relations": [{"object": "102", "name": "on"}, {"object": "103", "name": "to the left of"}]},
        "102": {"name": "table", "x": 0, "y": 55, "w": 200, "h": 100, "attributes": [],
                "relations": [{"object": "101", "name": "under"}]},
        "103": {"name": "lamp", "x": 150, "y": 5, "w": 20, "h": 50, "attributes": ["tall"], "relations": []},
    }},
    "2417890": {"width": 640, "height": 480, "objects": {
        "7": {"name": "dog", "x": 1, "y": 2, "w": 3, "h": 4, "attributes": ["brown", "small"], "relations": []},
    }},
}
QUESTIONS = ("q_id,image_id,question,answer,full_answer\n"
             "q1,2354786,What is the cup on?,table,The cup is on the table.\n"
             '"q2",2354786,"Is the lamp tall, or short?",tall,The lamp is tall.\n'
             "q3,2417890,What colour is the dog?,brown,The dog is brown.\n")


def _write(tmp_path: Path, scenes=SCENES, questions=QUESTIONS) -> Path:
    (tmp_path / "train_sceneGraphs.json").write_text(json.dumps(scenes))
    (tmp_path / "questions.csv").write_text(questions)
    return tmp_path


def test_loader_round_trip_exact_node_text(tmp_path):
    ex = read_gqa(_write(tmp_path))
    assert [e.q_id for e in ex] == ["q1", "q2", "q3"]
    assert ex[1].question == "Is the lamp tall, or short?" and ex[1].answer == "tall"
    g = ex[0].graph
    assert g is ex[1].graph  # one graph per image
    assert g.node_ids == ["101", "102", "103"] and g.name == "2354786"
    assert g.node_text == ["name: cup; attribute: white, ceramic; (x,y,w,h): (10, 20, 30, 40)",
                           "name: table; (x,y,w,h): (0, 55, 200, 100)",
                           "name: lamp; attribute: tall; (x,y,w,h): (150, 5, 20, 50)"]
    assert g.edge_text == ["on", "to the left of", "under"]
    assert g.edge_index.tolist() == [[0, 0, 1], [1, 2, 0]]
    assert g.meta["width"] == 500 and g.meta["height"] == 333
    assert ex[2].graph.node_text == ["name: dog; attribute: brown, small; (x,y,w,h): (1, 2, 3, 4)"]
    assert ex[0].type is None and ex[0].support == []
    # explicit paths give the same, and the extra generated columns are read when present
    q = QUESTIONS.splitlines()
    extra = "\n".join([q[0] + ",type,support", q[1] + ",1-cell,101;102", q[2] + ",,", q[3] + ",0-cell,7"]) + "\n"
    (tmp_path / "q2.csv").write_text(extra)
    ex2 = read_gqa(tmp_path / "train_sceneGraphs.json", tmp_path / "q2.csv")
    assert [e.type for e in ex2] == ["1-cell", None, "0-cell"]
    assert ex2[0].support == ["101", "102"] and ex2[0].support_nodes() == [0, 1]


def _bad(scene_edit=None, questions=QUESTIONS):
    scenes = json.loads(json.dumps(SCENES))
    if scene_edit:
        scene_edit(scenes["2354786"]["objects"])
    return scenes, questions


BAD_FILES = {
    "unknown relation target": (_bad(lambda o: o["101"]["relations"].append({"object": "999", "name": "near"})),
                                ["2354786", "101", "relations[2].object", "999"]),
    "missing name": (_bad(lambda o: o["102"].pop("name")), ["2354786", "102", "name"]),
    "non-numeric box": (_bad(lambda o: o["103"].update(w="wide")), ["2354786", "103", "field 'objects.103.w'"]),
    "boolean box": (_bad(lambda o: o["103"].update(x=True)), ["103", "objects.103.x"]),
    "missing box value": (_bad(lambda o: o["101"].pop("h")), ["101", "'h'"]),
    "attributes not a list": (_bad(lambda o: o["101"].update(attributes="white")), ["101", "attributes"]),
    "unknown image in csv": (_bad(questions=QUESTIONS + "q4,123,Why?,no,No.\n"), ["line 5", "image_id", "123"]),
    "missing column": (_bad(questions="q_id,image_id,question,answer\nq1,2354786,Q?,a\n"),
                       ["line 1", "full_answer"]),
    "empty answer": (_bad(questions=QUESTIONS.replace("table,The cup", ",The cup")), ["line 2", "answer"]),
    "duplicate q_id": (_bad(questions=QUESTIONS + "q3,2417890,What?,dog,A dog.\n"), ["line 5", "q_id"]),
    "bad type": (_bad(questions="q_id,image_id,question,answer,full_answer,type\nq1,2354786,Q?,a,A.,3-cell\n"),
                 ["line 2", "type", "3-cell"]),
    "unknown support": (_bad(questions="q_id,image_id,question,answer,full_answer,support\nq1,2354786,Q?,a,A.,101;7\n"),
                        ["line 2", "support", "'7'"]),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files_name_where(tmp_path, case):
    (scenes, questions), needles = BAD_FILES[case]
    with pytest.raises(GraphFormatError) as err:
        read_gqa(_write(tmp_path, scenes, questions))
    for needle in needles:
        assert needle in str(err.value), (case, str(err.value))


def test_bad_json_and_missing_files(tmp_path):
    (tmp_path / "train_sceneGraphs.json").write_text('{"1": {"objects": {}},\n oops}')
    (tmp_path / "questions.csv").write_text(QUESTIONS)
    with pytest.raises(GraphFormatError, match=r"train_sceneGraphs.json, line 2"):
        read_gqa(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_gqa(tmp_path / "nowhere")
    with pytest.raises(GraphFormatError, match="objects"):
        scene_to_graph("5", {"width": 3})


def test_split_by_image_is_disjoint_seeded_60_20_20(tmp_path):
    scenes = {str(i): {"objects": {"1": {"name": "a", "x": 0, "y": 0, "w": 1, "h": 1}}} for i in range(50)}
    rows = "".join(f"{i}{k},{i},Q?,a,A.\n" for i in range(50) for k in range(2))
    _write(tmp_path, scenes, "q_id,image_id,question,answer,full_answer\n" + rows)
    ex = read_gqa(tmp_path)
    parts = split_by_image(ex)
    imgs = [{e.image_id for e in p} for p in parts]
    assert [len(s) for s in imgs] == [30, 10, 10]
    assert not (imgs[0] & imgs[1]) and not (imgs[0] & imgs[2]) and not (imgs[1] & imgs[2])
    assert sum(map(len, parts)) == 100
    assert [e.q_id for e in read_gqa(tmp_path, split="val")] == [e.q_id for e in parts[1]]
    assert [e.q_id for e in split_by_image(ex, seed=42)[0]] == [e.q_id for e in parts[0]]
    assert {e.image_id for e in split_by_image(ex, seed=1)[0]} != imgs[0]
    with pytest.raises(ValueError):
        read_gqa(tmp_path, split="dev")


# ----------------------------------------------------------------------- generated data
@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("scenes")
    stats = write_dataset(out, n=40, seed=3)
    return out, stats, read_gqa(out)


def test_generator_is_deterministic(generated, tmp_path):
    out, _, _ = generated
    write_dataset(tmp_path / "same", n=40, seed=3)
    write_dataset(tmp_path / "other", n=40, seed=4)
    for name in ("train_sceneGraphs.json", "questions.csv"):
        assert (tmp_path / "same" / name).read_bytes() == (out / name).read_bytes()
        assert (tmp_path / "other" / name).read_bytes() != (out / name).read_bytes()


def test_size_statistics_and_types(generated):
    _, st, ex = generated
    assert 12 <= st["mean_objects"] <= 26 and 45 <= st["mean_relations"] <= 95, st
    assert st["questions"] == len(ex)
    counts = {t: sum(e.type == t for e in ex) for t in ("0-cell", "1-cell", "2-cell")}
    assert counts == st["per_type"] and min(counts.values()) >= 3 * st["scenes"], counts
    for t in counts:  # yes/no balanced overall and within each type that has yes/no questions
        yn = [e.answer for e in ex if e.type == t and e.answer in ("yes", "no")]
        assert len(yn) >= 20 and 0.4 <= yn.count("yes") / len(yn) <= 0.6, (t, len(yn))
    assert all(len(e.answer.split()) == 1 for e in ex)  # short answers


NODE = re.compile(r"^name: (?P<name>[^;]+?)(?:; attribute: (?P<attrs>[^;]*))?; "
                  r"\(x,y,w,h\): \((?P<x>-?\d+), (?P<y>-?\d+), (?P<w>-?\d+), (?P<h>-?\d+)\)$")


def _objects(graph):
    """Parse node text back: ``[(name, attrs set, (x, y, w, h))]``."""
    out = []
    for t in graph.node_text:
        m = NODE.match(t)
        assert m, t
        attrs = set(m["attrs"].split(", ")) if m["attrs"] else set()
        out.append((m["name"], attrs, tuple(int(m[k]) for k in "xywh")))
    return out


def test_every_relation_agrees_with_the_boxes(generated):
    _, _, ex = generated
    inverse = {"on": "under", "in front of": "behind", "above": "below", "next to": "next to",
               "to the left of": "to the right of"}
    inverse.update({v: k for k, v in inverse.items()})
    checked = set()
    for e in ex:
        g = e.graph
        if g.name in checked:
            continue
        checked.add(g.name)
        W, H = g.meta["width"], g.meta["height"]
        objs = _objects(g)
        rel = {}
        for (a, b), r in zip(g.edge_index.T.tolist(), g.edge_text):
            rel[(a, b)] = r
            (ax, ay, aw, ah), (bx, by, bw, bh) = objs[a][2], objs[b][2]
            acx, bcx, a_bot, b_bot = ax + aw / 2, bx + bw / 2, ay + ah, by + bh
            ok = {"to the left of": acx < bcx, "to the right of": acx > bcx,
                  "above": a_bot <= by, "below": ay >= b_bot,
                  "on": by <= a_bot <= by + 0.25 * bh and bx <= acx <= bx + bw,
                  "under": ay <= b_bot <= ay + 0.25 * ah and ax <= bcx <= ax + aw,
                  "in front of": a_bot > b_bot, "behind": a_bot < b_bot,
                  "next to": min(a_bot, b_bot) > max(ay, by) and max(ax, bx) - min(ax + aw, bx + bw) <= 0.03 * W}[r]
            assert ok, (g.name, objs[a], r, objs[b])
        for (a, b), r in rel.items():
            assert rel.get((b, a)) == inverse[r], (g.name, a, b, r)
        for name, attrs, (x, y, w, h) in objs:
            assert 0 <= x and x + w <= W and 0 <= y and y + h <= H and w > 0 and h > 0
            assert "small" not in attrs or w * h < 0.01 * W * H
            assert "large" not in attrs or w * h > 0.05 * W * H


# ---------------------------------------------------------- independent answer checker
COLOURS = {"white", "black", "red", "blue", "green", "yellow", "brown", "gray", "orange", "pink"}
NON_MATERIAL = COLOURS | {"small", "large", "standing", "sitting"}
REL = "|".join(sorted(["on", "under", "in front of", "behind", "above", "below", "next to",
                       "to the left of", "to the right of"], key=len, reverse=True))
REF = r"the (?:\w+ )?\w+"


class Checker:
    """Answers a generated question from a loaded graph's text alone."""

    def __init__(self, graph):
        self.objs = _objects(graph)
        self.ids = graph.node_ids
        self.rel = {(a, b): r for (a, b), r in zip(graph.edge_index.T.tolist(), graph.edge_text)}

    def colour(self, i):
        (c,) = self.objs[i][1] & COLOURS
        return c

    def material(self, i):
        (m,) = self.objs[i][1] - NON_MATERIAL
        return m

    def resolve(self, ref):
        words = ref.split()[1:]
        name, attr = words[-1], (words[0] if len(words) == 2 else None)
        hits = [i for i, (n, a, _) in enumerate(self.objs) if n == name and (attr is None or attr in a)]
        assert len(hits) == 1, f"'{ref}' names {len(hits)} objects"
        return hits[0]

    def into(self, r, b, name=None):
        return [a for (a, bb), rr in self.rel.items()
                if bb == b and rr == r and (name is None or self.objs[a][0] == name)]

    def answer(self, q):
        """``(answer, support node indices)``."""
        if ": " in q:
            return self.loop(*q.split(": "))
        if m := re.fullmatch(rf"What colour is ({REF})\?", q):
            o = self.resolve(m[1])
            return self.colour(o), [o]
        if m := re.fullmatch(rf"What is ({REF}) made of\?", q):
            o = self.resolve(m[1])
            return self.material(o), [o]
        if m := re.fullmatch(rf"What is ({REL}) the (\w+) that is ({REL}) ({REF})\?", q):
            ls = self.resolve(m[4])
            (t,) = self.into(m[3], ls, name=m[2])
            (a,) = self.into(m[1], t)
            return self.objs[a][0], [a, t, ls]
        if m := re.fullmatch(rf"What is ({REL}) ({REF})\?", q):
            b = self.resolve(m[2])
            (a,) = self.into(m[1], b)
            return self.objs[a][0], [a, b]
        if m := re.fullmatch(rf"Is ({REF}) ({REL}) ({REF})\?", q):
            a, b = self.resolve(m[1]), self.resolve(m[3])
            return ("yes" if self.rel.get((a, b)) == m[2] else "no"), [a, b]
        if m := re.fullmatch(rf"Is ({REF}) (\w+)\?", q):
            o = self.resolve(m[1])
            return ("yes" if m[2] in self.objs[o][1] else "no"), [o]
        raise AssertionError(f"unparsed question: {q}")

    def loop(self, stmt, query):
        clauses = re.split(r", (?:and )?", stmt[0].lower() + stmt[1:])
        parsed = [re.fullmatch(rf"the (\w+) is ({REL}) the (\w+)", c).groups() for c in clauses]
        names = [h for h, _, _ in parsed]
        assert [t for _, _, t in parsed] == names[1:] + names[:1], "the clauses do not close a loop"
        cands = [[i for i, o in enumerate(self.objs) if o[0] == n] for n in names]
        matches = [t for t in itertools.product(*cands) if len(set(t)) == len(t)
                   and all(self.rel.get((t[k], t[(k + 1) % len(t)])) == parsed[k][1] for k in range(len(t)))]
        assert len(matches) == 1, f"loop matches {len(matches)} object tuples"
        t = matches[0]
        if m := re.fullmatch(r"are the (\w+) and the (\w+) made of the same material\?", query):
            i, j = t[names.index(m[1])], t[names.index(m[2])]
            return ("yes" if self.material(i) == self.material(j) else "no"), list(t)
        if m := re.fullmatch(r"are the (\w+) and the (\w+) the same colour\?", query):
            i, j = t[names.index(m[1])], t[names.index(m[2])]
            return ("yes" if self.colour(i) == self.colour(j) else "no"), list(t)
        if m := re.fullmatch(r"what colour is the (\w+)\?", query):
            return self.colour(t[names.index(m[1])]), list(t)
        if m := re.fullmatch(r"what is the (\w+) made of\?", query):
            return self.material(t[names.index(m[1])]), list(t)
        raise AssertionError(f"unparsed loop query: {query}")


def test_every_answer_recomputed_from_the_graph(generated):
    _, _, ex = generated
    kinds = {"0-cell": set(), "1-cell": set(), "2-cell": set()}
    for e in ex:
        ans, support = Checker(e.graph).answer(e.question)
        assert ans == e.answer, (e.q_id, e.question, e.answer, ans)
        assert [e.graph.node_ids[i] for i in support] == e.support, (e.q_id, e.question)
        assert scene_correct(e.full_answer, e.answer)
        kinds[e.type].add(e.question.split(" ")[0] if e.type != "2-cell" else e.question.split(": ")[1].split()[0])
    assert kinds == {"0-cell": {"What", "Is"}, "1-cell": {"What", "Is"}, "2-cell": {"are", "what"}}


def test_closed_loop_questions_lie_on_cycles_of_the_lifted_complex(generated):
    _, _, ex = generated
    loops = [e for e in ex if e.type == "2-cell"]
    assert loops
    path_ambiguous = 0
    for e in loops:
        cx = lift(e.graph)
        edge_id = {tuple(uv): k for k, uv in enumerate(cx.edges.tolist())}
        nodes = e.support_nodes()
        assert 3 <= len(nodes) <= 4 and len(set(nodes)) == len(nodes)
        z = np.zeros(cx.num_edges)
        for a, b in zip(nodes, nodes[1:] + nodes[:1]):
            k = edge_id[(min(a, b), max(a, b))]  # KeyError: the loop uses a pair that is no 1-cell
            z[k] += 1.0 if a < b else -1.0
        assert not np.any(cx.incidence_matrix(1) @ z), "not a closed walk"
        b2 = cx.incidence_matrix(2).toarray()
        x = np.linalg.lstsq(b2, z, rcond=None)[0]
        assert np.allclose(b2 @ x, z), "loop is not the boundary of a 2-chain of the complex"
        # the loop without its closing relation matches several object tuples (it needs the cycle)
        chk = Checker(e.graph)
        names = [chk.objs[i][0] for i in nodes]
        rels = [chk.rel[(a, b)] for a, b in zip(nodes, nodes[1:])]
        cands = [[i for i, o in enumerate(chk.objs) if o[0] == n] for n in names]
        opened = [t for t in itertools.product(*cands) if len(set(t)) == len(t)
                  and all(chk.rel.get((t[k], t[k + 1])) == rels[k] for k in range(len(t) - 1))]
        path_ambiguous += len(opened) > 1
    assert path_ambiguous >= 0.3 * len(loops), (path_ambiguous, len(loops))


def test_cli_writes_dataset_and_summary(tmp_path, capsys):
    from toporag_core.cli import main

    assert main(["data", "scenes", "--n", "3", "--seed", "1", "--out", str(tmp_path / "d")]) == 0
    line = capsys.readouterr().out.strip()
    assert "3 scenes" in line and "2-cell" in line and "objects" in line
    assert len(read_gqa(tmp_path / "d")) > 0
    assert main(["data", "scenes", "--n", "0", "--out", str(tmp_path / "e")]) == 2
    assert "bad input" in capsys.readouterr().err


def test_committed_sample_loads_and_matches_generator(tmp_path):
    sample = REPO / "assets" / "scenes_sample"
    if not sample.exists():
        pytest.skip("assets/scenes_sample not generated")
    ex = read_gqa(sample)
    assert len({e.image_id for e in ex}) == 40 and {e.type for e in ex} == {"0-cell", "1-cell", "2-cell"}
    write_dataset(tmp_path, n=40, seed=7)
    with open(sample / "questions.csv", newline="") as a, open(tmp_path / "questions.csv", newline="") as b:
        assert list(csv.reader(a)) == list(csv.reader(b)), \
            "stale sample: toporag data scenes --n 40 --seed 7 --out assets/scenes_sample"


def test_question_template_reads_back_the_template_that_wrote_each_question():
    """Every template of every type, drawn directly from the question maker on generated scenes: the
    classifier names the template that wrote the question (also in the prompt form of predictions files)."""
    from collections import Counter

    from toporag_core.tasks.scenes import TEMPLATES, question_template
    from toporag_core.tasks.scenes.generate import generate_scenes
    from toporag_core.tasks.scenes.questions import QuestionMaker, _Scene

    maker, seen = QuestionMaker(seed=5), Counter()
    for scene in generate_scenes(30, seed=5).values():
        sc = _Scene(scene)
        cycles = sc.cycles()
        for qtype, templates in TEMPLATES.items():
            for t in templates:
                q = (maker.cell0(sc, t) if qtype == "0-cell" else maker.cell1(sc, t) if qtype == "1-cell"
                     else maker.cell2(sc, t, cycles))
                if not q:
                    continue
                assert question_template(q[0], qtype) == t, (qtype, t, q[0])
                assert question_template(f"Question: {q[0]}\nAnswer:", qtype) == t
                seen[(qtype, t)] += 1
    assert set(seen) == {(qt, t) for qt, ts in TEMPLATES.items() for t in ts}  # every template was exercised
    assert question_template("How many cups are there?", "0-cell") is None
    assert question_template("What is on the table?", None) is None


def test_accuracy_by_template_splits_types_by_template():
    from toporag_core.evaluation.scene_accuracy import accuracy_by_template

    recs = [{"qtype": "0-cell", "question": "Question: What colour is the cup?\nAnswer:", "correct": True},
            {"qtype": "0-cell", "question": "Question: Is the cup red?\nAnswer:", "correct": False},
            {"qtype": "1-cell", "question": "What is on the red table that is left of the lamp?", "correct": True},
            {"qtype": "1-cell", "question": "What is on the table?", "correct": False},
            {"qtype": "2-cell", "question": "The cup is on the table, the table is behind the chair, and the chair "
                                            "is in front of the cup: are the cup and the chair the same colour?",
             "correct": True},
            {"qtype": None, "question": "Who?", "correct": True}]
    acc = accuracy_by_template(recs)
    assert acc["all"] == {"accuracy": 4 / 6, "correct": 4, "n": 6}
    assert acc["0-cell/colour"]["correct"] == 1 and acc["0-cell/is-colour"]["correct"] == 0
    assert acc["1-cell/two-hop"]["n"] == acc["1-cell/one-hop"]["n"] == 1
    assert acc["2-cell/same-colour"]["accuracy"] == 1.0
    assert set(acc) == {"all", "0-cell/colour", "0-cell/is-colour", "1-cell/two-hop", "1-cell/one-hop",
                        "2-cell/same-colour"}
