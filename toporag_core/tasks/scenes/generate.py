"""A faithful generator of GQA-format scene graphs.

A scene is laid out like a photo: furniture ("supports") standing on the floor with small
items on their top, free-standing objects and people on the floor, wall objects high up.
Every relation is *computed from the integer boxes* (never sampled), so the graph is
geometrically consistent and its cycles are real: three objects on one table that are
left/right of each other form triangles, as in GQA. Depth (``in front of``/``behind``)
follows the usual photo cue: of two overlapping objects the one whose bottom edge is
lower in the image is nearer the camera.

Relation rules for an ordered pair ``(a, b)`` of boxes, first match wins
(``bottom = y + h``, ``cx = x + w / 2``, ``W``/``H`` the image size):

* ``on`` / ``under``: ``b.y <= a.bottom <= b.y + 0.25 b.h``, ``b.x <= a.cx <= b.x + b.w``,
  and ``a`` has the smaller area;
* ``in front of`` / ``behind``: the boxes intersect and ``a.bottom > b.bottom + 0.03 H``;
* ``above`` / ``below``: ``a.bottom <= b.y`` and their x-ranges overlap;
* ``next to`` (both ways): their y-ranges overlap and the horizontal gap is ``<= 0.03 W``;
* ``to the left of`` / ``to the right of``: ``a.cx < b.cx``.

Each scene relates its nearest pairs (about ``1.8 N`` pairs, both directions), which gives
GQA's density: about 19 objects and 68 relations per scene.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...io.gqa import QUESTIONS_FILE, SCENES_FILE
from .questions import COLUMNS, generate_questions

from .vocab import COLOURS, INVERSE, MATERIALS, POSES, RELATIONS, SIZES  # noqa: F401  (re-exported)

SMALL_AREA, LARGE_AREA = 0.008, 0.08  # box area / image area below / above which a size word is added

# theme -> kind -> names. Kinds decide placement: supports stand on the floor and carry items.
THEMES = {
    "kitchen": {"support": ["table", "counter", "shelf"],
                "item": ["cup", "plate", "bowl", "bottle", "mug", "pot", "jar", "vase"],
                "standing": ["chair", "stool", "cabinet", "oven"], "wall": ["window", "clock", "picture"],
                "animate": ["man", "woman", "cat"]},
    "office": {"support": ["desk", "table", "shelf"],
               "item": ["laptop", "book", "lamp", "mug", "phone", "keyboard", "cup", "box"],
               "standing": ["chair", "plant", "cabinet", "bin"], "wall": ["window", "poster", "clock"],
               "animate": ["man", "woman"]},
    "living room": {"support": ["table", "shelf", "dresser"],
                    "item": ["book", "vase", "remote", "cup", "candle", "lamp", "bowl", "box"],
                    "standing": ["chair", "couch", "plant", "tv"], "wall": ["window", "picture", "mirror"],
                    "animate": ["dog", "cat", "man"]},
    "garden": {"support": ["bench", "table"],
               "item": ["pot", "cup", "bag", "ball", "book", "bottle", "bowl"],
               "standing": ["tree", "bike", "chair", "umbrella"], "wall": ["bird", "sign", "lamp"],
               "animate": ["dog", "man", "woman"]},
}
_NO_MATERIAL = {"tree", "plant", "bird", "man", "woman", "dog", "cat"}
_MATERIAL_OF = {"window": ("glass",), "mirror": ("glass",), "book": ("paper",), "poster": ("paper",),
                "couch": ("leather", "fabric"), "bag": ("leather", "fabric", "plastic"),
                "laptop": ("metal", "plastic"), "phone": ("metal", "plastic", "glass"),
                "table": ("wooden", "metal", "glass", "stone"), "desk": ("wooden", "metal"),
                "bench": ("wooden", "metal", "stone"), "counter": ("wooden", "stone", "metal"),
                "shelf": ("wooden", "metal", "glass"), "dresser": ("wooden",), "cabinet": ("wooden", "metal"),
                "cup": ("ceramic", "glass", "plastic", "metal", "paper"), "mug": ("ceramic", "glass", "metal"),
                "plate": ("ceramic", "glass", "plastic", "metal"), "bowl": ("ceramic", "glass", "plastic", "wooden"),
                "bottle": ("glass", "plastic"), "jar": ("glass", "ceramic"), "vase": ("glass", "ceramic", "stone"),
                "pot": ("ceramic", "metal", "stone", "plastic"), "chair": ("wooden", "metal", "plastic", "leather"),
                "tv": ("plastic", "metal"), "keyboard": ("plastic", "metal"), "remote": ("plastic",),
                "candle": ("wax",), "ball": ("plastic", "leather"), "umbrella": ("fabric", "plastic"),
                "bike": ("metal",), "clock": ("metal", "plastic", "wooden"), "sign": ("metal", "wooden"),
                "oven": ("metal",), "bin": ("metal", "plastic"), "box": ("paper", "wooden", "plastic", "metal")}
_DEFAULT_MATERIALS = ("wooden", "metal", "plastic", "glass")
_ANIMAL = ("black", "white", "brown", "gray", "orange")
_COLOUR_OF = {"tree": ("green", "brown"), "plant": ("green",), "window": ("white", "black", "brown"),
              "dog": _ANIMAL, "cat": _ANIMAL, "bird": _ANIMAL}


def _relation(a: np.ndarray, b: np.ndarray, W: int, H: int) -> str | None:
    """The relation of box ``a`` to box ``b`` (``x, y, w, h`` ints), or ``None``."""
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    a_bot, b_bot, acx, bcx = ay + ah, by + bh, ax + aw / 2, bx + bw / 2
    if by <= a_bot <= by + 0.25 * bh and bx <= acx <= bx + bw and aw * ah < bw * bh:
        return "on"
    if ay <= b_bot <= ay + 0.25 * ah and ax <= bcx <= ax + aw and bw * bh < aw * ah:
        return "under"
    x_overlap = min(ax + aw, bx + bw) - max(ax, bx)
    y_overlap = min(a_bot, b_bot) - max(ay, by)
    if x_overlap > 0 and y_overlap > 0:
        if a_bot > b_bot + 0.03 * H:
            return "in front of"
        if b_bot > a_bot + 0.03 * H:
            return "behind"
    if x_overlap > 0 and a_bot <= by:
        return "above"
    if x_overlap > 0 and b_bot <= ay:
        return "below"
    if y_overlap > 0 and -x_overlap <= 0.03 * W:
        return "next to"
    if acx < bcx:
        return "to the left of"
    if acx > bcx:
        return "to the right of"
    return None


def _layout(rng: np.random.Generator, n_obj: int, W: int, H: int, theme: dict) -> list[dict]:
    """Names, float boxes and shared-set flags of ``n_obj`` objects placed in a ``W x H`` image."""
    objs: list[dict] = []
    for _ in range(int(rng.integers(1, 4))):
        w, h = rng.uniform(0.2, 0.4) * W, rng.uniform(0.12, 0.25) * H
        bottom = rng.uniform(0.65, 0.98) * H
        objs.append(dict(name=str(rng.choice(theme["support"])), kind="support",
                         box=[rng.uniform(0, W - w), bottom - h, w, h], parent=None))
    supports = list(range(len(objs)))
    for s in supports:
        sx, sy, sw, sh = objs[s]["box"]
        for _ in range(int(rng.integers(1, 5))):
            if len(objs) >= n_obj:
                break
            w, h = rng.uniform(0.04, 0.1) * W, rng.uniform(0.06, 0.15) * H
            w = min(w, 0.45 * sw)
            cx = rng.uniform(sx + w / 2, sx + sw - w / 2)
            bottom = sy + rng.uniform(0.02, 0.15) * sh
            objs.append(dict(name=str(rng.choice(theme["item"])), kind="item",
                             box=[cx - w / 2, max(0.0, bottom - h), w, h], parent=s))
    kinds, probs = ["standing", "item", "wall", "animate"], [0.35, 0.2, 0.25, 0.2]
    while len(objs) < n_obj:
        kind = str(rng.choice(kinds, p=probs))
        if kind == "wall":
            w, h = rng.uniform(0.08, 0.2) * W, rng.uniform(0.08, 0.2) * H
            top = rng.uniform(0, 0.3) * H
        else:
            lo_w, hi_w, lo_h, hi_h = {"standing": (0.08, 0.25, 0.15, 0.45), "item": (0.03, 0.08, 0.05, 0.12),
                                      "animate": (0.08, 0.18, 0.2, 0.5)}[kind]
            w, h = rng.uniform(lo_w, hi_w) * W, rng.uniform(lo_h, hi_h) * H
            top = rng.uniform(0.5, 1.0) * H - h
        objs.append(dict(name=str(rng.choice(theme[kind])), kind=kind,
                         box=[rng.uniform(0, W - w), max(0.0, top), w, h], parent=None))
    return objs


def _attributes(rng: np.random.Generator, objs: list[dict], W: int, H: int) -> None:
    """Colour, material (or pose for people/animals) and a size word where the box is clearly small/large.

    Items on one support share a colour or material with probability 1/2 (dish sets, book
    rows), so "same material?" questions have yes answers often enough to be balanced.
    """
    set_attr: dict[int, tuple[str, str]] = {}
    for o in objs:
        name = o["name"]
        colour = str(rng.choice(_COLOUR_OF.get(name, COLOURS)))
        material = None if name in _NO_MATERIAL else str(rng.choice(_MATERIAL_OF.get(name, _DEFAULT_MATERIALS)))
        if o["parent"] is not None and rng.random() < 0.5:
            key = set_attr.setdefault(o["parent"], (str(rng.choice(COLOURS)), str(rng.choice(_DEFAULT_MATERIALS))))
            if rng.random() < 0.5 and name not in _COLOUR_OF:
                colour = key[0]
            elif material is not None and key[1] in _MATERIAL_OF.get(name, _DEFAULT_MATERIALS):
                material = key[1]  # only a material the object can be made of
        attrs = [colour] + ([material] if material else [str(rng.choice(POSES))])
        x, y, w, h = o["box"]
        frac = w * h / (W * H)
        if name not in _NO_MATERIAL and frac < SMALL_AREA:
            attrs.append("small")
        elif name not in _NO_MATERIAL and frac > LARGE_AREA:
            attrs.append("large")
        o["attributes"] = attrs


def _relate(rng: np.random.Generator, boxes: np.ndarray, W: int, H: int, n_pairs: int) -> list[tuple[int, int, str]]:
    """``(a, b, relation of a to b)`` for the ``n_pairs`` nearest related pairs, both directions.

    Args:
        boxes: ``(N, 4)`` int boxes.
    Returns:
        ``2 * pairs`` directed relations; "on" pairs are always kept.
    """
    n = len(boxes)
    x0, y0 = boxes[:, 0], boxes[:, 1]
    x1, y1 = x0 + boxes[:, 2], y0 + boxes[:, 3]
    # gap between boxes (0 when they touch or overlap), all pairs at once
    gx = np.maximum(0, np.maximum(x0[:, None], x0[None, :]) - np.minimum(x1[:, None], x1[None, :]))
    gy = np.maximum(0, np.maximum(y0[:, None], y0[None, :]) - np.minimum(y1[:, None], y1[None, :]))
    gap = np.hypot(gx, gy) + rng.uniform(0, 0.05 * W, size=(n, n))  # noise: not always the very nearest
    iu, ju = np.triu_indices(n, k=1)
    order = np.argsort(gap[iu, ju], kind="stable")
    kept, rest = [], []
    for k in order.tolist():
        a, b = int(iu[k]), int(ju[k])
        r = _relation(boxes[a], boxes[b], W, H)
        if r is None:
            continue
        (kept if r in ("on", "under") else rest).append((a, b, r))
    pairs = kept + rest[:max(0, n_pairs - len(kept))]
    out = []
    for a, b, r in pairs:
        out += [(a, b, r), (b, a, INVERSE[r])]
    return out


def generate_scene(rng: np.random.Generator, first_object_id: int = 0) -> dict:
    """One GQA-format scene ``{width, height, objects}``; object ids count from ``first_object_id``."""
    W, H = int(rng.integers(500, 801)), int(rng.integers(375, 601))
    theme = THEMES[str(rng.choice(sorted(THEMES)))]
    n_obj = int(rng.integers(12, 27))
    # a scene uses only part of its theme's vocabulary, so names repeat as in GQA (several cups,
    # two chairs); repeated names are what make a loop, not a name, identify its objects
    theme = {k: sorted(rng.choice(v, size=min(len(v), 4 if k == "item" else 3), replace=False).tolist())
             for k, v in theme.items()}
    objs = _layout(rng, n_obj, W, H, theme)
    boxes = np.array([o["box"] for o in objs], dtype=np.float64)
    boxes = np.rint(boxes).astype(np.int64)
    boxes[:, 2:] = np.maximum(boxes[:, 2:], 1)
    boxes[:, 0] = np.clip(boxes[:, 0], 0, W - boxes[:, 2])
    boxes[:, 1] = np.clip(boxes[:, 1], 0, H - boxes[:, 3])
    for o, b in zip(objs, boxes.tolist()):
        o["box"] = b
    _attributes(rng, objs, W, H)
    rels = _relate(rng, boxes, W, H, n_pairs=round(n_obj * rng.uniform(1.6, 2.0)))
    ids = [str(first_object_id + i) for i in range(len(objs))]
    out = {oid: {"name": o["name"], "x": o["box"][0], "y": o["box"][1], "w": o["box"][2], "h": o["box"][3],
                 "attributes": o["attributes"], "relations": []} for oid, o in zip(ids, objs)}
    for a, b, r in rels:
        out[ids[a]]["relations"].append({"object": ids[b], "name": r})
    return {"width": W, "height": H, "objects": out}


def generate_scenes(n: int, seed: int = 0) -> dict[str, dict]:
    """``n`` scenes in GQA format, ``{image_id: scene}``; identical for identical ``(n, seed)``."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    scenes, next_id = {}, 1000
    for i in range(n):
        scene = generate_scene(rng, next_id)
        next_id += len(scene["objects"])
        scenes[f"s{seed}_{i:05d}"] = scene
    return scenes


