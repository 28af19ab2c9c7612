"""The fact store of the general task: typed facts ``(head, relation key, tail)`` and how they read.

A :class:`FactStore` is a list of facts with two indexes (``(head, key) -> tails``, ``(key, tail) ->
heads``); questions are answered from it (:mod:`.questions`), never from a retriever, so an answer is
every entity that satisfies the question in the store, whatever the retriever later keeps.

:data:`RELATIONS` is the schema: per canonical key (``born_in``), the types of its ends, its surface
texts in the two styles a user's graph has - **natural** ("born in", "place of birth": Wikidata-like,
as the Curie sample) and **freebase** ("people.person.place_of_birth", as WebQSP) - and the phrases
questions are made of:

* ``ask``: questions whose answer is the tail, given ``{h}`` ("Where was {h} born?");
* ``ask_inv``: questions whose answer is the head, given ``{t}`` ("Who was born in {t}?");
* ``of``: a noun phrase for the tail, for chaining ("the birthplace of {h}"), ``of_inv`` for the head
  ("the discoverer of {t}");
* ``did``: a clause whose object is the tail ("did {h} discover"), for "which X ... Y" questions
  ("Which element named after Poland did Marie Curie discover?"), and ``that``: a reduced relative of
  the head ("named after {t}").

The keys of :data:`toporag_core.kg.generate.REL` (the generated benchmark KG's relation names) are
keys here too, so questions can be asked over that generator's stores with the same code.
:func:`relation_text` writes a key in a style; :func:`make_world` builds one world (a connected
encyclopaedic KG of people, places, prizes, discoveries, works and organisations) from name pools,
with the cycles real KGs have (an element named after its discoverer's country; spouses sharing a
prize; a company headquartered in its founder's birthplace).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

STYLES = ("natural", "freebase", "mixed")


@dataclass(frozen=True)
class Relation:
    """One relation of the schema (see the module docstring); ``None`` phrases are not asked."""

    key: str
    head: str  # entity type of the head
    tail: str  # entity type of the tail
    natural: tuple[str, ...]
    freebase: str
    ask: tuple[str, ...] = ()
    ask_inv: tuple[str, ...] = ()
    of: str | None = None
    of_inv: str | None = None
    did: str | None = None
    that: str | None = None
    functional: bool = False  # one tail per head (a birthplace, a year)


def _r(key, head, tail, natural, freebase, **kw) -> Relation:
    nat = (natural,) if isinstance(natural, str) else tuple(natural)
    for k in ("ask", "ask_inv"):
        if isinstance(kw.get(k), str):
            kw[k] = (kw[k],)
    return Relation(key, head, tail, nat, freebase, **kw)


RELATIONS: dict[str, Relation] = {r.key: r for r in (
    _r("born_in", "person", "city", ("born in", "place of birth"), "people.person.place_of_birth",
       ask=("Where was {h} born?", "What is the place of birth of {h}?", "where is {h} from"),
       ask_inv=("Who was born in {t}?",), of="the birthplace of {h}", did="was {h} born in",
       that="born in {t}", functional=True),
    _r("citizen_of", "person", "country", ("citizen of", "country of citizenship", "nationality"),
       "people.person.nationality",
       ask=("What country is {h} a citizen of?", "What is the nationality of {h}?"),
       ask_inv=("Who is a citizen of {t}?",), of="the country of citizenship of {h}", that="a citizen of {t}"),
    _r("capital_of", "city", "country", ("capital of",), "location.administrative_division.capital_of",
       ask=("{h} is the capital of which country?",), ask_inv=("What is the capital of {t}?",),
       of_inv="the capital of {t}", that="the capital of {t}", functional=True),
    _r("located_in", "place", "country", ("located in", "country"), "location.location.containedby",
       ask=("Where is {h} located?", "In which country is {h}?"), ask_inv=("What is located in {t}?",),
       of="the country of {h}", that="located in {t}", functional=True),
    _r("spouse", "person", "person", ("spouse", "married to"), "people.person.spouse_s",
       ask=("Who was {h} married to?", "Who is the spouse of {h}?"), ask_inv=("Who was {t} married to?",),
       of="the spouse of {h}", of_inv="the spouse of {t}", that="married to {t}"),
    _r("child_of", "person", "person", ("child of", "father or mother"), "people.person.parents",
       ask=("Who is a parent of {h}?", "Who are the parents of {h}?"),
       ask_inv=("Who is a child of {t}?", "Who are the children of {t}?"),
       of="a parent of {h}", of_inv="a child of {t}", that="a child of {t}"),
    _r("award_received", "person", "prize", ("award received", "award won"), "award.award_winner.awards_won",
       ask=("What award did {h} receive?", "Which prize did {h} win?"), ask_inv=("Who received the {t}?",),
       did="did {h} receive", that="a winner of the {t}"),
    _r("discovered", "person", "element", ("discovered", "discoverer of"), "science.discoverer.discoveries",
       ask=("What did {h} discover?",), ask_inv=("Who discovered {t}?",), of_inv="the discoverer of {t}",
       did="did {h} discover", that="who discovered {t}"),
    _r("named_after", "thing", "any", ("named after",), "symbols.namesake.named_after",
       ask=("What is {h} named after?", "Who or what is {h} named after?"), ask_inv=("What is named after {t}?",),
       of="the namesake of {h}", that="named after {t}", functional=True),
    _r("employer", "person", "org", ("employer", "works for"), "business.employer.employees",
       ask=("Where did {h} work?", "Who was the employer of {h}?"), ask_inv=("Who worked at {t}?",),
       of="the employer of {h}", did="did {h} work for", that="who worked at {t}"),
    _r("educated_at", "person", "org", ("educated at", "alma mater"), "people.person.education",
       ask=("Where did {h} study?", "Where was {h} educated?"), ask_inv=("Who studied at {t}?",),
       did="did {h} study at", that="who studied at {t}"),
    _r("profession", "person", "profession", ("occupation", "profession"), "people.person.profession",
       ask=("What did {h} do?", "What is the profession of {h}?", "what was {h}'s job"),
       that="who worked as a {t}"),
    _r("directed_by", "film", "person", ("director", "directed by"), "film.film.directed_by",
       ask=("Who directed {h}?",), ask_inv=("What films did {t} direct?", "Which film did {t} direct?"),
       of="the director of {h}", of_inv="a film directed by {t}", that="directed by {t}"),
    _r("author", "book", "person", ("author", "written by"), "book.written_work.author",
       ask=("Who wrote {h}?", "Who is the author of {h}?"), ask_inv=("What did {t} write?",),
       of="the author of {h}", of_inv="a book by {t}", that="written by {t}"),
    _r("founded_by", "org", "person", ("founded by", "founder"), "organization.organization.founders",
       ask=("Who founded {h}?",), ask_inv=("What did {t} found?",), of="the founder of {h}",
       that="founded by {t}"),
    _r("headquarters", "org", "city", ("headquarters location", "headquartered in"),
       "organization.organization.headquarters",
       ask=("Where is {h} headquartered?", "Where is the headquarters of {h}?"),
       ask_inv=("What organization is headquartered in {t}?",), of="the headquarters of {h}",
       that="headquartered in {t}", functional=True),
    _r("date_of_birth", "person", "year", ("date of birth", "born"), "people.person.date_of_birth",
       ask=("When was {h} born?", "What year was {h} born?"), functional=True),
    _r("population", "city", "number", ("population",), "location.statistical_region.population",
       ask=("What is the population of {h}?",), functional=True),
    _r("inception", "org", "year", ("inception", "founded in"), "organization.organization.date_founded",
       ask=("When was {h} founded?",), functional=True),
    _r("buried_in", "person", "place", ("buried in", "place of burial"), "people.deceased_person.place_of_burial",
       ask=("Where is {h} buried?",), ask_inv=("Who is buried in {t}?",), did="was {h} buried in",
       that="buried in {t}", functional=True),
    _r("place_of_death", "person", "city", ("place of death", "died in"), "people.deceased_person.place_of_death",
       ask=("Where did {h} die?",), ask_inv=("Who died in {t}?",), of="the place of death of {h}",
       that="where someone died", functional=True),
    _r("invented", "person", "invention", ("inventor of", "invented"), "law.inventor.inventions",
       ask=("What did {h} invent?", "what else did {h} invent"), ask_inv=("Who invented the {t}?",),
       of_inv="the inventor of the {t}", did="did {h} invent", that="who invented the {t}"),
    _r("official_language", "country", "language", ("official language", "language spoken"),
       "location.country.official_language",
       ask=("What language is spoken in {h}?", "What is the official language of {h}?"),
       ask_inv=("Where is {t} spoken?",), of="the official language of {h}", that="where {t} is spoken"),
    _r("position_held", "person", "office", ("position held",), "government.politician.government_positions_held",
       ask=("What position did {h} hold?", "What office did {h} hold?"), ask_inv=("Who held the office of {t}?",
                                                                                 "who is {t}"),
       of_inv="the holder of the office of {t}", did="did {h} hold", that="who held the office of {t}"),
    # noise a Freebase subgraph is full of: asked nothing, read past
    _r("notable_type", "any", "type", ("instance of",), "common.topic.notable_types"),
    _r("gender", "person", "gender", ("sex or gender",), "people.person.gender"),
    # the relation names of the generated benchmark KG (toporag_core.kg.generate.REL)
    _r("located in", "any", "any", ("located in",), "location.location.containedby",
       ask=("Where is {h} located?",), ask_inv=("What is located in {t}?",), of="the location of {h}",
       that="located in {t}"),
    _r("part of", "any", "any", ("part of",), "base.partof.part_of",
       ask=("What is {h} part of?",), ask_inv=("What is part of {t}?",), that="part of {t}"),
    _r("founded by", "any", "any", ("founded by",), "organization.organization.founders",
       ask=("Who founded {h}?",), ask_inv=("What did {t} found?",), of="the founder of {h}",
       that="founded by {t}"),
    _r("named after", "any", "any", ("named after",), "symbols.namesake.named_after",
       ask=("What is {h} named after?",), ask_inv=("What is named after {t}?",), that="named after {t}"),
    _r("member of", "any", "any", ("member of",), "organization.organization_member.member_of",
       ask=("What is {h} a member of?",), ask_inv=("Who is a member of {t}?",), that="a member of {t}"),
    _r("directed by", "any", "any", ("directed by",), "film.film.directed_by",
       ask=("Who directed {h}?",), ask_inv=("What did {t} direct?",), of="the director of {h}",
       that="directed by {t}"),
    _r("capital of", "any", "any", ("capital of",), "location.administrative_division.capital_of",
       ask=("{h} is the capital of what?",), ask_inv=("What is the capital of {t}?",), that="the capital of {t}"),
    _r("born in", "any", "any", ("born in",), "people.person.place_of_birth",
       ask=("Where was {h} born?",), ask_inv=("Who was born in {t}?",), of="the birthplace of {h}",
       that="born in {t}"),
    _r("works for", "any", "any", ("works for",), "business.employer.employees",
       ask=("Who does {h} work for?",), ask_inv=("Who works for {t}?",), of="the employer of {h}",
       that="working for {t}"),
    _r("owned by", "any", "any", ("owned by",), "business.asset.owners",
       ask=("Who owns {h}?",), ask_inv=("What does {t} own?",), of="the owner of {h}", that="owned by {t}"),
    _r("near", "any", "any", ("near",), "location.location.nearby",
       ask=("What is {h} near?",), ask_inv=("What is near {t}?",), that="near {t}"),
    _r("sister of", "any", "any", ("sister of",), "people.person.sibling_s",
       ask=("Who is {h} the sister of?",), ask_inv=("Who is the sister of {t}?",), that="the sister of {t}"),
)}

TYPE_NAMES = {"person": ("person", "Person"), "city": ("city", "City/Town/Village"), "country": ("country", "Country"),
              "prize": ("award", "Award"), "element": ("element", "Chemical Element"),
              "org": ("organization", "Organization"), "film": ("film", "Film"), "book": ("book", "Book"),
              "profession": ("profession", "Profession"), "invention": ("invention", "Invention"),
              "language": ("language", "Human Language"), "office": ("office", "Government Office"),
              "place": ("place", "Location"), "cemetery": ("place", "Cemetery")}


def relation_text(key: str, style: str, rng: np.random.Generator) -> str:
    """The surface text of relation ``key`` in ``style`` (``natural``: one of its natural texts;
    ``freebase``: its dotted name; ``mixed``: either, per call)."""
    rel = RELATIONS[key]
    if style == "mixed":
        style = STYLES[int(rng.integers(2))]
    return rel.freebase if style == "freebase" else rel.natural[int(rng.integers(len(rel.natural)))]


# ----------------------------------------------------------------------------- the store
@dataclass
class FactStore:
    """Facts ``(head, key, tail)`` (entity names, a :data:`RELATIONS` key) with their indexes and the
    entities' types. The answer of every generated question is computed here."""

    facts: list[tuple[str, str, str]] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._out: dict[tuple[str, str], list[str]] = {}
        self._in: dict[tuple[str, str], list[str]] = {}
        self._seen: set[tuple[str, str, str]] = set()
        facts, self.facts = self.facts, []
        for f in facts:
            self.add(*f)

    def add(self, h: str, key: str, t: str, ht: str | None = None, tt: str | None = None) -> None:
        """Add one fact (duplicates and self-loops are dropped); ``ht``/``tt``: the ends' types."""
        if key not in RELATIONS:
            raise ValueError(f"unknown relation key {key!r}")
        if ht:
            self.types.setdefault(h, ht)
        if tt:
            self.types.setdefault(t, tt)
        if h == t or (h, key, t) in self._seen:
            return
        self._seen.add((h, key, t))
        self.facts.append((h, key, t))
        self._out.setdefault((h, key), []).append(t)
        self._in.setdefault((key, t), []).append(h)

    def tails(self, h: str, key: str) -> list[str]:
        return list(self._out.get((h, key), ()))

    def heads(self, key: str, t: str) -> list[str]:
        return list(self._in.get((key, t), ()))

    def has(self, h: str, key: str, t: str) -> bool:
        return (h, key, t) in self._seen

    def linked(self, a: str, b: str) -> bool:
        """Whether some fact joins ``a`` and ``b`` (either direction)."""
        return any(f[0] in (a, b) and f[2] in (a, b) for f in self.facts if a in (f[0], f[2]))

    def entities(self) -> list[str]:
        return list(dict.fromkeys(x for h, _, t in self.facts for x in (h, t)))

    def triples(self, style: str, rng: np.random.Generator) -> list[list[str]]:
        """The facts as ``[head, relation text, tail]`` in ``style`` (one text per key per graph for
        ``natural``, as a real graph uses one name per relation; ``mixed`` varies per key)."""
        texts = {k: relation_text(k, style, rng) for k in dict.fromkeys(k for _, k, _ in self.facts)}
        return [[h, texts[k], t] for h, k, t in self.facts]


