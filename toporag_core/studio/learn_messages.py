"""Teaching data for the Learn tab "Messages and graph tokens": the checkpoint's own CW encoder run on one
retrieved subcomplex, with every number read from that run.

:func:`trace_encoder` builds the batch exactly as answering does (``collate([subcomplex_tensors(sub, emb)])``,
:meth:`~toporag_core.answering.pipeline.TopoRAGPipeline.decode`), runs ``model.graph_tokens`` on it under the
pipeline's lock, and records with forward hooks (removed afterwards) what each
:class:`~toporag_core.nn.cwn.RankUpdate` of each :class:`~toporag_core.nn.cwn.CellularLayer` received: the
cell states ``h`` and the summed messages of each kind, and what it returned. Which kinds a rank hears in a
layer is read from the layer itself (``layer.ranks[r].kinds``); which cells send them is the batch's relation
for that kind, as ``CellularLayer.forward`` reads it:

=====================  ===========================  ==========================================
receiver, kind          relation of the batch        sender -> receiver
=====================  ===========================  ==========================================
0-cell, coboundary      ``node_edge``                its 1-cells -> the node
0-cell, up              ``node_up``                  a neighbour node, via the shared 1-cell
1-cell, boundary        ``node_edge``                its two nodes -> the 1-cell
1-cell, coboundary      ``edge_cell``                the 2-cells it bounds -> the 1-cell
1-cell, up              ``edge_up``                  a 1-cell on a shared 2-cell, via that 2-cell
2-cell, boundary        ``edge_cell``                its boundary 1-cells -> the 2-cell
=====================  ===========================  ==========================================

Graph tokens: for the cell path (:class:`~toporag_core.model.graph_tokens.CellTokens`) the slots come from
``projector.slots`` (slot 0: the whole subcomplex; slots ``1..T-1``: one cell each, in text order; ``k``
tokens per slot), the token norms from the projector's output; the pooled path has one mean vector spread
over ``T`` tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

RANK_NAMES = ("0-cell", "1-cell", "2-cell")
KIND_COLOURS = {"boundary": "#4e79a7", "coboundary": "#f28e2b", "up": "#59a14f"}
KIND_WORDS = {"boundary": "boundary (from a face: a 1-cell hears its nodes, a 2-cell its 1-cells)",
              "coboundary": "coboundary (from a coface: a node hears its 1-cells, a 1-cell its 2-cells)",
              "up": "upper adjacency (from a neighbour of the same rank, through the coface they share)"}


@dataclass
class LayerTrace:
    """One encoder layer as it ran: ``stage`` (1 or 2), ``kinds`` per receiving rank, and per rank the
    ``(K,)`` norms of the input state, of each kind's summed messages, and of the output state."""

    index: int
    stage: int
    kinds: dict[int, tuple[str, ...]]
    norm_in: dict[int, np.ndarray] = field(default_factory=dict)
    norm_msg: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    norm_out: dict[int, np.ndarray] = field(default_factory=dict)


@dataclass
class EncoderTrace:
    """What the checkpoint's encoder did with one subcomplex (local ids: sorted global ids per rank)."""

    cells: tuple[np.ndarray, np.ndarray, np.ndarray]   # global ids of the subcomplex's cells per rank
    texts: tuple[list[str], list[str], list[str]]
    relations: dict[str, np.ndarray]                   # the batch's node_edge, edge_cell, node_up, edge_up
    embed_norms: dict[int, np.ndarray]                 # after the input projection, per rank
    layers: list[LayerTrace]
    final_norms: dict[int, np.ndarray]
    token_norms: np.ndarray                            # (T k,) norm of every graph token
    slots: pd.DataFrame                                # slot table (see slot_table)
    graph_path: str
    num_tokens: int
    per_cell: int
    use_cells2: bool


def setting_text(setting) -> str:
    """A retrieval setting in words: ``method k0 = 3, k1 = 3, ..., c2 = 0.5`` (numeric parameters only)."""
    shown = ", ".join(f"{n} = {v:g}" for n, v in setting.params.items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool))
    return f"{setting.method}: {shown}" if shown else str(setting.method)