def write_dataset(out_dir: str | Path, n: int, seed: int = 0, per_type: int = 5) -> dict:
    """Write ``train_sceneGraphs.json`` and ``questions.csv`` into ``out_dir``.

    Returns:
        :func:`dataset_stats` of what was written (plus ``paths``).
    """
    import csv

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    scenes = generate_scenes(n, seed)
    rows = generate_questions(scenes, seed=seed, per_type=per_type)
    scenes_path, q_path = out / SCENES_FILE, out / QUESTIONS_FILE
    with open(scenes_path, "w", encoding="utf-8") as fh:
        json.dump(scenes, fh, separators=(",", ":"))
    with open(q_path, "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    stats = dataset_stats(scenes, rows)
    stats["paths"] = [str(scenes_path), str(q_path)]
    return stats


def dataset_stats(scenes: dict[str, dict], rows: list[dict]) -> dict:
    """Mean objects / relations per scene, question counts per type, yes share of yes/no answers."""
    n_obj = np.array([len(s["objects"]) for s in scenes.values()])
    n_rel = np.array([sum(len(o["relations"]) for o in s["objects"].values()) for s in scenes.values()])
    types = {t: sum(r["type"] == t for r in rows) for t in ("0-cell", "1-cell", "2-cell")}
    yn = [r["answer"] for r in rows if r["answer"] in ("yes", "no")]
    return {"scenes": len(scenes), "mean_objects": float(n_obj.mean()), "mean_relations": float(n_rel.mean()),
            "questions": len(rows), "per_type": types,
            "yes_share": (yn.count("yes") / len(yn)) if yn else float("nan"), "yes_no": len(yn)}