# ----------------------------------------------------------------------------- names
FIRST = ("Marie", "Pierre", "Anna", "Henri", "Clara", "Louis", "Elena", "Viktor", "Sofia", "Jonas", "Ada", "Tomas",
         "Irene", "Felix", "Lena", "Oskar", "Maya", "Hugo", "Nora", "Emil", "Greta", "Pavel", "Ines", "Rafael",
         "Lucia", "Anton", "Mira", "Karl", "Eva", "Samuel", "Alma", "Leon", "Ruth", "Milan", "Olga", "Arthur",
         "Helen", "George", "Rosa", "Walter", "Julia", "Frank", "Alice", "Martin", "Nadia", "Paul", "Vera", "James",
         "Ida", "Robert", "Kate", "Andrei", "Lotte", "Diego", "Yara", "Ivan", "Selma", "Omar", "Hanna", "Bruno")
LAST = ("Curie", "Varga", "Lindqvist", "Moreau", "Novak", "Keller", "Duarte", "Halloran", "Brandt", "Sokolova",
        "Ferreira", "Okafor", "Lemaire", "Castellan", "Weiss", "Rousseau", "Petrov", "Albescu", "Marsh", "Quint",
        "Dvorak", "Holm", "Ricci", "Tanaka", "Becker", "Strand", "Olsen", "Marlowe", "Kowalski", "Fontaine",
        "Haddad", "Nakamura", "Vidal", "Larsen", "Hughes", "Morrison", "Bauer", "Costa", "Ibsen", "Janssen",
        "Kovacs", "Laurent", "Meyer", "Nilsen", "Orlov", "Pereira", "Reyes", "Schmidt", "Torres", "Ward",
        "Zielinski", "Abbott", "Carver", "Franklin", "Nixon", "Polk", "Barlow", "Russell", "Kasich", "Meigs")
