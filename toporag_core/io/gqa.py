"""GQA scene graphs + GraphQA questions -> :class:`TextualGraph` examples.

Two files, the same for real and generated data:

* ``*_sceneGraphs.json`` (GQA): ``{image_id: {width, height, objects: {object_id: {name,
  x, y, w, h, attributes: [...], relations: [{object, name}, ...]}}}}``.
* ``questions.csv`` (GraphQA): ``q_id,image_id,question,answer,full_answer``; files written
  by :mod:`toporag_core.tasks.scenes.generate` add ``type`` (``0-cell`` | ``1-cell`` | ``2-cell``)
  and ``support`` (answer-bearing object ids joined by ``;``). Extra columns are ignored.

Node text is exactly what the GraphQA benchmark (G-Retriever's preprocessing) builds:
``name: cup; attribute: red, ceramic; (x,y,w,h): (10, 20, 30, 40)``, the attribute part only
when the object has attributes and the box printed as a Python tuple. Edge text is the
relation name, node ids are the object ids, nodes in the file's object order.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np

from ..graph import GraphFormatError, TextualGraph
from .formats import GraphFormat, register_format

#: File names the generator writes and :func:`read_gqa` looks for inside a folder. GQA ships
#: ``train_sceneGraphs.json`` / ``val_sceneGraphs.json``; GraphQA uses the train file.
SCENES_FILE = "train_sceneGraphs.json"
QUESTIONS_FILE = "questions.csv"
QUESTION_TYPES = ("0-cell", "1-cell", "2-cell")
REQUIRED_COLUMNS = ("q_id", "image_id", "question", "answer", "full_answer")
_BOX = ("x", "y", "w", "h")


@dataclass
class SceneExample:
    """One question about one scene.

    Attributes:
        q_id, image_id: ids as strings.
        question, answer, full_answer: the GraphQA texts.
        graph: the scene's :class:`TextualGraph` (shared by all questions on that image).
        type: ``"0-cell"`` | ``"1-cell"`` | ``"2-cell"`` for generated data, else ``None``.
        support: answer-bearing object ids (node ids of ``graph``); for a closed-loop
            question they are the loop's objects in loop order. Empty when unknown.
    """

    q_id: str
    image_id: str
    question: str
    answer: str
    full_answer: str
    graph: TextualGraph
    type: str | None = None
    support: list[str] = field(default_factory=list)

    def support_nodes(self) -> list[int]:
        """Node indices of :attr:`support` in :attr:`graph`."""
        pos = {o: i for i, o in enumerate(self.graph.node_ids or [])}
        return [pos[o] for o in self.support]


def _number(value: Any, image_id: str, object_id: str, name: str, file: str | None):
    # bool is an int subclass; a box of True/False is a broken file, not a coordinate
    if isinstance(value, bool) or not isinstance(value, Real):
        raise GraphFormatError(f"image {image_id}, object {object_id}: box value {value!r} is not a number",
                               file=file, record=f"image {image_id}", field=f"objects.{object_id}.{name}")
    return value


def scene_to_graph(image_id: str, scene: dict, *, file: str | None = None) -> TextualGraph:
    """One GQA scene -> :class:`TextualGraph` with GraphQA node text.

    Args:
        image_id: the scene's key in the JSON file (kept as ``graph.name``).
        scene: ``{width, height, objects: {object_id: {...}}}``.
        file: file name for error messages.

    Returns:
        ``N`` = number of objects, ``E`` = number of relations; ``node_ids`` are the object
        ids; ``meta`` holds ``image_id``, ``width``, ``height``.

    Raises:
        GraphFormatError: naming the image, object and field (missing name, non-numeric
            box, relation to an unknown object, ...).
    """
    image_id = str(image_id)
    rec = f"image {image_id}"
    if not isinstance(scene, dict):
        raise GraphFormatError(f"image {image_id}: scene is a {type(scene).__name__}, expected an object",
                               file=file, record=rec)
    objects = scene.get("objects")
    if not isinstance(objects, dict):
        raise GraphFormatError(f"image {image_id}: 'objects' missing or not a mapping of object ids",
                               file=file, record=rec, field="objects")
    ids = [str(k) for k in objects]
    pos = {o: i for i, o in enumerate(ids)}
    node_text: list[str] = []
    src: list[int] = []
    dst: list[int] = []
    rel: list[str] = []
    for oid, obj in zip(ids, objects.values()):
        where = f"objects.{oid}"
        if not isinstance(obj, dict):
            raise GraphFormatError(f"image {image_id}, object {oid}: not an object", file=file, record=rec, field=where)
        name = obj.get("name")
        if not isinstance(name, str) or not name.strip():
            raise GraphFormatError(f"image {image_id}, object {oid}: missing or empty name",
                                   file=file, record=rec, field=f"{where}.name")
        missing = [k for k in _BOX if k not in obj]
        if missing:
            raise GraphFormatError(f"image {image_id}, object {oid}: missing box value '{missing[0]}'",
                                   file=file, record=rec, field=f"{where}.{missing[0]}")
        box = tuple(_number(obj[k], image_id, oid, k, file) for k in _BOX)
        attrs = obj.get("attributes", [])
        if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs):
            raise GraphFormatError(f"image {image_id}, object {oid}: attributes must be a list of strings",
                                   file=file, record=rec, field=f"{where}.attributes")
        text = f"name: {name}"
        if attrs:
            text += "; attribute: " + ", ".join(attrs)
        node_text.append(text + "; (x,y,w,h): " + str(box))  # str(tuple): GraphQA's exact spelling
        rels = obj.get("relations", [])
        if not isinstance(rels, list):
            raise GraphFormatError(f"image {image_id}, object {oid}: relations must be a list",
                                   file=file, record=rec, field=f"{where}.relations")
        for j, r in enumerate(rels):
            f = f"{where}.relations[{j}]"
            if not isinstance(r, dict) or "object" not in r or "name" not in r:
                raise GraphFormatError(f"image {image_id}, object {oid}: relation {j} needs 'object' and 'name'",
                                       file=file, record=rec, field=f)
            target = str(r["object"])
            if target not in pos:
                raise GraphFormatError(f"image {image_id}, object {oid}: relation {j} points to unknown object "
                                       f"'{target}'", file=file, record=rec, field=f"{f}.object")
            if not isinstance(r["name"], str) or not r["name"].strip():
                raise GraphFormatError(f"image {image_id}, object {oid}: relation {j} has an empty name",
                                       file=file, record=rec, field=f"{f}.name")
            src.append(pos[oid])
            dst.append(pos[target])
            rel.append(r["name"])
    meta = {"image_id": image_id, "width": scene.get("width"), "height": scene.get("height")}
    return TextualGraph(node_text=node_text, edge_index=np.array([src, dst], dtype=np.int64).reshape(2, -1),
                        edge_text=rel, node_ids=ids, name=image_id, meta=meta)


def _resolve(scene_graphs_json: str | Path, questions_csv: str | Path | None) -> tuple[Path, Path]:
    path = Path(scene_graphs_json)
    if path.is_dir():
        folder = path
        path = folder / SCENES_FILE
        if not path.exists():
            found = sorted(folder.glob("*_sceneGraphs.json"))
            if len(found) != 1:
                raise FileNotFoundError(f"{folder}: expected {SCENES_FILE} or exactly one *_sceneGraphs.json, "
                                        f"found {[p.name for p in found]}")
            path = found[0]
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such scene-graph file")
    q = Path(questions_csv) if questions_csv is not None else path.parent / QUESTIONS_FILE
    if not q.exists():
        raise FileNotFoundError(f"{q}: no such questions file")
    return path, q


def read_scene_graphs(path: str | Path) -> dict[str, dict]:
    """The raw GQA scene dictionary (``{image_id: scene}``); errors name the file."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as e:
        raise GraphFormatError(f"not valid JSON: {e.msg}", file=path.name, line=e.lineno) from None
    if not isinstance(data, dict):
        raise GraphFormatError("expected an object {image_id: scene}", file=path.name)
    return {str(k): v for k, v in data.items()}


