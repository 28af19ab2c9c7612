"""Synthetic data of the retrieval systems: generated corpora and questions with known answers.

No public benchmark of the kind each system needs can be installed here, so their evaluation data
are generated: a fact store first, then documents rendered from it, then questions whose answers and
gold spans come from the fact store and the renderer's own bookkeeping, never from a retriever.

* :mod:`.hybrid` - the hybrid text-and-table corpus (``toporag hybrid generate``): :class:`GeneratorConfig`,
  :func:`~.hybrid.generate`; its fact store :mod:`.hybrid_facts` (producers, buyers, contracts, shipments),
  renderers :mod:`.hybrid_render` (tables in five formats, prose, line labels) and the table-width sweep
  :mod:`.hybrid_width` (:func:`generate_width_corpus`).
* :mod:`.docgraph` - HotpotQA-distractor records over a fact table of fictional entities
  (``toporag docgraph generate``): :func:`~.docgraph.generate`, :func:`~.docgraph.write_dataset`.
* :mod:`.docgraph_corpus` - one large world whose articles are the corpus and whose questions are asked
  against all of it (``toporag docgraph generate-corpus``): :func:`generate_corpus`.

These are apart from the systems because only experiments, benchmarks, tests and the app's sample
data use them; what a system reads at run time stays in the system: the hybrid dataset's files
(:mod:`toporag_core.hybrid.dataset`) and the HotpotQA reader (:mod:`toporag_core.docgraph.records`).
The tasks' generators live with their tasks (:mod:`toporag_core.tasks.scenes.generate`,
:mod:`toporag_core.tasks.general.facts`), and the generated knowledge graph of any size stays in
:mod:`toporag_core.kg.generate`, below the tasks that build their KG store from it.

Nothing is re-exported here: import the module you need (``toporag_core.datagen.hybrid``), so
generating one system's data does not import the other system.
"""
