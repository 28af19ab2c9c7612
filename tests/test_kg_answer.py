"""Answers on knowledge graphs: question-seeded retrieval behind bridge entities, linking with stop words,
the candidate names and the name reader, and ``toporag kg ask`` / ``kg eval`` from a store."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from toporag_core.cli import main
from toporag_core.embed import HashingEncoder, get_encoder
from toporag_core.graph import TextualGraph
from toporag_core.io import load_graph
from toporag_core.kg import KGStore, link_entities
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve
from toporag_core.retrieval.candidates import answer_candidates
from toporag_core.retrieval.path_match import readable
from toporag_core.retrieval.mediators import mediator_mask
from toporag_core.retrieval.seeded import path_scores, seed_nodes
from toporag_core.retrieval.seeds import link_nodes, pick_mentions, relation_words
from toporag_core.model.tiny import build_tiny_checkpoint

ACTOR = "Tom Hanks"
FILMS = [f"Film Number {i}" for i in range(6)]


def movie_triples(n_noise: int = 40) -> list[tuple[str, str, str]]:
    """An actor, six films, each film's release year and director, and many noise tags per film."""
    t = []
    for i, f in enumerate(FILMS):
        t += [(f, "starred_actors", ACTOR), (f, "release_year", str(1980 + i)), (f, "directed_by", f"Director {i}")]
        t += [(f, "has_tags", f"tag {i}-{j}") for j in range(n_noise // len(FILMS))]
    t += [("What?", "directed_by", "Roman Polanski"), ("Fall", "release_year", "1999"), ("Film", "has_tags", "film")]
    return t


@pytest.fixture(scope="module")
def enc():
    return get_encoder("hashing")


@pytest.fixture(scope="module")
def movie_ecx(enc):
    return EmbeddedComplex.from_graph(TextualGraph.from_triples(movie_triples(), name="movies"), enc)


def test_seeded_retrieval_reaches_the_answers_behind_the_bridge_entities(movie_ecx):
    q = "what release year do the films starred by Tom Hanks have"
    sub = retrieve(movie_ecx, q, setting=RetrievalSetting.make("toporag-seeded"))
    texts = set(sub.node_texts())
    g = movie_ecx.complex.graph
    assert [g.node_text[i] for i in sub.params["seeds"]] == [ACTOR]
    years = {str(1980 + i) for i in range(len(FILMS))}
    assert len(years & texts) >= 4, texts  # two hops away, through the films
    assert not any(t.startswith("tag ") for t in texts)  # a relation the question does not ask about
    assert sub.is_empty() is False and sub.counts[1] >= 1


def test_path_scores_follow_the_best_relation_and_decay_per_hop():
    edges = np.array([[0, 1], [1, 2], [0, 3], [3, 4]])
    r = np.array([0.0, 0.0, -3.0, 0.0])  # edge 0-3 is a relation the question does not mention
    L, Le = path_scores(edges, r, np.array([0]), 5, hops=2, hop_cost=0.5)
    assert L[0] == 0 and L[1] == pytest.approx(-0.5) and L[2] == pytest.approx(-1.0)
    assert L[3] == pytest.approx(-3.5) and L[4] == pytest.approx(-4.0)
    assert Le.shape == (4,) and Le[0] > Le[2]
    L1, _ = path_scores(edges, r, np.array([0]), 5, hops=1, hop_cost=0.5)
    assert L1[2] < -1e8  # out of reach in one hop


def test_a_hop_through_a_mediator_costs_one_hop():
    # 0 (seed) -e0- 1 (m.04j60kc, a mediator) -e1- 2 (the office); 2 -e2- 3 (a named neighbour)
    edges = np.array([[0, 1], [1, 2], [2, 3]])
    r = np.array([-0.2, -0.1, 0.0])
    med = mediator_mask(["James K. Polk", "m.04j60kc", "Governor of Tennessee", "Tennessee"])
    assert med.tolist() == [False, True, False, False]
    L, _ = path_scores(edges, r, np.array([0]), 4, hops=1, hop_cost=0.5, mediator=med)
    assert L[1] == pytest.approx(-0.7) and L[2] == pytest.approx(-0.8)  # -0.2 - 0.1 - 0.5: one hop
    assert L[3] < -1e8  # a second named hop needs a second round
    L2, _ = path_scores(edges, r, np.array([0]), 4, hops=2, hop_cost=0.5, mediator=med)
    assert L2[3] == pytest.approx(-1.3)
    plain, _ = path_scores(edges, r, np.array([0]), 4, hops=1, hop_cost=0.5)  # no mediators: two hops to 2
    assert plain[2] < -1e8
    same, _ = path_scores(edges, r, np.array([0]), 4, hops=2, hop_cost=0.5, mediator=np.zeros(4, bool))
    assert np.array_equal(same, path_scores(edges, r, np.array([0]), 4, hops=2, hop_cost=0.5)[0])


def test_readable_relations():
    assert readable("people.person.place_of_birth") == "person place of birth"
    assert readable("release_year") == "release year"
    assert readable("born in") == "born in"


def test_linking_skips_stop_words_and_common_titles_but_finds_long_names():
    nodes = ["What?", "Fall", "Film", "Together", "The Story", "Tom Hanks",
             "The Lord of the Rings The Return of the King Extended"]
    ids, mentions = link_nodes(nodes, "What film did Tom Hanks make together in the fall?")
    assert [nodes[i] for i in ids] == ["Tom Hanks"] and not mentions[0].weak
    ids, _ = link_nodes(nodes, "who directed the lord of the rings the return of the king extended")
    assert [nodes[i] for i in ids] == [nodes[-1]]  # 11 words: longer than the old 6-word limit
    ids, mentions = link_nodes(nodes, "what is the story")  # nothing else links: the weak one, marked
    assert [nodes[i] for i in ids] == ["The Story"] and mentions[0].weak
    assert pick_mentions(["marie curie", "curie", "marie"], {"marie curie", "curie"})[0].gram == "marie curie"
    assert len(pick_mentions(["marie curie", "curie", "marie"], {"marie curie", "curie"})) == 1


def test_names_made_of_the_graphs_relation_words_link_only_when_nothing_else_does():
    nodes = ["Vice President", "Kennedy", "Lyndon B. Johnson"]
    rel = relation_words(["government.us_president.vice_president", "people.person.spouse_s"])
    assert {"vice", "president", "spouse"} <= rel and "kennedy" not in rel
    q = "who was vice president after kennedy died"
    assert {nodes[i] for i in link_nodes(nodes, q)[0]} == {"Vice President", "Kennedy"}  # without relation words
    ids, mentions = link_nodes(nodes, q, relations=rel)
    assert [nodes[i] for i in ids] == ["Kennedy"] and not mentions[0].weak
    ids, mentions = link_nodes(nodes, "who was the vice president", relations=rel)  # nothing else: weak
    assert [nodes[i] for i in ids] == ["Vice President"] and mentions[0].weak
    # the retrieval's own linking reads the graph's relations
    g = TextualGraph.from_triples([("Kennedy", "government.us_president.vice_president", "Lyndon B. Johnson"),
                                   ("Vice President", "government.government_office.holder", "Lyndon B. Johnson")])
    ecx = EmbeddedComplex.from_graph(g, HashingEncoder(dim=16))
    assert [g.node_text[i] for i in seed_nodes(ecx, q)] == ["Kennedy"]


def test_seeds_from_the_records_topic_entity(enc):
    g = TextualGraph.from_triples(movie_triples(), meta={"q_entity": ["Film Number 2"]})
    ecx = EmbeddedComplex.from_graph(g, enc)
    assert [g.node_text[i] for i in seed_nodes(ecx, "who starred in it")] == ["Film Number 2"]
    assert [g.node_text[i] for i in seed_nodes(ecx, "x", seeds="Tom Hanks|Fall")] == ["Tom Hanks", "Fall"]


def test_answer_candidates_leave_out_topic_machine_ids_and_dropped_nodes(enc):
    g = TextualGraph.from_triples([("Marie Curie", "born in", "Warsaw"), ("Marie Curie", "spouse", "Pierre Curie"),
                                   ("Marie Curie", "type", "m.0abc12"), ("Pierre Curie", "born in", "Paris")])
    ecx = EmbeddedComplex.from_graph(g, enc)
    sub = retrieve(ecx, "Where was Marie Curie born?", setting=RetrievalSetting.make("whole"))
    cands = answer_candidates(sub, "Where was Marie Curie born?")
    assert "Marie Curie" not in cands and "m.0abc12" not in cands and {"Warsaw", "Paris"} <= set(cands)
    paris = g.node_text.index("Paris")
    assert "Paris" not in answer_candidates(sub, "Where was Marie Curie born?", dropped_nodes=[paris])
    both = answer_candidates(sub, "Who was born first, Marie Curie or Pierre Curie?")
    assert set(both) == {"Marie Curie", "Pierre Curie"}  # the question asks to choose among its entities


def test_score_names_adds_the_list_continuation_and_pads_rows():
    import torch

    from toporag_core.model import QABatch
    from toporag_core.model.decode import score_names
    from toporag_core.model.tiny import tiny_model

    model = tiny_model(use_graph=False)
    batch = QABatch(cells=None, questions=["q one?", "q two?"], contexts=["a b c", "d e"])
    both = score_names(model, batch, [["Paris", "Warsaw", "Rome"], ["Oslo"]])
    assert [len(r) for r in both] == [3, 1]
    one = score_names(model, batch.select([1]), [["Oslo"]])
    assert both[1][0] == pytest.approx(one[0][0], abs=1e-4)  # padding another row changes nothing
    eos_only = model.score_choices(batch.select([0]), ["Paris", "Warsaw", "Rome"])[0]
    assert all(b > float(e) for b, e in zip(both[0], eos_only))  # + p(name ",") > 0
    with pytest.raises(ValueError, match="non-empty"):
        score_names(model, batch, [["Paris"], []])
    assert torch.is_tensor(eos_only)


@pytest.fixture(scope="module")
def store_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("movies")
    src = d / "movies.csv"
    with open(src, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["head", "relation", "tail"])
        w.writerows(movie_triples())
    db = d / "kg.duckdb"
    KGStore.create(db, [src]).close()
    ckpt = build_tiny_checkpoint(d / "ckpt", dataset="general", question_form="graphqa", reader={"open": "names"},
                                 retrieval={"method": "toporag-seeded", "k0": 10, "k1": 10, "text": "compact"})
    return d, db, ckpt


def test_store_linking_drops_common_titles(store_files):
    _, db, _ = store_files
    with KGStore(db) as store:
        links = link_entities(store, "What film did Tom Hanks make in the fall?")
    assert [lk.name for lk in links] == [ACTOR]


def test_a_bracketed_span_links_alone_in_the_store_and_in_one_graph(store_files):
    _, db, _ = store_files
    q = "what film did Tom Hanks make before [Fall]"  # MetaQA marks the topic in brackets
    with KGStore(db) as store:
        links = link_entities(store, q)
        assert [(lk.name, lk.how) for lk in links] == [("Fall", "marked")]  # a common title, but marked
        assert [lk.name for lk in link_entities(store, "what film did Tom Hanks make before [Nowhere]")] == [ACTOR]
    nodes = ["What?", "Fall", "Tom Hanks"]
    ids, mentions = link_nodes(nodes, q)
    assert [nodes[i] for i in ids] == ["Fall"] and not mentions[0].weak
    assert [nodes[i] for i in link_nodes(nodes, "what did [nobody] give Tom Hanks")[0]] == ["Tom Hanks"]


def test_kg_subgraph_reads_back_from_its_csv_in_the_same_order(store_files, enc, tmp_path, capsys):
    _, db, _ = store_files
    q = "what release year do the films starred by Tom Hanks have"
    out = tmp_path / "sub.csv"
    assert main(["kg", "subgraph", str(db), "-q", q, "--out", str(out)]) == 0
    assert "linked: Tom Hanks (exact)" in capsys.readouterr().out
    from toporag_core.kg import question_subgraph

    with KGStore(db) as store:
        _, nb = question_subgraph(store, q, 2)
    back = load_graph(str(out))
    assert back.node_text == nb.graph.node_text and back.edge_text == nb.graph.edge_text
    assert np.array_equal(back.edge_index, nb.graph.edge_index)
    s = RetrievalSetting.make("toporag-seeded")
    a = retrieve(EmbeddedComplex.from_graph(nb.graph, enc), q, setting=s)
    b = retrieve(EmbeddedComplex.from_graph(back, enc), q, setting=s)
    assert a.node_texts() == b.node_texts() and a.triples() == b.triples()


def test_kg_ask_names_an_entity_and_never_the_topic(store_files, monkeypatch, capsys):
    _, db, ckpt = store_files
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    q = "which directors made the films starred by Tom Hanks"
    assert main(["kg", "ask", str(db), "-q", q, "--checkpoint", str(ckpt), "--json"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    names = [c["name"] for c in out["candidates"]]
    assert out["answer"].split(", ")[0] == names[0] and ACTOR not in names and out["topic"] == [ACTOR]
    assert 0 < out["confidence"] <= 1 and out["links"][0]["name"] == ACTOR and out["method"] == "toporag-seeded"
    assert sum(c["probability"] for c in out["candidates"]) <= 1 + 1e-6
    assert "deprecated" not in cap.err and "Loading weights" not in cap.err
    assert main(["kg", "ask", str(db), "-q", q, "--checkpoint", str(ckpt)]) == 0
    human = capsys.readouterr().out
    assert human.startswith("linked: Tom Hanks (exact)") and "answer: " in human and "candidates (probability among them): " in human


def test_kg_ask_clear_errors(store_files, tmp_path, monkeypatch, capsys):
    _, db, ckpt = store_files
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    assert main(["kg", "ask", str(tmp_path / "nope.duckdb"), "-q", "who?", "--checkpoint", str(ckpt)]) == 2
    assert "no such knowledge-graph store" in capsys.readouterr().err
    assert main(["kg", "ask", str(db), "-q", "where is nothing at all", "--checkpoint", str(ckpt)]) == 2
    assert "--entity" in capsys.readouterr().err
    assert main(["ask", str(db), "-q", "who?"]) == 2  # a store is not a graph file: say what to run instead
    assert "toporag kg ask" in capsys.readouterr().err


def test_kg_eval_summary_predictions_and_bad_lines(store_files, tmp_path, monkeypatch, capsys):
    d, db, ckpt = store_files
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    qf = tmp_path / "q.jsonl"
    rows = [{"id": "a", "question": "what release year do the films starred by Tom Hanks have",
             "answers": ["1981", "1982"]},
            {"id": "b", "question": "who directed it", "answers": ["Director 3"], "topic": "Film Number 3"},
            {"id": "c", "question": "where is nothing at all", "answers": ["x"]}]
    qf.write_text("".join(json.dumps(r) + "\n" for r in rows))
    preds = tmp_path / "preds.jsonl"
    assert main(["kg", "eval", str(db), str(qf), "--out", str(preds), "--checkpoint", str(ckpt), "--json",
                 "--methods", "toporag,g-retriever"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert out["questions"] == 3 and set(out["coverage"]) == {"toporag-seeded", "toporag", "g-retriever"}
    assert {"hit", "hit1", "subgraph_coverage", "p50_s"} <= set(out) and out["unanswered"] == 1
    assert out["coverage"]["toporag-seeded"] >= 2 / 3 - 1e-9  # both linked questions hold their answer
    assert "question c" in cap.err
    recs = [json.loads(x) for x in preds.read_text().splitlines()]
    assert [r["id"] for r in recs] == ["a", "b", "c"] and recs[2]["error"] and recs[1]["links"][0]["how"] == "given"
    assert main(["compare", f"a={preds}", f"b={preds}"]) == 0  # `toporag compare` reads it
    capsys.readouterr()
    from toporag_core.predictions import load_lenient

    assert len(load_lenient(preds).records) == 3  # the Error analysis page's reader
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(rows[0]) + "\n" + '{"id": "z", "answers": ["x"]}\n')
    assert main(["kg", "eval", str(db), str(bad), "--checkpoint", str(ckpt)]) == 2
    assert "line 2: field 'question'" in capsys.readouterr().err
    bad.write_text('{"question": "q", "answers": "x", "topic": 3}\n')
    assert main(["kg", "eval", str(db), str(bad), "--checkpoint", str(ckpt)]) == 2
    assert "line 1: field 'topic'" in capsys.readouterr().err


def test_path_priors_rank_the_names_the_questions_relations_lead_to(movie_ecx):
    from toporag_core.model import QABatch
    from toporag_core.model.dispatch import _named_rows
    from toporag_core.retrieval.candidates import candidate_priors
    from toporag_core.model.tiny import tiny_model

    q = "what release year do the films starred by Tom Hanks have"
    sub = retrieve(movie_ecx, q, setting=RetrievalSetting.make("toporag-seeded"))
    assert sub.node_scores is not None and sub.node_scores.shape == (movie_ecx.complex.num_nodes,)
    names = answer_candidates(sub, q)
    pri = candidate_priors(sub, names)
    assert len(pri) == len(names) and all(p <= 0 for p in pri)
    years = [p for n, p in zip(names, pri) if n.isdigit()]
    films = [p for n, p in zip(names, pri) if n.startswith("Film")]
    assert years and films and min(years) >= max(films) - 1.0  # one more well-matching hop costs little
    assert candidate_priors(retrieve(movie_ecx, q, setting=RetrievalSetting.make("toporag")), names) is None
    model = tiny_model(use_graph=False)
    batch = QABatch(cells=None, questions=[q], contexts=["x"])
    plain = _named_rows(model, batch, [names], None, 1.0)[0]
    steered = _named_rows(model, batch, [names], None, 1.0, priors=[pri], path_weight=1e4)[0]
    assert plain["name_scores"] == steered["name_scores"]  # the model's part is unchanged
    assert pri[names.index(steered["answer"].split(", ")[0])] == max(pri)  # a strong weight picks a best-path name


def test_path_match_scores_whole_relation_paths_so_the_answer_beats_its_bridge(movie_ecx):
    from toporag_core.retrieval.candidates import candidate_match, candidate_priors
    from toporag_core.retrieval.path_match import path_match

    q = "what release year do the films starred by Tom Hanks have"
    g = movie_ecx.complex.graph
    at = {t: i for i, t in enumerate(g.node_text)}
    seeds = seed_nodes(movie_ecx, q)
    P = path_match(movie_ecx, q, seeds)
    assert P.shape == (g.num_nodes,) and P[at[ACTOR]] == -1  # the seed itself is no answer
    # "starred actors release year" spells out the question better than "starred actors" or "... has tags"
    assert P[at["1980"]] > P[at[FILMS[0]]] > -1 and P[at["1980"]] > P[at["tag 0-0"]]
    assert P[at["Roman Polanski"]] == -1  # no path from the seed
    assert path_match(movie_ecx, movie_ecx.question_vector(q), seeds) is None  # needs the question's words
    sub = retrieve(movie_ecx, q, setting=RetrievalSetting.make("toporag-seeded"))
    assert np.array_equal(sub.path_match, path_match(movie_ecx, q, seeds, lexical=sub.params["lexical"]))
    names = answer_candidates(sub, q)
    match = candidate_match(sub, names)
    from toporag_core.retrieval.word_match import question_words

    top = 1 + sub.params["lexical"] * len(question_words(q, [ACTOR], sub.params["synonyms"]))  # at most every word
    assert len(match) == len(names) and all(-1 <= m <= top for m in match)
    plain, steered = candidate_priors(sub, names), candidate_priors(sub, names, match_weight=10.0)
    assert not names[int(np.argmax(plain))].isdigit()  # the path score alone prefers the bridge (a film)
    assert names[int(np.argmax(steered))].isdigit()  # with the match, the end of the two-relation path wins
    assert candidate_match(retrieve(movie_ecx, q, setting=RetrievalSetting.make("toporag")), names) is None


def test_ranking_by_the_whole_paths_match_prizes_the_answers_over_their_bridges(movie_ecx):
    q = "what release year do the films starred by Tom Hanks have"
    g = movie_ecx.complex.graph
    years = [i for i, t in enumerate(g.node_text) if t in {str(1980 + i) for i in range(len(FILMS))}]
    films = [i for i, t in enumerate(g.node_text) if t in FILMS]
    by = {m: retrieve(movie_ecx, q, setting=RetrievalSetting.make("toporag-seeded", match=m)) for m in (0.0, 1.0)}
    assert RetrievalSetting.make("toporag-seeded").params["match"] == 1.0  # the default
    prized = {m: int((s.prizes[0][years] > 0).sum()) for m, s in by.items()}
    assert prized[1.0] > prized[0.0]  # "starred actors release year" outranks "starred actors"
    assert by[0.0].prizes[0][films].sum() > by[1.0].prizes[0][films].sum()  # the bridges give way
    assert np.array_equal(by[0.0].node_scores, by[1.0].node_scores)  # the path score itself is unchanged
    assert by[1.0].params["match"] == 1.0 and set(by[1.0].node_texts()) >= {str(1980 + i) for i in range(4)}


def test_hit1_reads_the_first_item_of_a_list_and_a_number_with_commas_as_one_item():
    from toporag_core.answering.confidence import runner_ups
    from toporag_core.evaluation.kg_questions import hit, hit1
    from toporag_core.metrics import answer_items
    from toporag_core.model.answer_text import dedupe_items

    assert answer_items("2,679,285") == ["2,679,285"] and answer_items("Pat Nixon, Gerald Ford,") == [
        "Pat Nixon", "Gerald Ford"]
    assert hit1("2,679,285", ["2,679,285"]) and hit1("2,679,285, 1,000", ["2,679,285"])
    assert not hit1("1,000, 2,679,285", ["2,679,285"]) and hit("1,000, 2,679,285", ["2,679,285"])
    assert hit1("Paris, Lyon", ["paris"]) and not hit1("", ["paris"])
    assert dedupe_items("1,000, 1,000") == "1,000"
    cands = [{"name": "2,679,285", "probability": 0.6}, {"name": "1,000", "probability": 0.4}]
    assert runner_ups("2,679,285", cands) == [("1,000", 0.4)]