def read_gqa(scene_graphs_json: str | Path, questions_csv: str | Path | None = None, *,
             split: str | None = None, seed: int = 42) -> list[SceneExample]:
    """Read GQA scene graphs with GraphQA questions.

    Args:
        scene_graphs_json: the ``*_sceneGraphs.json`` file, or a folder holding it
            (``train_sceneGraphs.json``, else the only ``*_sceneGraphs.json``) and ``questions.csv``.
        questions_csv: defaults to ``questions.csv`` next to the scene file.
        split: ``None`` (all), ``"train"``, ``"val"`` or ``"test"`` (see :func:`split_by_image`).
        seed: split seed.

    Returns:
        One :class:`SceneExample` per question row, in file order; only images that some
        question uses are turned into graphs (one graph object per image).

    Raises:
        GraphFormatError: bad scene (image/object/field) or bad row (line/field).
        FileNotFoundError: a file is missing.
    """
    if split not in (None, "train", "val", "test"):
        raise ValueError(f"split must be None, 'train', 'val' or 'test', got {split!r}")
    scenes_path, q_path = _resolve(scene_graphs_json, questions_csv)
    scenes = read_scene_graphs(scenes_path)
    graphs: dict[str, TextualGraph] = {}
    out: list[SceneExample] = []
    with open(q_path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        for col in REQUIRED_COLUMNS:
            if col not in header:
                raise GraphFormatError(f"missing column '{col}' (have {header})", file=q_path.name, line=1, field=col)
        seen: set[str] = set()
        for row in reader:
            line = reader.line_num
            err = dict(file=q_path.name, line=line)
            if None in row or any(row[c] is None for c in REQUIRED_COLUMNS):
                raise GraphFormatError("wrong number of fields", **err)
            q_id, image_id = row["q_id"].strip(), row["image_id"].strip()
            for col in ("q_id", "image_id", "question", "answer"):
                if not row[col].strip():
                    raise GraphFormatError(f"empty {col}", **err, field=col)
            if q_id in seen:
                raise GraphFormatError(f"duplicate q_id '{q_id}'", **err, field="q_id")
            seen.add(q_id)
            if image_id not in scenes:
                raise GraphFormatError(f"image '{image_id}' is not in {scenes_path.name}", **err, field="image_id")
            if image_id not in graphs:
                graphs[image_id] = scene_to_graph(image_id, scenes[image_id], file=scenes_path.name)
            graph = graphs[image_id]
            qtype = (row.get("type") or "").strip() or None
            if qtype is not None and qtype not in QUESTION_TYPES:
                raise GraphFormatError(f"type '{qtype}' is not one of {QUESTION_TYPES}", **err, field="type")
            support = [s.strip() for s in (row.get("support") or "").split(";") if s.strip()]
            known = set(graph.node_ids or [])
            bad = [s for s in support if s not in known]
            if bad:
                raise GraphFormatError(f"support object '{bad[0]}' is not an object of image {image_id}",
                                       **err, field="support")
            out.append(SceneExample(q_id=q_id, image_id=image_id, question=row["question"], answer=row["answer"],
                                    full_answer=row["full_answer"], graph=graph, type=qtype, support=support))
    if split is not None:
        out = dict(zip(("train", "val", "test"), split_by_image(out, seed=seed)))[split]
    return out


def split_image_ids(image_ids, seed: int = 42) -> tuple[list[str], list[str], list[str]]:
    """60/20/20 split of the unique image ids (sorted, then a seeded permutation)."""
    uniq = sorted({str(i) for i in image_ids})
    perm = np.random.default_rng(seed).permutation(len(uniq))
    n_train, n_val = round(0.6 * len(uniq)), round(0.2 * len(uniq))
    ids = [uniq[i] for i in perm]
    return ids[:n_train], ids[n_train:n_train + n_val], ids[n_train + n_val:]


def split_by_image(examples: list[SceneExample], seed: int = 42
                   ) -> tuple[list[SceneExample], list[SceneExample], list[SceneExample]]:
    """Split questions 60/20/20 *by image*, so no scene is seen in two splits."""
    parts = split_image_ids((e.image_id for e in examples), seed=seed)
    which = {i: k for k, part in enumerate(parts) for i in part}
    out: tuple[list, list, list] = ([], [], [])
    for e in examples:
        out[which[e.image_id]].append(e)
    return out


# ------------------------------------------------------------------ the "gqa" graph format
def _scene_of(scenes: dict, record: Any, file: str) -> tuple[str, dict]:
    if not scenes:
        raise GraphFormatError("no scenes in the file", file=file)
    ids = list(scenes)
    if record is None:
        key = ids[0]
    elif str(record) in scenes:
        key = str(record)
    elif isinstance(record, int) or str(record).isdigit():
        i = int(record)
        if not 0 <= i < len(ids):
            raise GraphFormatError(f"record {i} out of range (file has {len(ids)} scenes)", file=file, record=i)
        key = ids[i]
    else:
        raise GraphFormatError(f"no scene with image id '{record}'", file=file, record=str(record), field="image_id")
    if not isinstance(scenes[key], dict):
        raise GraphFormatError(f"expected a scene object, got {type(scenes[key]).__name__}", file=file,
                               record=f"image {key}")
    return key, scenes[key]


def scene_questions(questions_csv: str | Path, image_id: str) -> list[dict[str, str]]:
    """The GraphQA question rows of one image (``q_id``, ``question``, ``answer``, ``type``, ``support``)."""
    return scene_questions_from_text(Path(questions_csv).read_text(encoding="utf-8"), Path(questions_csv).name,
                                     image_id)


def scene_questions_from_text(text: str, file: str, image_id: str) -> list[dict[str, str]]:
    """:func:`scene_questions` of a ``questions.csv`` text (an upload)."""
    import io as _stdio

    reader = csv.DictReader(_stdio.StringIO(text, newline=""))
    header = reader.fieldnames or []
    for col in REQUIRED_COLUMNS:
        if col not in header:
            raise GraphFormatError(f"missing column '{col}' (have {header})", file=file, line=1, field=col)
    rows = []
    try:
        for row in reader:
            if (row.get("image_id") or "").strip() == image_id:
                rows.append({k: (row.get(k) or "").strip() for k in ("q_id", "question", "answer", "type", "support")})
    except csv.Error as e:
        raise GraphFormatError(f"malformed CSV: {e}", file=file, line=reader.line_num) from None
    return rows


def attach_questions(graph: TextualGraph, rows: list[dict[str, str]]) -> TextualGraph:
    """Put a scene's question rows into ``graph.meta["questions"]`` (the first as its ``question``/``answer``)."""
    graph.meta["questions"] = rows
    if rows:
        graph.meta["question"], graph.meta["answer"] = rows[0]["question"], rows[0]["answer"]
    return graph


def gqa_graph(scenes: dict, file: str, record: Any = None, questions_csv: str | Path | None = None) -> TextualGraph:
    """One scene of a GQA scene dictionary as a graph; with ``questions_csv``, that image's
    questions go to ``meta["questions"]`` and the first one to ``meta["question"]``/``meta["answer"]``."""
    key, scene = _scene_of(scenes, record, file)
    g = scene_to_graph(key, scene, file=file)
    if questions_csv is not None and Path(questions_csv).is_file():
        attach_questions(g, scene_questions(questions_csv, key))
    return g


def _is_gqa(src) -> bool:
    # a scene file is an object whose first scene has "objects": decided on the head, so a big JSON
    # list (triples) is never parsed whole just to be told apart
    if not src.is_json or not src.head.lstrip().startswith("{") or '"objects"' not in src.head:
        return False
    data = src.json
    if not isinstance(data, dict) or not data:
        return False
    first = next(iter(data.values()))
    return isinstance(first, dict) and "objects" in first


def _gqa_path(path: Path) -> bool:
    if path.is_dir():
        return (path / SCENES_FILE).exists() or any(path.glob("*_sceneGraphs.json"))
    return path.name.endswith("_sceneGraphs.json")


def _load_gqa_path(path: Path, limits, options: dict) -> TextualGraph:
    scenes_path = _resolve_scenes(path)
    limits.check_bytes(scenes_path.stat().st_size, str(scenes_path))
    return gqa_graph(read_scene_graphs(scenes_path), scenes_path.name, options.get("record"),
                     scenes_path.parent / QUESTIONS_FILE)


def _resolve_scenes(path: Path) -> Path:
    if not path.is_dir():
        return path
    if (path / SCENES_FILE).exists():
        return path / SCENES_FILE
    found = sorted(path.glob("*_sceneGraphs.json"))
    if len(found) != 1:
        raise GraphFormatError(f"expected {SCENES_FILE} or exactly one *_sceneGraphs.json, found "
                               f"{[p.name for p in found]}", file=str(path))
    return found[0]


def _records(src) -> list[str]:
    return [f"{k} ({len(v.get('objects', {})) if isinstance(v, dict) else 0} objects)" for k, v in src.json.items()]


register_format(GraphFormat(
    name="gqa", label="GQA scene graphs (*_sceneGraphs.json [+ questions.csv])",
    load=lambda s, record=None: gqa_graph(s.json, s.file, record), detect=_is_gqa, extensions=("json",),
    priority=10, records=_records, load_path=_load_gqa_path, detect_path=_gqa_path,
    help="GQA scene graphs; --record picks the image (id or index); questions.csv beside it adds its questions"))