def _norms(t) -> np.ndarray:
    return t.detach().float().norm(dim=-1).cpu().numpy() if t is not None else np.zeros(0)


def retrieve_for_trace(ecx, question: str, setting):
    """The subcomplex ``setting`` (the checkpoint's training setting) retrieves from ``ecx`` for ``question``:
    what :func:`trace_encoder` then runs the encoder on."""
    from ..retrieval import retrieve

    return retrieve(ecx, question, setting=setting)


def trace_encoder(pipe, ecx, sub) -> EncoderTrace:
    """Run ``pipe``'s encoder and graph-token projector on ``sub`` (embedded in ``ecx``), recording every layer."""
    import torch

    from ..nn import collate, subcomplex_tensors
    from ..retrieval import cycle_text
    from .learn import edge_label

    model = pipe.model
    if not model.config.use_graph or model.encoder is None:
        raise ValueError("this model has no cell-complex encoder (the frozen LLM alone): pick a checkpoint")
    enc = model.encoder
    if not hasattr(enc, "layers") or not hasattr(enc.layers[0], "ranks"):
        raise ValueError(f"the checkpoint's encoder is {model.config.encoder!r}, not the CW network")
    cells = collate([subcomplex_tensors(sub, ecx.emb, use_cells2=pipe.use_cells2)])
    layers = [LayerTrace(i, int(layer.stage), {int(r): tuple(m.kinds) for r, m in layer.ranks.items()})
              for i, layer in enumerate(enc.layers)]
    embed_norms: dict[int, np.ndarray] = {}
    hooks = []

    def on_rank(li: int, r: int):
        def hook(module, args, out):
            h, messages = args
            layers[li].norm_in[r] = _norms(h)
            layers[li].norm_msg[r] = {k: _norms(v) for k, v in messages.items()}
            layers[li].norm_out[r] = _norms(out)
        return hook

    def on_embed(r: int):
        def hook(module, args, out):
            embed_norms[r] = _norms(out)
        return hook

    for i, layer in enumerate(enc.layers):
        for r, m in layer.ranks.items():
            hooks.append(m.register_forward_hook(on_rank(i, int(r))))
    for r, m in enumerate(enc.embed):
        hooks.append(m.register_forward_hook(on_embed(r)))
    try:
        with pipe.lock, torch.no_grad():
            batch = cells.to(model.device)
            tokens = model.graph_tokens(batch)
    finally:
        for hk in hooks:
            hk.remove()
    cx = sub.complex
    ids = (np.unique(np.asarray(sub.nodes, np.int64)), np.unique(np.asarray(sub.edges, np.int64)),
           np.unique(np.asarray(sub.cells2, np.int64)) if pipe.use_cells2 else np.zeros(0, np.int64))
    texts = ([cx.graph.node_text[i] for i in ids[0].tolist()], [edge_label(cx, e) for e in ids[1].tolist()],
             [cycle_text(cx, f) for f in ids[2].tolist()])
    last = layers[-1] if layers else None
    final = {r: last.norm_out.get(r, embed_norms.get(r, np.zeros(0))) for r in range(3)} if last else embed_norms
    rel = {k: getattr(cells, k).cpu().numpy() for k in ("node_edge", "edge_cell", "node_up", "edge_up")}
    proj = model.projector
    path = str(model.config.graph_path)
    per_cell = int(getattr(proj, "per_cell", 1)) if path == "cells" else 1
    num_tokens = int(model.config.num_graph_tokens)
    if path == "cells":
        owner, slot, rank, local = (t.cpu().numpy() for t in proj.slots(cells, with_cells2=pipe.use_cells2))
    else:
        slot = rank = local = np.zeros(0, np.int64)
    trace = EncoderTrace(ids, texts, rel, embed_norms, layers, final, _norms(tokens[0]), pd.DataFrame(), path,
                         num_tokens, per_cell, bool(pipe.use_cells2))
    trace.slots = slot_table(trace, slot, rank, local)
    return trace


