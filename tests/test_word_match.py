"""Word match: the question words a relation's words name, and what it changes in the seeded retrieval."""
from __future__ import annotations

import numpy as np
import pytest

from toporag_core.embed import get_encoder
from toporag_core.graph import TextualGraph
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve
from toporag_core.retrieval.lexicon import GROUPS, NAMES
from toporag_core.retrieval.path_match import path_match, readable, word_masks
from toporag_core.retrieval.seeded import seed_nodes, seeded_prizes
from toporag_core.retrieval.word_match import (_same_form, content_words, count, group_bits, question_words,
                                               relation_masks, relation_vocab, stem)

DIRECTOR = "Alice Moreau"


def film_triples() -> list[tuple[str, str, str]]:
    """A director's three films, each with two actors, one writer and a language."""
    t = []
    for i in range(3):
        f = f"Night Train {i}"
        t += [(f, "directed_by", DIRECTOR), (f, "written_by", f"Writer {i}"), (f, "in_language", f"Language {i}")]
        t += [(f, "starred_actors", f"Actor {i}-{j}") for j in range(2)]
    return t


@pytest.fixture(scope="module")
def film_ecx():
    return EmbeddedComplex.from_graph(TextualGraph.from_triples(film_triples(), name="films"), get_encoder("hashing"))


def test_question_words_drop_function_words_and_the_seed_names():
    q = "Who are the writers of the films directed by Alice Moreau?"
    assert content_words(q) == ["writers", "films", "directed", "alice", "moreau"]
    assert question_words(q, [DIRECTOR]) == ["writers", "films", "directed"]


def test_prefix_rule_matches_word_forms_not_mere_shared_starts():
    a = np.array(["writers", "directed", "released", "country", "year", "acted"], dtype=object)
    b = np.array(["written", "director", "relatives", "countries", "yearbooks", "actors"], dtype=object)
    hit = _same_form(a, b, [stem(w) for w in b.tolist()])
    assert hit[0, 0] and hit[1, 1] and hit[3, 3]  # writ-, direct-, countr-
    assert hit[5, 5]  # the same stem "act"
    assert not hit[2, 2]  # "rel": three letters
    assert not hit[4, 4]  # "year" is less than half of "yearbooks"
    assert hit.sum() == 4
    assert stem("actors") == stem("acted") == "act" and stem("gas") == "gas"  # at least 3 letters stay


def test_relation_masks_count_each_question_word_once(film_ecx):
    q = "who are the writers of the films directed by Alice Moreau"
    m = relation_masks(film_ecx, q, ["directed by", "written by", "starred actors", "in language"], [DIRECTOR])
    assert count(m).tolist() == [1.0, 1.0, 0.0, 0.0]
    assert count(m[0] | m[1]) == 2 and count(m[0] | m[0]) == 1  # a path counts a word once
    assert relation_masks(film_ecx, "Alice Moreau", ["directed by"], [DIRECTOR]).tolist() == [0]  # no words left
    rv = relation_vocab(["directed by", "written by", "by"])  # "by" alone has no content word
    assert rv.vocab.tolist() == ["directed", "written"] and rv.owner.tolist() == [0, 1]
    assert relation_masks(film_ecx, q, rv, [DIRECTOR]).tolist() == [4, 1, 0]  # bits: writers 1, films 2, directed 4


def test_the_path_that_names_more_of_the_question_reaches_the_answer(film_ecx):
    q = "who are the writers of the films directed by Alice Moreau"
    g = film_ecx.complex.graph
    at = {t: i for i, t in enumerate(g.node_text)}
    seeds = seed_nodes(film_ecx, q)
    assert [g.node_text[i] for i in seeds] == [DIRECTOR]
    masks = word_masks(film_ecx, q, seeds)
    assert masks.shape == (4,)  # the graph's four relations read as words
    plain = path_match(film_ecx, q, seeds)
    lex = path_match(film_ecx, q, seeds, lexical=0.2)
    # "directed by written by" names both question words, "directed by starred actors" one of them
    gain = lex - plain
    assert gain[at["Writer 0"]] == pytest.approx(0.4, abs=1e-4)
    assert gain[at["Actor 0-0"]] == pytest.approx(0.2, abs=1e-4)
    assert gain[at["Night Train 0"]] == pytest.approx(0.2, abs=1e-4)  # the bridge names "directed" only
    sub = retrieve(film_ecx, q, setting=RetrievalSetting.make("toporag-seeded", k0=3, k1=3))
    assert sub.params["lexical"] > 0 and np.array_equal(sub.path_match,
                                                        path_match(film_ecx, q, seeds, lexical=sub.params["lexical"]))
    # the walk: "written by" and "directed by" each name a question word, "starred actors" none, so with
    # lexical = 0.2 (tau 0.1) a writer gains 0.2 / 0.1 = 2 log units of path score over an actor
    w, a = at["Writer 0"], at["Actor 0-0"]
    L0 = seeded_prizes(film_ecx, q, 6, 6, 3, 0.5, 2, 0.1, 0.5, seeds, 1.0, 0.0)[3]
    L2 = seeded_prizes(film_ecx, q, 6, 6, 3, 0.5, 2, 0.1, 0.5, seeds, 1.0, 0.2)[3]
    assert (L2[w] - L2[a]) - (L0[w] - L0[a]) == pytest.approx(2.0, abs=1e-3)
    off = retrieve(film_ecx, q, setting=RetrievalSetting.make("toporag-seeded", k0=3, k1=3, lexical=0.0))
    assert off.params["lexical"] == 0 and np.array_equal(off.path_match, plain)