COUNTRY = ("Poland", "France", "Norway", "Portugal", "Hungary", "Chile", "Kenya", "Austria", "Peru", "Finland",
           "Jamaica", "Egypt", "Greece", "Canada", "Japan", "Ireland", "Belgium", "Romania", "Morocco", "Denmark",
           "Valdoria", "Ostrava", "Kelmar", "Norvania", "Estria", "Lunegal", "Borsovia", "Tarvany", "Aldmere",
           "Quessia", "Marovia", "Sundar", "Velland", "Corvany", "Dremia", "Pallium")
CITY = ("Warsaw", "Paris", "Lyon", "Oslo", "Bergen", "Lisbon", "Porto", "Budapest", "Santiago", "Nairobi", "Vienna",
        "Graz", "Lima", "Helsinki", "Kingston", "Cairo", "Athens", "Toronto", "Osaka", "Dublin", "Ghent", "Cluj",
        "Fez", "Aarhus", "Mobile", "Diamond", "Atlanta", "Columbus", "Krakow", "Nantes", "Marren", "Tolvik",
        "Estby", "Carnwell", "Ruska", "Velden", "Harrowgate", "Milvane", "Ostend", "Brackley", "Solvay", "Dunmore",
        "Kestrel", "Ambry", "Lindholm", "Pellworth", "Corrin", "Thessa")