def slot_table(trace: EncoderTrace, slot: np.ndarray, rank: np.ndarray, local: np.ndarray) -> pd.DataFrame:
    """One row per slot: what fills it (the whole subcomplex, a cell, or the learned empty token), its token
    positions in the soft prompt and their norms."""
    t, k = trace.num_tokens, trace.per_cell
    rows = []
    if trace.graph_path != "cells":
        for s in range(t):
            rows.append({"slot": s, "filled by": "the mean of every cell's final state (pooled path)",
                         "rank": "", "cell": "", "tokens": str(s), "token norms": f"{trace.token_norms[s]:.2f}"})
        return pd.DataFrame(rows)
    by_slot = {int(s): (int(r), int(i)) for s, r, i in zip(slot.tolist(), rank.tolist(), local.tolist())}
    for s in range(t):
        pos = list(range(s * k, s * k + k))
        norms = ", ".join(f"{trace.token_norms[p]:.2f}" for p in pos)
        if s == 0:
            what, rk, cell = "the whole subcomplex (mean of every cell's z)", "", ""
        elif s in by_slot:
            r, i = by_slot[s]
            what, rk, cell = trace.texts[r][i], RANK_NAMES[r], f"{'vec'[r]}{int(trace.cells[r][i])}"
        else:
            what, rk, cell = "empty (a learned token: the subcomplex has fewer cells than slots)", "", ""
        rows.append({"slot": s, "filled by": what, "rank": rk, "cell": cell,
                     "tokens": f"{pos[0]}..{pos[-1]}" if k > 1 else str(pos[0]), "token norms": norms})
    return pd.DataFrame(rows)


