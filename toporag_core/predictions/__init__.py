"""Predictions files: what ``toporag eval`` writes, one JSON object per question and line, and
every reader and writer of them.

Fields of a record (:data:`~.schema.FIELDS`, in this order):

* ``id``: the example's id; ``qtype``: its question type (``null`` when the data has none);
  ``question``: the prompt as the LLM read it;
* ``gold``: the gold answer (text, or a list of answers for WebQSP); ``answer``: the model's
  answer; ``prediction`` and ``label``: the same two again (the names the Error-analysis page
  reads first); ``probability``: the answer's score; ``raw``: the generated text before it was cut;
* ``correct``: the benchmark metric's verdict (true/false); ``clean``: whether the answer is
  free of context dumps and repeated questions; ``seconds``: the batch's wall time per example;
* ``evidence`` (evidence-first and cited checkpoints only): what the model wrote before its answer;
  ``support_covered`` (data that names the answer-bearing objects, SceneGraphs): whether retrieval
  kept all of them;
* ``cells``: the retrieved subcomplex ``{nodes, edges, cells2, counts}`` as texts; ``context``:
  the textualized subcomplex; ``method``: the retrieval method; ``dataset``: the task's name;
* ``graph_tokens``: the ablation arm; ``margin``: the answer's probability lead over the runner-up
  (label sets, candidate names; ``null`` for a generated answer); ``answer_kind``: ``label`` /
  ``names`` / ``generated`` (what ``benchmarks/bench_confidence.py`` calibrates per; ``null`` in
  files written before it existed); ``confidence``: the number that threshold judges (``probability``,
  except the name reader's probability of its chosen name and the per-token probability of a cited
  answer's evidence and answer; absent in older files); ``unsupported_claims`` (a label answer after
  evidence: its claims the context does not hold) and ``low_confidence`` (the answer flagged under the
  checkpoint's calibration, as Ask flags it), when known.

Readers and writers:

* :mod:`.strict` (``toporag eval --resume``, ``toporag eval merge``, ``toporag compare``):
  :func:`iter_records` / :func:`read_records` / :func:`read_predictions`; a bad line is a
  ``ValueError`` naming the file, line and field.
* :mod:`.lenient` (a user's upload): :func:`parse_lenient` / :func:`load_lenient` accept the
  aliases of :data:`ALIASES` (``answer`` / ``pred`` for the prediction, ``gold`` / ``answers`` /
  ``target`` for the label), score a record without ``correct``, and skip a bad line with one
  message naming the line and the field (:class:`Predictions`, :class:`LineError`).
* :mod:`.files`: :func:`write_predictions` (atomic) and :func:`merge` (evaluation shards -> one
  file; ``toporag eval merge SHARDS... --out FILE``).
"""
from .files import merge, write_predictions
from .lenient import (LineError, Predictions, check_record, load_lenient, parse_lenient, require_records,
                      score)
from .schema import ALIASES, FIELDS, REQUIRED, accepted_fields, eval_record, field_names, record_line
from .strict import iter_records, read_ids, read_predictions, read_records

__all__ = ["ALIASES", "FIELDS", "REQUIRED", "LineError", "Predictions", "accepted_fields", "check_record",
           "eval_record", "field_names", "iter_records", "load_lenient", "merge", "parse_lenient", "read_ids",
           "read_predictions", "read_records", "record_line", "require_records", "score", "write_predictions"]
