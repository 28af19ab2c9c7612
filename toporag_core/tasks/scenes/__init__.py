"""SceneGraphs: GQA-format scene graphs with GraphQA questions, real loader and a faithful generator.

* :func:`read_gqa` / :func:`scene_to_graph` / :func:`split_by_image`: the real format
  (``train_sceneGraphs.json`` + ``questions.csv``), also what the generator writes.
* :func:`generate_scenes` / :func:`generate_questions` / :func:`write_dataset`: synthetic scenes
  whose relations follow from the boxes, with 0-/1-/2-cell questions (``toporag data scenes``).
* :mod:`.dataset`: registers ``scene_graphs`` for ``toporag train/eval`` (importing this package
  does it), retrieval coverage of answer-bearing objects, question templates (per-type accuracy:
  :mod:`toporag_core.evaluation.scene_accuracy`).
"""
from .generate import COLOURS, MATERIALS, RELATIONS, dataset_stats, generate_scenes, write_dataset
from ...io.gqa import (QUESTION_TYPES, QUESTIONS_FILE, SCENES_FILE, SceneExample, read_gqa, read_scene_graphs,
                  scene_to_graph, split_by_image, split_image_ids)
from .questions import TEMPLATES, generate_questions, question_template
from .dataset import (SceneRawExample, load_scene_examples,  # registers the task
                      record_template, scene_retrieval_coverage, stratified_subset)

__all__ = ["COLOURS", "MATERIALS", "RELATIONS", "QUESTION_TYPES", "QUESTIONS_FILE", "SCENES_FILE", "SceneExample",
           "TEMPLATES", "dataset_stats", "generate_questions", "question_template", "generate_scenes", "read_gqa",
           "read_scene_graphs", "scene_to_graph", "split_by_image", "split_image_ids", "write_dataset",
           "SceneRawExample", "load_scene_examples", "record_template",
           "scene_retrieval_coverage", "stratified_subset"]
