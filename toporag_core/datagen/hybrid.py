"""A hybrid text-and-table corpus with known answers: fact store -> documents -> questions.

No public hybrid table-text benchmark can be installed here, so the corpus is generated. The
**fact store** comes first: producers (region, founding year, hectares, manager, certification),
buyers, cherry varieties, contracts between a producer and a buyer (payment days, late penalty,
the week an exclusivity clause starts for a variety) and shipments keyed by
``(producer, buyer, variety, week)`` with volume, price and Brix. Documents are then *rendered*
from it and every question's answer and gold span ``(doc, start line, end line)`` is taken from
the fact store and the renderer's own line bookkeeping, never from a retriever.

Documents (``~35 %`` each narrative / table, ``~30 %`` mixed):

* narrative: a producer profile paragraph and one paragraph per contract; market notes
  (distractor prose full of the same names and numbers);
* table: a title line and a shipment table in Markdown, HTML, TSV, CSV or 2-space-aligned text;
* mixed: prose, a table (sometimes glued to the prose line above, no blank line), prose.

Questions: **A** narrative (a profile or contract fact), **B** cell-precise (one value at the
row of ``(producer, buyer, variety, week)`` and a column), **C** hybrid multi-hop (the week or the
producer comes from prose, the value from a table).

Traps: near-duplicate tables (a copy of a table with the weeks shifted by one and prices
nudged), similar producer names (``Verna Farms`` / ``Verna Orchards`` / ``Vernal Farms``),
repeated values (prices on a 0.05 grid, integer Brix), and distractor tables that hold every
term of a B question but in different rows.

:func:`generate_width_corpus` builds the table-width sweep (5..50 columns, :mod:`.hybrid_width`).
The fact store (:mod:`.hybrid_facts`) and the renderers (:mod:`.hybrid_render`) live beside this
module, which writes the documents and questions; the dataset's files are
:mod:`toporag_core.hybrid.dataset` (what evaluation reads).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..hybrid.dataset import HybridDataset, load_dataset, stats, write_dataset
from .hybrid_facts import ASK, BUYERS, COLUMNS, QTYPES, TABLE_FORMATS, VARIETIES, build_facts
from .hybrid_render import DocLines, contract_paragraph, market_note, profile_paragraph, prose_lines, render_table
from .hybrid_width import generate_width_corpus


@dataclass
class GeneratorConfig:
    """Corpus size and seed. Defaults: ~400 documents, 150 questions (50 of each type).
    ``toporag hybrid``'s options are made from the fields whose metadata carries a ``help``."""

    n_docs: int = field(default=400, metadata={"help": "documents"})
    n_questions: int = field(default=150, metadata={"help": "questions"})
    seed: int = field(default=0, metadata={"help": "seed of the generator"})
    rows_per_table: int = 8
    val_share: float = 0.3

    def __post_init__(self) -> None:
        if self.n_docs < 10:
            raise ValueError(f"n_docs must be >= 10, got {self.n_docs}")
        if self.n_questions < 3:
            raise ValueError(f"n_questions must be >= 3, got {self.n_questions}")
        if not 3 <= self.rows_per_table <= 40:
            raise ValueError(f"rows_per_table must be in [3, 40], got {self.rows_per_table}")
        if not 0.0 <= self.val_share < 1.0:
            raise ValueError(f"val_share must be in [0, 1), got {self.val_share}")


