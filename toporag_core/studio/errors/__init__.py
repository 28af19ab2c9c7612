"""Error-analysis support: prediction files, failure verdicts, tables, exports, live evaluation.

One file per concern; the page (``pages/5_Error_analysis.py``) uses the names re-exported here.

* loading: prediction files are read by :mod:`toporag_core.predictions` (the lenient reader:
  :func:`load_predictions` of a path or an upload's bytes keeps every good line and reports each
  bad one with its line and field; :data:`ACCEPTED_FIELDS` names the fields and their aliases;
  a file whose every line is bad is refused by :func:`require_records`, so the page keeps the
  previous file);
* :mod:`.verdicts`: retrieval or reasoning failure, and why (:func:`verdict`);
* :mod:`.display`: the question without its prompt wrapper, the nodes holding the gold answer,
  cited evidence, Markdown-escaped file text;
* :mod:`.tables`: the predictions table, filters, accuracy tables, confusion matrix, comparison;
* :mod:`.exports`: the retrieved subcomplex as a graph (and its re-lifted complex), JSON and GraphML;
* :mod:`.live`: an evaluation run from the page in stoppable chunks (the registered tasks and splits, the
  preprocessing setting, the output file).
"""
from ...predictions import (LineError, Predictions, accepted_fields, check_record, require_records)
from ...predictions import load_lenient as load_predictions
from ...predictions import parse_lenient as parse_predictions
from .display import (cells_note, citation_check, citation_note, citation_text, escape_markdown, gold_nodes,
                      gold_note, is_citation, user_question, verdict_markdown)
from .exports import matching_cells2, subcomplex_complex, subcomplex_graph, subcomplex_graphml, subcomplex_json
from .live import SPLITS, eval_output_path, prep_setting, prepare_slice, run_evaluation, task_names
from .tables import (CLOSED_SETS, COLUMNS, OTHER, accuracy_by_template, accuracy_by_type, accuracy_chart,
                     closed_label_set, compare, confusion_matrix, filter_frame, frame_csv, low_confidence_summary,
                     predicted_label, predictions_frame, shared_ids, verdict_counts)
from .verdicts import (CORRECT, NON_ENTITY, REASONING, RETRIEVAL, UNKNOWN, VERDICT_RULE, VERDICTS, gold_answers,
                       label_is_entity, verdict, verdict_summary)

ACCEPTED_FIELDS = accepted_fields()

__all__ = ["ACCEPTED_FIELDS", "CLOSED_SETS", "SPLITS", "eval_output_path", "prep_setting", "subcomplex_complex",
           "task_names", "COLUMNS", "CORRECT", "LineError", "NON_ENTITY", "OTHER", "Predictions",
           "REASONING", "RETRIEVAL", "UNKNOWN", "VERDICTS", "VERDICT_RULE", "accuracy_by_template", "accuracy_by_type",
           "accuracy_chart", "check_record", "citation_check", "citation_note", "citation_text", "closed_label_set",
           "compare", "confusion_matrix", "escape_markdown", "filter_frame", "frame_csv", "gold_answers",
           "gold_nodes", "gold_note", "is_citation", "label_is_entity", "load_predictions", "low_confidence_summary",
           "matching_cells2", "parse_predictions", "predicted_label", "predictions_frame", "prepare_slice",
           "require_records", "run_evaluation", "shared_ids", "subcomplex_graph", "subcomplex_graphml",
           "subcomplex_json", "user_question", "verdict", "verdict_counts", "verdict_markdown",
           "verdict_summary", "cells_note"]
