"""Topology vs text: on this graph, do topologically similar nodes have similar texts?

The analysis behind topology-aware RAG (Wang et al.): if proximity or structural role
predicts text similarity, retrieving nodes by topology brings in relevant text.
"""
import streamlit as st

from toporag_core.studio import resources
from toporag_core.studio import state, topo_view
from toporag_core.studio.resources import encoder_choice, app_encoder

st.set_page_config(page_title="Topology vs text", layout="wide")
ss = st.session_state
graph = resources.page_graph(ss)
key = ss[state.GRAPH_KEY]
choice = encoder_choice()
n = graph.num_nodes
total = n * (n - 1) // 2

with st.sidebar:
    st.header("Node pairs")
    max_pairs = st.select_slider("Pairs at most", [1000, 2000, 5000, 10_000, 20_000, 50_000], value=20_000,
                                 key="tt_max_pairs", help="Graphs with more node pairs are sampled uniformly "
                                                          "without replacement; smaller ones use every pair.")
    seed = int(st.number_input("Seed", 0, 10_000, 0, key="tt_seed",
                               help="Seed of the pair sample and of the proximity random projection."))
    max_hops = st.slider("Hop bins", 2, 10, 6, key="tt_max_hops",
                         help="Bins 1..this; pairs further apart share the last bin.")

st.title("Topology vs text")
st.caption(f"{graph.name or 'unnamed graph'}: {n} nodes. Text similarity = cosine of the node texts' sentence "
           f"embeddings ({app_encoder(choice).name}); proximity = cosine of random-projection walk embeddings "
           "(1-3 hops); role = GraphWave structural embeddings, correlated as negative L2 distance (the role "
           "score 1/distance has the same ranks, but explodes for nodes with identical roles).")
if n < 2:
    st.info("This graph has fewer than two nodes: there are no node pairs to correlate. Load a bigger graph on Home.")
    st.stop()

try:
    results = {m: topo_view.correlation(key, choice, m, max_pairs, seed, graph) for m in ("proximity", "role")}
    curve = topo_view.hop_curve(key, choice, max_pairs, max_hops, seed, graph)
except ValueError as e:
    st.warning(f"Could not compute the correlations: {e}")
    st.stop()

used = results["proximity"]["pairs"]
if results["proximity"]["sampled"]:
    st.markdown(f"**Sampling:** {used:,} of the {total:,} node pairs, drawn uniformly without replacement "
                f"(max pairs {max_pairs:,}, seed {seed}); the same pairs for every number and chart on this page.")
else:
    st.markdown(f"**Sampling:** none: all {total:,} node pairs (fewer than max pairs {max_pairs:,}).")

cols = st.columns(4)
for i, (m, r) in enumerate(results.items()):
    cols[2 * i].metric(f"Pearson r, text vs {m}", topo_view.format_r(r["pearson_r"]))
    cols[2 * i + 1].metric(f"Spearman r, text vs {m}", topo_view.format_r(r["spearman_r"]))
st.dataframe(topo_view.correlation_frame(results), hide_index=True)
st.caption("r > 0: topologically similar pairs also have similar texts, the premise of retrieving by topology. "
           "n/a: one side is constant over the pairs (e.g. a graph without edges).")

left, right = st.columns(2)
with left:
    st.plotly_chart(topo_view.hop_curve_figure(curve), key="tt_hop_curve")
    st.dataframe(curve, hide_index=True)
with right:
    for tab, (m, r) in zip(st.tabs([f"Text vs {m}" for m in results]), results.items()):
        with tab:
            st.plotly_chart(topo_view.pair_density_figure(r), key=f"tt_density_{m}")
    st.caption("Each cell counts sampled pairs; the red line is the mean text similarity per bin of the "
               "topological similarity.")