def messages(trace: EncoderTrace, layer: LayerTrace) -> pd.DataFrame:
    """Every message of ``layer``: ``kind, sender rank, sender, receiver rank, receiver, via`` (local ids; ``via``:
    the shared coface of an upper-adjacency message, else -1)."""
    rel = trace.relations
    node, edge = rel["node_edge"]
    e_of, c_of = rel["edge_cell"]
    parts = []

    def add(kind, sr, s, rr, r, via=None):
        s, r = np.asarray(s, np.int64), np.asarray(r, np.int64)
        parts.append(pd.DataFrame({"kind": kind, "sender rank": sr, "sender": s, "receiver rank": rr, "receiver": r,
                                   "via": np.full(s.size, -1) if via is None else np.asarray(via, np.int64)}))

    for r, kinds in layer.kinds.items():
        for kind in kinds:
            if (r, kind) == (0, "coboundary"):
                add(kind, 1, edge, 0, node)
            elif (r, kind) == (0, "up"):
                recv, nb, shared = rel["node_up"]
                add(kind, 0, nb, 0, recv, shared)
            elif (r, kind) == (1, "boundary"):
                add(kind, 0, node, 1, edge)
            elif (r, kind) == (1, "coboundary"):
                add(kind, 2, c_of, 1, e_of)
            elif (r, kind) == (1, "up"):
                recv, nb, shared = rel["edge_up"]
                add(kind, 1, nb, 1, recv, shared)
            elif (r, kind) == (2, "boundary"):
                add(kind, 1, e_of, 2, c_of)
    cols = ["kind", "sender rank", "sender", "receiver rank", "receiver", "via"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def message_counts(trace: EncoderTrace) -> pd.DataFrame:
    """Messages per layer, receiving rank and kind."""
    rows = []
    for layer in trace.layers:
        m = messages(trace, layer)
        for (rr, kind), n in m.groupby(["receiver rank", "kind"]).size().items():
            rows.append({"layer": layer.index + 1, "stage": layer.stage, "receiver": RANK_NAMES[int(rr)] + "s",
                         "kind": kind, "messages": int(n)})
    return pd.DataFrame(rows, columns=["layer", "stage", "receiver", "kind", "messages"])


def step_table(trace: EncoderTrace, layer: LayerTrace) -> pd.DataFrame:
    """One row per cell: the norm of its state before ``layer``, of each kind of summed message it received,
    and of its state after (real numbers of the run)."""
    rows = []
    for r in sorted(layer.norm_in):
        for i in range(layer.norm_in[r].size):
            row = {"cell": f"{'vec'[r]}{int(trace.cells[r][i])}", "rank": RANK_NAMES[r],
                   "text": trace.texts[r][i] if i < len(trace.texts[r]) else "", "|h| before": layer.norm_in[r][i]}
            for kind in ("boundary", "coboundary", "up"):
                msg = layer.norm_msg[r].get(kind)
                row[f"|{kind} msgs|"] = float(msg[i]) if msg is not None else np.nan
            row["|h| after"] = layer.norm_out[r][i]
            rows.append(row)
    out = pd.DataFrame(rows)
    num = out.select_dtypes("number").columns
    out[num] = out[num].round(3)
    return out


def positions(trace: EncoderTrace, cx) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(xy0, xy1, xy2)``: a seeded spring layout of the subcomplex's nodes; 1-cells at their midpoints,
    2-cells at their boundary's centroid."""
    from .graph_view import spring_layout

    nodes, edges, cells2 = trace.cells
    local = np.full(cx.num_nodes, -1, dtype=np.int64)
    local[nodes] = np.arange(nodes.size)
    ends = local[cx.edges[edges]].reshape(-1, 2)
    xy0 = spring_layout(nodes.size, ends)
    xy1 = xy0[ends].mean(1) if edges.size else np.zeros((0, 2))
    xy2 = np.array([xy0[local[cx.cell2_nodes(int(f))]].mean(0) for f in cells2]).reshape(-1, 2)
    return xy0, xy1, xy2


def message_figure(trace: EncoderTrace, layer: LayerTrace, cx, receiver: str | None = None):
    """Plotly figure of ``layer``'s messages: cells as markers (0-cells circles, 1-cells squares at their
    midpoints, 2-cells diamonds at their centroids), one arrow per message coloured by kind; ``receiver``
    (e.g. ``"e3"``): only the messages that cell receives."""
    import plotly.graph_objects as go

    xy = positions(trace, cx)
    msgs = messages(trace, layer)
    if receiver:
        rank = "vec".index(receiver[0])
        gid = int(receiver[1:])
        loc = np.flatnonzero(trace.cells[rank] == gid)
        msgs = msgs[(msgs["receiver rank"] == rank) & (msgs["receiver"] == (int(loc[0]) if loc.size else -1))]
    fig = go.Figure()
    span = float(np.ptp(xy[0], axis=0).max()) if len(xy[0]) > 1 else 1.0
    shift = {"boundary": 0.012 * span, "coboundary": -0.012 * span, "up": 0.03 * span}  # kinds side by side
    for kind, colour in KIND_COLOURS.items():
        part = msgs[msgs["kind"] == kind]
        if part.empty:
            continue
        xs, ys = [], []
        for sr, s, rr, r in part[["sender rank", "sender", "receiver rank", "receiver"]].itertuples(index=False):
            a, b = xy[sr][s], xy[rr][r]
            d = b - a
            normal = np.array([-d[1], d[0]]) / (np.hypot(*d) or 1.0) * shift[kind]
            start, end = a + 0.1 * d + normal, a + 0.86 * d + normal  # clear of both markers
            xs += [start[0], end[0], None]
            ys += [start[1], end[1], None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=f"{kind} ({len(part)})",
                                 line=dict(color=colour, width=2.5 if kind != "up" else 1.5,
                                           dash="dot" if kind == "up" else "solid"),
                                 marker=dict(symbol="arrow", angleref="previous", size=[0, 12, 0] * len(part),
                                             color=colour), hoverinfo="skip"))
    symbols = ("circle", "square", "diamond")
    for r in range(3):
        if not trace.cells[r].size:
            continue
        labels = [f"{'vec'[r]}{int(g)}" for g in trace.cells[r]]
        fig.add_trace(go.Scatter(x=xy[r][:, 0], y=xy[r][:, 1], mode="markers+text", name=RANK_NAMES[r] + "s",
                                 text=labels, textposition="top center", hovertext=trace.texts[r],
                                 marker=dict(symbol=symbols[r], size=(16, 12, 14)[r],
                                             color=("#9ecae9", "#c7c7c7", "#b3de69")[r],
                                             line=dict(width=1, color="#333333"))))
    fig.update_layout(height=640, margin=dict(l=10, r=10, t=40, b=10),
                      title=f"Layer {layer.index + 1} (stage {layer.stage}): who sends to whom",
                      legend=dict(orientation="h", y=-0.02), xaxis=dict(visible=False), yaxis=dict(visible=False))
    return fig