FIELD = ("Physics", "Chemistry", "Medicine", "Literature", "Peace", "Economics", "Mathematics", "Astronomy")
PROFESSION = ("Physicist", "Chemist", "Writer", "Physician", "Philosopher", "Politician", "Engineer", "Film director",
              "Composer", "Painter", "Lawyer", "Inventor", "Teacher", "Journalist", "Actor", "Mathematician")
LANGUAGE_OF = {"Poland": "Polish", "France": "French", "Norway": "Norwegian", "Portugal": "Portuguese",
               "Hungary": "Hungarian", "Chile": "Spanish", "Kenya": "Swahili", "Austria": "German", "Peru": "Spanish",
               "Finland": "Finnish", "Jamaica": "Jamaican English", "Egypt": "Arabic", "Greece": "Greek",
               "Canada": "French", "Japan": "Japanese", "Ireland": "Irish", "Belgium": "Dutch",
               "Romania": "Romanian", "Morocco": "Arabic", "Denmark": "Danish"}
ADJ = ("Silent", "Red", "Last", "Hidden", "Golden", "Long", "Broken", "Distant", "Bright", "Winter", "Iron", "Glass")
NOUN = ("River", "Harbour", "Garden", "Crown", "Letter", "Mountain", "Voyage", "Mirror", "Station", "Orchard",
        "Lantern", "Border")
