"""TopoRAG's generator: a frozen causal LM prompted by a cell-complex encoder (eqs. 21-23).

One concept per file, read in this order:

* :mod:`.config` - :class:`TopoRAGConfig` (saved as JSON next to the weights; retired options), question forms;
* :mod:`.styles` - the answer-style registry (``label`` / ``evidence`` / ``cited``);
* :mod:`.prompt` - the prompt layout in token ids, a question's phrasing and answer set (model and pipeline);
* :mod:`.qa_batch` - :class:`QABatch`, what the model eats; :mod:`.frozen_kv` - the frozen part's key/value
  cache (:func:`with_context_kv`: computed once for several passes over the same prompts);
  :mod:`.kv_cache` - :class:`FrozenKVStore`, those caches deduplicated and reused across batches (serving);
* :mod:`.graph_tokens` - :class:`CellTokens`, one graph token per retrieved cell (``graph_path="cells"``);
* :mod:`.module` - :class:`TopoRAGModel`, the ``nn.Module``: graph tokens, inputs, loss;
* :mod:`.decode` - greedy / prompt-lookup generation, label scoring;
* :mod:`.dispatch` - task decoding (which decoder answers which row); :mod:`.answer_text` - answer text;
* :mod:`.checkpoint` - save / load of the trainable weights + ``config.json``.
"""
from .answer_text import evidence_target, is_clean, is_yes_no, short_answer, split_evidence, yes_no_choices
from .qa_batch import QABatch
from .checkpoint import warm_start
from .config import (CACHEABLE_POSITIONS, GRAPH_PATHS, GRAPH_POSITIONS, MODES, QUESTION_FORMS, RETIRED_KEYS,
                     RETIRED_VALUES, TopoRAGConfig, graphqa_prompt)
from .decode import lookup_draft
from .frozen_kv import with_context_kv
from .graph_tokens import CellTokens
from .kv_cache import FrozenKVStore
from .module import IGNORE_INDEX, TopoRAGModel
from .prompt import Prompter, choices_for, question_prompt
from .styles import ANSWER_STYLES, LOOKUP_TOKENS, AnswerStyle, get_style, register_style

__all__ = ["TopoRAGConfig", "TopoRAGModel", "QABatch", "Prompter", "AnswerStyle", "ANSWER_STYLES", "get_style",
           "register_style", "QUESTION_FORMS", "graphqa_prompt", "choices_for", "question_prompt", "short_answer",
           "is_clean", "is_yes_no", "yes_no_choices", "evidence_target", "split_evidence", "lookup_draft",
           "LOOKUP_TOKENS", "IGNORE_INDEX", "MODES", "GRAPH_POSITIONS", "CACHEABLE_POSITIONS",
           "RETIRED_KEYS", "RETIRED_VALUES", "GRAPH_PATHS", "CellTokens", "warm_start", "FrozenKVStore",
           "with_context_kv"]