# ----------------------------------------------------------------------------- corpus
def generate(config: GeneratorConfig | None = None) -> HybridDataset:
    """The default corpus (see the module docstring)."""
    cfg = config or GeneratorConfig()
    rng = random.Random(cfg.seed)
    n_tables = max(4, int(cfg.n_docs * 0.65))
    n_prod = max(6, min(60, cfg.n_docs // 6))
    facts = build_facts(rng, n_prod, n_tables * cfg.rows_per_table)
    ship = facts["shipments"]
    keys = list(ship)
    rng.shuffle(keys)
    corpus = _Corpus(rng, facts)
    n_narr = max(1, int(cfg.n_docs * 0.35))
    n_mixed = max(1, int(cfg.n_docs * 0.30))
    mixed_prose = corpus.narrative_docs(n_narr, n_mixed)
    corpus.table_docs(keys, cfg.rows_per_table, max(1, cfg.n_docs - n_narr - n_mixed), mixed_prose, n_mixed)
    questions = _questions(rng, cfg, facts, corpus.where_profile, corpus.where_contract, corpus.where_row,
                           corpus.docs, corpus.labels, corpus.kinds)
    store = {"producers": facts["producers"],
             "shipments": [dict(zip(("producer", "buyer", "variety", "week"), k), **v) for k, v in ship.items()
                           if k in corpus.used_keys],
             "contracts": [dict(producer=p, buyer=b, **c) for (p, b), c in facts["contracts"].items()]}
    return HybridDataset(docs=corpus.docs, labels=corpus.labels, kinds=corpus.kinds, questions=questions,
                         facts=store)


class _Corpus:
    """The documents being written, and where each fact landed (for the questions' gold spans).

    Every random draw comes from the one ``rng``, in a fixed order, so a seed gives the same corpus.
    """

    def __init__(self, rng: random.Random, facts: dict) -> None:
        self.rng, self.facts, self.ship = rng, facts, facts["shipments"]
        self.docs: dict[str, str] = {}
        self.labels: dict[str, list[int]] = {}
        self.kinds: dict[str, str] = {}
        self.where_profile: dict[str, tuple] = {}  # producer -> (doc, start, end)
        self.where_contract: dict[tuple, tuple] = {}
        self.where_row: dict[tuple, tuple] = {}  # shipment key -> (doc, start, end) of its (only) table
        self.used_keys: set = set()
        self.n_mixed = self.mixed_left = 0  # mixed documents in all / still to write
        self.n_tables = 0  # table documents written

    def new_id(self, kind: str, fmt: str) -> str:
        ext = {"html": "html", "tsv": "tsv", "csv": "csv"}.get(fmt, "md" if fmt == "markdown" else "txt")
        return f"{kind}_{len(self.docs):04d}.{ext}"

    def put(self, doc_id: str, d: DocLines, kind: str) -> None:
        self.docs[doc_id], self.labels[doc_id], self.kinds[doc_id] = d.text(), d.labels, kind

    def table_rows(self, chunk: list[tuple]) -> list[list[str]]:
        ship = self.ship
        return [[k[0], k[1], k[2], str(k[3]), ship[k]["volume"], ship[k]["price"], ship[k]["brix"]] for k in chunk]

    def add_prose(self, d: DocLines, doc_id: str, kind: str | None, item, fmt: str) -> None:
        """A producer profile or a contract paragraph (recording where it is), else a market note."""
        facts = self.facts
        if kind == "profile":
            self.where_profile[item] = (doc_id,) + d.add(prose_lines(profile_paragraph(item, facts["producers"][item]),
                                                                      fmt), 0)
        elif kind == "contract":
            self.where_contract[item] = (doc_id,) + d.add(prose_lines(contract_paragraph(
                item[0], item[1], facts["contracts"][item]), fmt), 0)
        else:
            d.add(prose_lines(market_note(self.rng, facts), fmt), 0)

    def record_rows(self, keys: list[tuple], doc_id: str, span: tuple) -> None:
        for k in keys:
            self.where_row[k] = (doc_id,) + span
            self.used_keys.add(k)

    # ------------------------------------------------------------------ narrative documents
    def narrative_docs(self, n_narr: int, n_mixed: int) -> list[tuple]:
        """Every producer profile and contract once: the first ``n_mixed`` (shuffled) are returned for the
        mixed documents, the rest are spread over ``n_narr`` narrative documents."""
        rng, facts = self.rng, self.facts
        producers = list(facts["producers"])
        prose_items = [("profile", p) for p in producers] + [("contract", pc) for pc in facts["contracts"]]
        rng.shuffle(prose_items)
        mixed_prose, narr_prose = prose_items[:n_mixed], prose_items[n_mixed:]
        per_doc = max(1, -(-len(narr_prose) // n_narr))
        for i in range(n_narr):
            fmt = rng.choice(["markdown", "text", "html"])
            doc_id = self.new_id("narrative", fmt)
            d = DocLines()
            for kind, item in narr_prose[i * per_doc:(i + 1) * per_doc]:
                d.blank()
                self.add_prose(d, doc_id, kind, item, fmt)
            d.blank()
            d.add(prose_lines(market_note(rng, facts), fmt), 0)
            self.put(doc_id, d, "narrative")
        return mixed_prose

    # ------------------------------------------------------------------ table and mixed documents
    def table_docs(self, keys: list[tuple], rows_per_table: int, n_table_docs: int, mixed_prose: list[tuple],
                   n_mixed: int) -> None:
        """Chunks of ``rows_per_table`` shipments, each a table or (``n_mixed`` of them) a mixed document
        (prose + table); a near-duplicate revised copy for some."""
        chunks = [keys[i:i + rows_per_table] for i in range(0, len(keys), rows_per_table)]
        chunks = [c for c in chunks if len(c) >= 3]
        self.n_mixed = self.mixed_left = n_mixed
        for ci, chunk in enumerate(chunks):
            if self.n_tables >= n_table_docs and self.mixed_left <= 0:
                break
            self._table_doc(ci, chunk, n_table_docs, mixed_prose)

    def _table_doc(self, ci: int, chunk: list[tuple], n_table_docs: int, mixed_prose: list[tuple]) -> None:
        rng = self.rng
        fmt = rng.choice(TABLE_FORMATS)
        weeks = sorted({k[3] for k in chunk})
        title = f"Shipment report {ci + 1}: weeks {weeks[0]} to {weeks[-1]}"
        mixed = self.mixed_left > 0 and (self.n_tables >= n_table_docs or rng.random() < 0.45)
        doc_id = self.new_id("mixed" if mixed else "table", fmt)
        d = DocLines()
        if mixed:
            self._mixed_head(d, doc_id, fmt, title, mixed_prose)
        else:
            d.add([f"# {title}" if fmt == "markdown" else title], 0)
            d.blank()
        self.record_rows(chunk, doc_id, d.add(render_table(COLUMNS, self.table_rows(chunk), fmt), 1))
        if mixed:
            d.blank()
            d.add(prose_lines(market_note(rng, self.facts), fmt), 0)
            self.mixed_left -= 1
        else:
            self.n_tables += 1
        self.put(doc_id, d, "mixed" if mixed else "table")
        if rng.random() < 0.25 and self.n_tables < n_table_docs:  # near-duplicate copy: weeks + 1, prices nudged
            self._revised_copy(ci, chunk, weeks)

    def _mixed_head(self, d: DocLines, doc_id: str, fmt: str, title: str, mixed_prose: list[tuple]) -> None:
        """The prose a mixed document opens with, then its table's title."""
        done = self.n_mixed - self.mixed_left
        kind, item = mixed_prose[done] if done < len(mixed_prose) else (None, None)
        self.add_prose(d, doc_id, kind, item, fmt)
        if self.rng.random() < 0.6:
            d.blank()
        d.add([f"{title}:" if fmt != "html" else f"<p>{title}:</p>"], 0)

    def _revised_copy(self, ci: int, chunk: list[tuple], weeks: list[int]) -> None:
        """A revised copy of a table: weeks + 1 (where that shipment is new), prices nudged."""
        ship = self.ship
        copy = [(p, b, v, w + 1) for (p, b, v, w) in chunk if (p, b, v, w + 1) not in ship]
        if len(copy) < 3:
            return
        for k, src in zip(copy, [c for c in chunk if (c[0], c[1], c[2], c[3] + 1) in copy]):
            ship[k] = {**ship[src], "price": f"{float(ship[src]['price']) + 0.05:.2f}"}
        fmt2 = self.rng.choice(TABLE_FORMATS)
        doc2 = self.new_id("table", fmt2)
        d2 = DocLines()
        d2.add([f"Shipment report {ci + 1} (revised): weeks {weeks[0] + 1} to {weeks[-1] + 1}"], 0)
        d2.blank()
        self.record_rows(copy, doc2, d2.add(render_table(COLUMNS, self.table_rows(copy), fmt2), 1))
        self.put(doc2, d2, "table")
        self.n_tables += 1


def _distractor_table(rng, facts, key, docs, labels, kinds, fmt) -> str:
    """A table holding every term of ``key`` (producer, buyer, variety, week) but never in one row."""
    p, b, v, w = key
    others_p = [x for x in facts["producers"] if x != p]
    others_b = [x for x in BUYERS if x != b]
    others_v = [x for x in VARIETIES if x != v]
    rows_k = [(p, rng.choice(others_b), v, w), (rng.choice(others_p), b, v, w), (p, b, rng.choice(others_v), w),
              (p, b, v, w + rng.choice([-2, -1, 1, 2])), (rng.choice(others_p), rng.choice(others_b), v, w)]
    rows = [[a, bb, vv, str(ww), f"{rng.randint(20, 400) / 10:.1f}", f"{rng.randint(36, 70) * 0.05:.2f}",
             str(rng.randint(14, 22))] for (a, bb, vv, ww) in rows_k if (a, bb, vv, ww) not in facts["shipments"]]
    rng.shuffle(rows)
    doc_id = f"table_{len(docs):04d}.{ {'html': 'html', 'tsv': 'tsv', 'csv': 'csv'}.get(fmt, 'md') }"
    d = DocLines()
    d.add([f"Open offers for week {w} (not confirmed)"], 0)
    d.blank()
    d.add(render_table(COLUMNS, rows, fmt), 1)
    docs[doc_id], labels[doc_id], kinds[doc_id] = d.text(), d.labels, "table"
    return doc_id


def _gold(*spans) -> list[dict]:
    return [{"doc": s[0], "start": s[1], "end": s[2]} for s in spans]


def _questions(rng, cfg, facts, where_profile, where_contract, where_row, docs, labels, kinds) -> list[dict]:
    """Type A, B and C questions (a third each), numbered by type, a ``val_share`` of each type for validation."""
    per = [cfg.n_questions // 3 + (1 if i < cfg.n_questions % 3 else 0) for i in range(3)]
    qs = _questions_a(rng, facts, where_profile, where_contract, per[0])
    qs += _questions_b(rng, facts, where_row, docs, labels, kinds, per[1])
    qs += _questions_c(rng, facts, where_profile, where_contract, where_row, per[2])
    out = _numbered(qs)
    _split(out, cfg.val_share)
    return out


def _questions_a(rng, facts, where_profile, where_contract, n: int) -> list[dict]:
    """A: narrative facts (a producer's profile, a contract's terms)."""
    a_items = [("profile", p) for p in where_profile] + [("contract", pc) for pc in where_contract]
    rng.shuffle(a_items)
    return [_profile_question(rng, facts, item, where_profile) if kind == "profile"
            else _contract_question(rng, facts, item, where_contract) for kind, item in a_items[:n]]


def _profile_question(rng, facts, item, where_profile) -> dict:
    f = facts["producers"][item]
    field_, q = rng.choice([("region", f"In which region is {item} based?"),
                            ("certification", f"Which certification does {item} hold?"),
                            ("hectares", f"How many hectares of cherry orchards does {item} farm?"),
                            ("founded", f"In which year was {item} founded?"),
                            ("manager", f"Who runs {item}?")])
    return {"type": "A", "question": q, "answer": str(f[field_]), "gold": _gold(where_profile[item]),
            "meta": {"producer": item, "field": field_}}


def _contract_question(rng, facts, item, where_contract) -> dict:
    p, b = item
    c = facts["contracts"][item]
    field_, q = rng.choice([("payment_days", f"Within how many days does {b} pay {p}?"),
                            ("penalty", f"What penalty in percent applies to late deliveries from {p} "
                                        f"to {b}?")])
    return {"type": "A", "question": q, "answer": str(c[field_]), "gold": _gold(where_contract[item]),
            "meta": {"producer": p, "buyer": b, "field": field_}}


def _questions_b(rng, facts, where_row, docs, labels, kinds, n: int) -> list[dict]:
    """B: cell-precise (one value of one table row); every third one gets a distractor table."""
    ship = facts["shipments"]
    b_keys = [k for k in where_row if k in ship]
    rng.shuffle(b_keys)
    qs = []
    for i, k in enumerate(b_keys[:n]):
        col = rng.choice(list(ASK))
        p, b, v, w = k
        q = f"What was the {ASK[col]} of the {v} cherries {p} shipped to {b} in week {w}?"
        if i % 3 == 0:  # trap: a table with every term of the question, never in one row
            _distractor_table(rng, facts, k, docs, labels, kinds, rng.choice(TABLE_FORMATS))
        qs.append({"type": "B", "question": q, "answer": _cell(ship[k], col), "gold": _gold(where_row[k]),
                   "meta": {"producer": p, "buyer": b, "variety": v, "week": w, "column": col}})
    return qs


def _questions_c(rng, facts, where_profile, where_contract, where_row, n: int) -> list[dict]:
    """C: a prose fact (contract or profile) picks the table row whose value is asked."""
    prods = facts["producers"]
    c_items = []
    for (p, b), c in facts["contracts"].items():
        k = (p, b, c["variety"], c["week"])
        if (p, b) in where_contract and k in where_row:
            c_items.append(("contract", (p, b), k))
    for k in where_row:
        if k[0] in where_profile and prods[k[0]]["unique_profile"]:
            c_items.append(("profile", k[0], k))
    rng.shuffle(c_items)
    used, qs = set(), []
    for kind, item, k in c_items:
        if len(qs) >= n:
            break
        if k in used:
            continue
        used.add(k)
        qs.append(_question_c(rng, facts, kind, item, k, where_profile, where_contract, where_row))
    return qs


def _question_c(rng, facts, kind, item, k, where_profile, where_contract, where_row) -> dict:
    p, b, v, w = k
    col = rng.choice(list(ASK))
    if kind == "contract":
        q = (f"What was the {ASK[col]} of the {v} cherries {p} shipped to {b} in the week the exclusivity "
             f"clause of their contract starts?")
        g = _gold(where_contract[item], where_row[k])
    else:
        f = facts["producers"][p]
        q = (f"What was the {ASK[col]} of the {v} cherries shipped to {b} in week {w} by the producer based "
             f"in {f['region']} that holds the {f['certification']} certification?")
        g = _gold(where_profile[p], where_row[k])
    return {"type": "C", "question": q, "answer": _cell(facts["shipments"][k], col), "gold": g,
            "meta": {"producer": p, "buyer": b, "variety": v, "week": w, "column": col, "via": kind}}


def _numbered(qs: list[dict]) -> list[dict]:
    """The questions ordered by type (stable), each given its id (type letter + running number)."""
    order = sorted(range(len(qs)), key=lambda i: (QTYPES.index(qs[i]["type"]), i))
    out = []
    for n, i in enumerate(order):
        q = qs[i]
        q["id"] = f"{q['type']}{n:04d}"
        out.append(q)
    return out


def _split(qs: list[dict], val_share: float) -> None:
    """Validation split: the first ``val_share`` of each type is ``val``, the rest ``test``."""
    for t in QTYPES:
        mine = [q for q in qs if q["type"] == t]
        n_val = int(round(len(mine) * val_share))
        for j, q in enumerate(mine):
            q["split"] = "val" if j < n_val else "test"


def _cell(row: dict, col: str) -> str:
    return {"Volume (t)": row["volume"], "Price (EUR/kg)": row["price"], "Brix": row["brix"]}[col]


__all__ = ["GeneratorConfig", "HybridDataset", "generate", "generate_width_corpus", "write_dataset", "load_dataset",
           "render_table", "stats"]