INVENTION = ("lightning rod", "bifocals", "glass harmonica", "steam pump", "pressure gauge", "signal lamp",
             "cable loom", "water clock", "printing press", "diving bell", "rotary engine", "solar kiln")
GENDER = ("Male", "Female")
PRIZE = ("Nobel Prize", "Royal Medal", "Kessler Prize", "Order of Merit", "Lorentz Medal")
CEMETERY = ("Panthéon", "Old Town Cemetery", "Westfield Cemetery", "Hill Chapel")


def _stem(name: str) -> str:
    s = name.split()[-1].lower()
    for end in ("ia", "ium", "a", "e", "y", "o", "i", "s"):
        if s.endswith(end) and len(s) - len(end) >= 3:
            return s[: -len(end)]
    return s


def element_name(namesake: str) -> str:
    """An element named after ``namesake`` (``"Poland"`` -> ``"polonium"``-like ``"polandium"``)."""
    return _stem(namesake) + "ium"


class _World:
    """The state of :func:`make_world` while it draws: the store, the names used, the places and people."""

    def __init__(self, rng: np.random.Generator, size: int) -> None:
        self.rng, self.size = rng, size
        self.fs = FactStore()
        self.used: set[str] = set()
        self.countries: list[str] = []
        self.cities: dict[str, list[str]] = {}
        self.all_cities: list[str] = []
        self.prizes: list[str] = []
        self.unis: list[str] = []
        self.people: list[str] = []
        self.home: dict[str, str] = {}
        self.order: list[int] = []

    def draw(self, pool: Sequence[str]) -> str:
        return str(pool[int(self.rng.integers(len(pool)))])

    def pick(self, pool: Sequence[str]) -> str:
        """A name of ``pool`` not used yet in this world (after 50 tries, one with a number)."""
        for _ in range(50):
            x = self.draw(pool)
            if x not in self.used:
                self.used.add(x)
                return x
        x = f"{self.draw(pool)} {int(self.rng.integers(2, 99))}"
        self.used.add(x)
        return x

    def person_name(self) -> str:
        for _ in range(50):
            x = f"{self.draw(FIRST)} {self.draw(LAST)}"
            if x not in self.used:
                self.used.add(x)
                return x
        return self.pick(FIRST)

    def places(self) -> None:
        fs, rng = self.fs, self.rng
        self.countries = [self.pick(COUNTRY) for _ in range(2 + int(rng.integers(0, 2)) + self.size)]
        for c in self.countries:
            cs = [self.pick(CITY) for _ in range(int(rng.integers(1, 3)))]
            self.cities[c] = cs
            fs.add(cs[0], "capital_of", c, "city", "country")
            for x in cs:
                fs.add(x, "located_in", c, "city", "country")
                if rng.random() < 0.5:
                    fs.add(x, "population", f"{int(rng.integers(20_000, 3_000_000)):,}", "city", "number")
            if c in LANGUAGE_OF and rng.random() < 0.7:
                fs.add(c, "official_language", LANGUAGE_OF[c], "country", "language")
        self.all_cities = [x for cs in self.cities.values() for x in cs]
        self.prizes = [f"{self.pick(PRIZE)} in {self.draw(FIELD)}" for _ in range(1 + int(rng.integers(0, 2)))]
        for c in self.countries[:2]:
            u = f"University of {self.cities[c][0]}"
            self.used.add(u)
            self.unis.append(u)
            fs.add(u, "located_in", c, "org", "country")

    def persons(self) -> None:
        fs, rng = self.fs, self.rng
        self.people = [self.person_name() for _ in range(4 + 2 * self.size + int(rng.integers(0, 3)))]
        years = rng.choice(np.arange(1820, 1990), size=len(self.people), replace=False)
        for p, y in zip(self.people, years):
            c = self.draw(self.countries)
            self.home[p] = c
            fs.add(p, "born_in", self.draw(self.cities[c]), "person", "city")
            fs.add(p, "citizen_of", c, "person", "country")
            if rng.random() < 0.25:
                fs.add(p, "citizen_of", self.draw(self.countries), "person", "country")
            if rng.random() < 0.6:
                fs.add(p, "date_of_birth", str(int(y)), "person", "year")
            fs.add(p, "profession", self.draw(PROFESSION), "person", "profession")
            for key, share, pool in (("award_received", 0.6, self.prizes), ("employer", 0.6, self.unis),
                                     ("educated_at", 0.3, self.unis), ("place_of_death", 0.3, self.all_cities),
                                     ("gender", 0.4, GENDER)):
                if rng.random() < share:
                    fs.add(p, key, self.draw(pool), "person", RELATIONS[key].tail)

    def families(self) -> None:
        """Couples and a child per couple; couples often share a prize (loops through it)."""
        fs, people = self.fs, self.people
        self.order = order = self.rng.permutation(len(people)).tolist()
        for a, b, c in zip(order[0::4], order[1::4], order[2::4]):
            fs.add(people[a], "spouse", people[b], "person", "person")
            fs.add(people[b], "spouse", people[a], "person", "person")
            fs.add(people[c], "child_of", people[a], "person", "person")
            fs.add(people[c], "child_of", people[b], "person", "person")
            if self.rng.random() < 0.6:
                for x in (a, b):
                    fs.add(people[x], "award_received", self.prizes[0], "person", "prize")

    def discoveries(self) -> None:
        """2-3 elements per discoverer, named after a place (often the discoverer's country) or a person."""
        fs, rng = self.fs, self.rng
        for p in [self.people[i] for i in self.order[: 1 + self.size]]:
            for _ in range(2 + int(rng.integers(0, 2))):
                u = rng.random()
                namesake = self.home[p] if u < 0.45 else self.draw(self.countries) if u < 0.7 else \
                    self.draw(self.all_cities) if u < 0.85 else self.draw(self.people)
                el = element_name(namesake)
                if el in self.used:
                    continue
                self.used.add(el)
                fs.add(p, "discovered", el, "person", "element")
                fs.add(el, "named_after", namesake, "element", fs.types.get(namesake, "place"))
                sp = fs.tails(p, "spouse")
                if sp and rng.random() < 0.6:
                    fs.add(sp[0], "discovered", el, "person", "element")

    def works(self) -> None:
        """Films, books, inventions, companies (often headquartered in the founder's birthplace), offices."""
        fs, rng = self.fs, self.rng
        for p in self.people:
            u = rng.random()
            if u < 0.2:
                for _ in range(1 + int(rng.integers(0, 2))):
                    fs.add(self.pick([f"The {a} {n}" for a in ADJ for n in NOUN]), "directed_by", p, "film", "person")
            elif u < 0.4:
                for _ in range(1 + int(rng.integers(0, 2))):
                    fs.add(self.pick([f"{a} {n}" for a in ADJ for n in NOUN]), "author", p, "book", "person")
            elif u < 0.55:
                for _ in range(2 + int(rng.integers(0, 2))):
                    fs.add(p, "invented", self.pick(INVENTION), "person", "invention")
            elif u < 0.7:
                self.company(p)
            elif u < 0.8:
                c = self.home[p]
                fs.add(p, "position_held", self.pick((f"Governor of {c}", f"President of {c}",
                                                      f"Mayor of {self.cities[c][0]}", f"Minister of Finance of {c}")),
                       "person", "office")
            if rng.random() < 0.15:
                fs.add(p, "buried_in", self.pick(CEMETERY), "person", "cemetery")

    def company(self, p: str) -> None:
        fs, rng = self.fs, self.rng
        co = f"{p.split()[-1]} {self.pick(('Works', 'Company', 'Institute', 'Press', 'Laboratories'))}"
        self.used.add(co)
        fs.add(co, "founded_by", p, "org", "person")
        birth = fs.tails(p, "born_in")
        hq = birth[0] if birth and rng.random() < 0.6 else self.draw(self.all_cities)
        fs.add(co, "headquarters", hq, "org", "city")
        fs.add(co, "inception", str(int(rng.integers(1850, 2010))), "org", "year")


def make_world(rng: np.random.Generator, size: int = 1) -> FactStore:
    """One connected world: ``2 + size`` (+ 0-1) countries, their cities, ``4 + 2 size`` (+ 0-2) people
    with birthplaces, citizenships, spouses, children, prizes, employers, discoveries named after places
    or people, films, books, companies, offices, years and populations (all from the name pools; names
    are unique within the world)."""
    w = _World(rng, size)
    w.places()
    w.persons()
    w.families()
    w.discoveries()
    w.works()
    return w.fs


def add_type_noise(fs: FactStore, rng: np.random.Generator, share: float = 0.5) -> None:
    """Freebase-like noise: ``common.topic.notable_types`` facts for a ``share`` of the entities."""
    for e, t in list(fs.types.items()):
        if t in TYPE_NAMES and rng.random() < share:
            fs.add(e, "notable_type", TYPE_NAMES[t][1], t, "type")
