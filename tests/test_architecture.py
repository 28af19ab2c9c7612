"""The package's layering, read from the code's own imports (``ast``): what README's architecture
section promises.

Layers, bottom to top (a module may import its own layer and those below, never above):

    base -> io -> cells -> embeddings -> topology -> retrieval -> neural -> stores -> tasks
         -> predictions -> answering -> systems -> experiments -> app

Each layer is a set of top-level folders of ``toporag_core/``; only the base layer's two modules
(``graph``, ``metrics``) and ``cli`` are loose files.

Every ``import`` counts, at module level or inside a function (a lazy import that dodges a cycle
is still a dependency). Also checked: no import cycle between modules, the answering pipeline
does not depend on training preprocessing, and no code reaches into another object's private
attributes (``obj._name`` where ``obj`` is not ``self``/``cls``).
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "toporag_core"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("graph", "metrics")),
    ("io", ("io", "corpus")),
    ("cells", ("cells",)),
    ("embeddings", ("embed",)),
    ("topology", ("topo",)),
    ("retrieval", ("retrieval",)),
    ("neural", ("nn", "model")),
    ("stores", ("kg",)),
    ("tasks", ("tasks",)),
    ("predictions", ("predictions",)),
    ("answering", ("answering",)),
    ("systems", ("hybrid", "docgraph", "serve")),
    ("experiments", ("training", "evaluation", "datagen")),
    ("app", ("studio", "commands", "cli")),
]
RANK = {top: i for i, (_, tops) in enumerate(LAYERS) for top in tops}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str) -> bool:
    p = PKG.parent / name.replace(".", "/")
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


@functools.lru_cache(maxsize=None)
def imports_of(path: Path) -> list[tuple[str, int]]:
    """``[(imported toporag_core module, line)]`` of one file, relative imports resolved;
    ``from X import a`` counts ``X.a`` when that is a module, else ``X``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("toporag_core")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            if base.startswith("toporag_core"):
                out += [(f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base, node.lineno)
                        for a in node.names]
    return out


def top_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def package_files() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


@functools.lru_cache(maxsize=1)
def import_graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for f in package_files():
        me = module_name(f)
        g.add_node(me)
        for target, _ in imports_of(f):
            # importing a package's submodule also runs the package's __init__: count the module itself
            if target != me and not me.startswith(target + "."):
                g.add_edge(me, target)
    return g


def test_every_module_belongs_to_a_layer():
    unknown = sorted({top_of(module_name(f)) for f in package_files()} - set(RANK) - {""})
    assert not unknown, f"modules outside every layer (add them to LAYERS and README's architecture): {unknown}"


def layer_violations(edges: list[tuple[str, str, str]]) -> list[str]:
    """``(where, importer, imported)`` edges that go up the layers."""
    bad = []
    for where, me, target in edges:
        mine, theirs = RANK.get(top_of(me)), RANK.get(top_of(target))
        if mine is not None and theirs is not None and theirs > mine:
            bad.append(f"{where} imports {target} ({LAYERS[mine][0]} -> {LAYERS[theirs][0]})")
    return bad


def test_no_module_imports_a_higher_layer():
    edges = [(f"{f.relative_to(ROOT)}:{line}", module_name(f), target)
             for f in package_files() for target, line in imports_of(f)]
    assert len(edges) > 100  # the reader sees the package's imports at all
    bad = layer_violations(edges)
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_the_checks_catch_planted_violations():
    assert layer_violations([("x", "toporag_core.graph", "toporag_core.studio.lab")]) == \
        ["x imports toporag_core.studio.lab (base -> app)"]
    assert layer_violations([("x", "toporag_core.studio.lab", "toporag_core.graph")]) == []
    assert "toporag_core.cells.complex" in {t for t, _ in imports_of(PKG / "cells" / "lift.py")}
    g = nx.DiGraph([("a", "b"), ("b", "a")])
    assert list(nx.simple_cycles(g))


def test_no_import_cycles():
    cycles = list(nx.simple_cycles(import_graph()))
    assert cycles == [], f"{len(cycles)} import cycle(s): {cycles[:5]}"


def test_answering_does_not_depend_on_training_preprocessing():
    reach = nx.descendants(import_graph(), "toporag_core.answering.pipeline")
    assert not {m for m in reach if m.startswith(("toporag_core.tasks", "toporag_core.training"))}


def test_no_reaching_into_private_attributes():
    bad = []
    files = package_files() + sorted((ROOT / "pages").glob("*.py")) + [ROOT / "app.py"]
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert not bad, "private attributes used from outside their object:\n" + "\n".join(bad)


def test_the_layers_are_folders():
    """Besides ``__init__`` and ``cli``, only the base layer's modules lie loose at the top (at most 4),
    and every folder at the top is a layer's."""
    loose = sorted(p.stem for p in PKG.glob("*.py") if p.stem not in ("__init__", "cli"))
    assert len(loose) <= 4 and set(loose) <= set(LAYERS[0][1]), loose
    folders = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    assert folders <= set(RANK), sorted(folders - set(RANK))


MAX_FILE_LINES, MAX_FUNCTION_LINES = 500, 80


def test_files_and_functions_stay_small():
    """One concept per file: no library file over 500 lines, no function over 80."""
    long_files, long_functions = [], []
    for f in package_files():
        text = f.read_text(encoding="utf-8")
        if text.count("\n") > MAX_FILE_LINES:
            long_files.append(f"{f.relative_to(ROOT)} ({text.count(chr(10))} lines)")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long_functions.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not long_files and not long_functions, "\n".join(long_files + long_functions)


LAB_NOTE = re.compile(r"\b(session|round|stop) \d+\b|\b(this|last|previous|next) (session|round)\b", re.I)


def test_no_lab_notes_in_the_package():
    """Code says what it does; how the work was organised (``session 10`` timings, ``last round``) and
    measured numbers belong in ``docs/results/``."""
    bad = [f"{f.relative_to(ROOT)}:{i}" for f in package_files()
           for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if LAB_NOTE.search(line)]
    assert not bad, "\n".join(bad)
    assert LAB_NOTE.search("measured in session 10") and not LAB_NOTE.search("st.session_state")
    # the word itself appears only as the APIs' names (Streamlit's session_state, onnxruntime's sessions)
    api = re.compile(r"session_state|InferenceSession|SessionOptions|self\.session\b")
    loose = [f"{f.relative_to(ROOT)}:{i}" for f in package_files()
             for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
             if re.search("session", api.sub("", line), re.I)]
    assert not loose, "\n".join(loose)