def test_synonym_groups_join_words_no_form_or_cosine_rule_joins():
    words = ["appeared", "screenwriter", "kind", "describe", "about", "former", "films", "starred", "written", "genre"]
    g = group_bits(words, stem)
    same = (g[:, None] & g[None, :]) != 0
    at = {w: i for i, w in enumerate(words)}
    assert same[at["appeared"], at["starred"]]  # one group, by listed form
    assert same[at["screenwriter"], at["written"]]  # a compound's tail "writer"
    assert same[at["kind"], at["genre"]] and same[at["describe"], at["about"]]
    assert g[at["former"]] == 0 and g[at["films"]] == 0  # "form" is not listed; "films" names every movie relation
    assert not same[at["appeared"], at["written"]] and not same[at["kind"], at["starred"]]
    assert set(GROUPS) == set(NAMES) and len(NAMES) <= 63  # bits of an int64


def test_function_words_name_relations_only_through_the_synonym_groups(film_ecx):
    assert question_words("what is Night Train 0 about", ["Night Train 0"]) == []
    assert question_words("what is Night Train 0 about", ["Night Train 0"], synonyms=True) == ["about"]
    rels = ["directed by", "written by", "starred actors", "in language", "has tags"]
    q = "who appeared in the films directed by Alice Moreau"
    on = relation_masks(film_ecx, q, rels, [DIRECTOR])
    off = relation_masks(film_ecx, q, rels, [DIRECTOR], synonyms=False)
    assert count(off).tolist() == [1, 0, 0, 0, 0]  # only "directed" is named without the groups
    assert count(on).tolist() == [1, 0, 1, 0, 0]  # "appeared" names starred actors
    assert count(relation_masks(film_ecx, "what is Night Train 0 about", rels, ["Night Train 0"])).tolist() == \
        [0, 0, 0, 0, 1]
    people = ["people.person.place_of_birth", "people.person.nationality", "people.person.profession"]
    assert count(relation_masks(film_ecx, "where is Alice Moreau from", [readable(r) for r in people],
                                [DIRECTOR])).tolist() == [1, 0, 0]  # a birthplace, not a nationality
    born = [readable(r) for r in ("people.person.place_of_birth", "people.person.date_of_birth")]
    assert count(relation_masks(film_ecx, "when was Alice Moreau born", born, [DIRECTOR])).tolist() == [1, 2]
    assert question_words("where was Alice Moreau born", [DIRECTOR], synonyms=True) == ["born"]  # "where" not
    # "do" names an occupation only as the last word
    assert question_words("what did Alice Moreau do", [DIRECTOR], synonyms=True) == ["do"]
    assert question_words("what did Alice Moreau write", [DIRECTOR], synonyms=True) == ["write"]
    assert count(relation_masks(film_ecx, "what did Alice Moreau do", [readable(r) for r in people],
                                [DIRECTOR])).tolist() == [0, 0, 1]


def test_synonyms_send_the_walk_to_the_relation_the_question_words_differently(film_ecx):
    q = "which actors appeared in the films directed by Alice Moreau"
    g = film_ecx.complex.graph
    at = {t: i for i, t in enumerate(g.node_text)}
    seeds = seed_nodes(film_ecx, q)
    off = seeded_prizes(film_ecx, q, 6, 6, 3, 0.5, 2, 0.1, 0.5, seeds, 1.0, 0.2, synonyms=False)[3]
    on = seeded_prizes(film_ecx, q, 6, 6, 3, 0.5, 2, 0.1, 0.5, seeds, 1.0, 0.2, synonyms=True)[3]
    a, w = at["Actor 0-0"], at["Writer 0"]
    # "appeared" names starred actors only through its group: lexical / tau = 2 log units for the actors
    assert (on[a] - on[w]) - (off[a] - off[w]) == pytest.approx(2.0, abs=1e-3)
    sub = retrieve(film_ecx, q, setting=RetrievalSetting.make("toporag-seeded", k0=6, k1=6))
    assert sub.params["synonyms"] is True
    assert {g.node_text[i] for i in sub.nodes.tolist()} >= {"Actor 0-0", "Actor 0-1"}
