"""The fact store of the generated hybrid corpus: producers, buyers, contracts and shipments.

Producers (region, founding year, hectares, manager, certification; two firms per base name and
sometimes a ``<base>l`` variant: the similar-name trap), contracts between a producer and a buyer
(payment days, late penalty, the week an exclusivity clause starts for a variety) and shipments
uniquely keyed by ``(producer, buyer, variety, week)`` with volume, price (on a 0.05 grid) and Brix
(an integer): the repeated-value trap. Every document and every question's answer is rendered from
this store, never read back from a retriever.
"""
from __future__ import annotations

import random

BASES = ["Verna", "Maro", "Castel", "Olmo", "Ribera", "Sorel", "Alba", "Brena", "Colle", "Dorna", "Ferra",
         "Galen", "Lorca", "Mirel", "Navar", "Orsi", "Pelle", "Quinta", "Rosal", "Selva", "Tarra", "Valle", "Zorel",
         "Arden", "Belmar", "Cedro", "Elvas", "Fonte"]
SUFFIXES = ["Farms", "Orchards", "Growers", "Cooperative", "Estates"]
REGIONS = ["Jerte Valley", "Lleida", "Aragon", "Valais", "Emilia", "Puglia", "Alentejo", "Kent", "Rhone", "Tyrol",
           "Styria", "Murcia"]
CERTS = ["GlobalG.A.P.", "EU organic", "Demeter", "Rainforest Alliance", "BRCGS", "IFS Food"]
BUYERS = ["Mercadona", "Carrefour", "Lidl", "Aldi", "Tesco", "Eroski", "Coop", "Migros", "Rewe", "Edeka",
          "Auchan", "Sainsbury", "Esselunga", "Jumbo"]
VARIETIES = ["Lapins", "Sweetheart", "Kordia", "Regina", "Skeena", "Bing", "Santina", "Burlat", "Staccato",
             "Summit", "Van", "Rainier"]
FIRST = ["Ana", "Marc", "Lucia", "Pere", "Elena", "Jordi", "Marta", "Hugo", "Ines", "Tomas", "Clara", "Raul"]
LAST = ["Soler", "Vidal", "Ferrer", "Roca", "Puig", "Serra", "Costa", "Font", "Mas", "Pons", "Riera", "Bosch"]
COLUMNS = ["Producer", "Buyer", "Variety", "Week", "Volume (t)", "Price (EUR/kg)", "Brix"]
ASK = {"Volume (t)": "volume in tonnes", "Price (EUR/kg)": "price per kg in EUR", "Brix": "Brix reading"}
MEASURE_BASES = ["Brix", "Firmness", "Caliber", "Acidity", "Dry matter", "Defects", "Cracking", "Pitting",
                 "Stem browning", "Colour index", "Fruit weight", "Pulp temperature"]
STAGES = ["at harvest", "at packing", "at arrival", "after cold storage"]
TABLE_FORMATS = ("markdown", "html", "tsv", "csv", "aligned")
QTYPES = ("A", "B", "C")


def build_facts(rng: random.Random, n_producers: int, n_shipments: int) -> dict:
    """Producers, buyers, contracts and uniquely keyed shipments."""
    names: list[str] = []
    bases = BASES[:]
    rng.shuffle(bases)
    for b in bases:
        for s in rng.sample(SUFFIXES, 2):  # two firms per base name: similar-name trap
            names.append(f"{b} {s}")
        if rng.random() < 0.3:
            names.append(f"{b}l {rng.choice(SUFFIXES)}")
        if len(names) >= n_producers:
            break
    names = list(dict.fromkeys(names))[:n_producers]
    combos = [(r, c) for r in REGIONS for c in CERTS]
    rng.shuffle(combos)
    producers = {}
    for i, n in enumerate(names):
        region, cert = combos[i % len(combos)]
        producers[n] = {"region": region, "certification": cert, "founded": rng.randint(1920, 2015),
                        "hectares": rng.randint(12, 480), "manager": f"{rng.choice(FIRST)} {rng.choice(LAST)}"}
    # (region, certification) must identify a producer for type C questions
    seen: dict[tuple, int] = {}
    for p in producers.values():
        seen[(p["region"], p["certification"])] = seen.get((p["region"], p["certification"]), 0) + 1
    for p in producers.values():
        p["unique_profile"] = seen[(p["region"], p["certification"])] == 1
    shipments: dict[tuple, dict] = {}
    plist = list(producers)
    while len(shipments) < n_shipments:
        key = (rng.choice(plist), rng.choice(BUYERS), rng.choice(VARIETIES), rng.randint(20, 34))
        if key not in shipments:
            shipments[key] = {"volume": f"{rng.randint(20, 400) / 10:.1f}",
                              "price": f"{rng.randint(36, 70) * 0.05:.2f}", "brix": str(rng.randint(14, 22))}
    contracts = {}
    for (p, b, v, w) in shipments:
        if (p, b) not in contracts and rng.random() < 0.5:
            contracts[(p, b)] = {"payment_days": rng.choice([30, 45, 60, 90]), "penalty": rng.randint(2, 9),
                                 "variety": v, "week": w}
    return {"producers": producers, "shipments": shipments, "contracts": contracts}
