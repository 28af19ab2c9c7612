"""Task decoding and the cacheable before_question layout on the tiny Llama: label scoring against models
built so the answer is known, the generation stop rule, clean-answer checks, and the frozen
key/value cache (precomputed == recomputed, LoRA never touches it)."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from torch import nn

from toporag_core.retrieval import RetrievalSetting
from toporag_core.tasks.prep import PrepConfig, prepare_example
from toporag_core.model import QABatch, TopoRAGModel, is_clean, short_answer
from toporag_core.model.tiny import tiny_model
from toporag_core.tasks.batching import make_batch
from toporag_core.training import DiskKVShards, TrainConfig, train

from .test_train_eval import DIM, ENC, raw_examples


@pytest.fixture(scope="module")
def examples():
    return [prepare_example(r, ENC, PrepConfig(RetrievalSetting.make(k0=2, k1=2, k2=1))) for r in raw_examples()]


def unigram_model(probs: dict[str, float], eos_p: float, **kw) -> TopoRAGModel:
    """A model whose next-token distribution is fixed: zero hidden weights in the head, a bias
    giving ``probs`` (single-character tokens) and ``eos_p`` to EOS, the rest spread evenly."""
    m = tiny_model(in_dim=DIM, use_graph=False, **kw)
    vocab, hidden = m.llm.get_output_embeddings().weight.shape
    p = torch.full((vocab,), 0.0)
    ids = {ch: m.tokenizer(ch, add_special_tokens=False)["input_ids"] for ch in probs}
    assert all(len(v) == 1 for v in ids.values())
    for ch, pr in probs.items():
        p[ids[ch][0]] = pr
    p[m.tokenizer.eos_token_id] = eos_p
    rest = 1.0 - float(p.sum())
    free = p == 0
    p[free] = rest / int(free.sum())
    head = nn.Linear(hidden, vocab, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(p.log())
    m.llm.lm_head = head
    return m


@pytest.mark.parametrize("position", ["prefix", "before_question"])
def test_label_scoring_picks_the_higher_likelihood_label(position):
    # p(a) = 0.5, p(b) = 0.2 at every position: "aa" scores log .25 + log p(eos) > "b" (log .2 + log p(eos)),
    # and its probability among {aa, b} is .25 / (.25 + .2): a longer answer wins when it is likelier.
    m = unigram_model({"a": 0.5, "b": 0.2}, eos_p=0.1, graph_position=position).eval()
    batch = QABatch(None, ["which?", "and which here?"], ["ctx one", ""])
    out = m.answer(batch, choices=["b", "aa"])
    for row in out:
        assert row["answer"] == "aa" and row["clean"]
        assert row["probability"] == pytest.approx(0.25 / 0.45, abs=1e-5)
        assert row["scores"]["aa"] == pytest.approx(math.log(0.25 * 0.1), abs=1e-4)
        assert row["scores"]["b"] == pytest.approx(math.log(0.2 * 0.1), abs=1e-4)
    # the config's answer set is the default candidate list
    m.config.answer_set = ("b", "aa")
    assert [r["answer"] for r in m.answer(batch)] == ["aa", "aa"]


@pytest.mark.parametrize("position,question_first", [("prefix", False), ("before_question", False),
                                                     ("before_question", True)])
@pytest.mark.parametrize("mode", ["soft_prompt", "lora"])
def test_choice_scores_equal_teacher_forced_loss(examples, position, question_first, mode):
    """score(c) == -(answer loss x answer tokens) of the training forward with answer c, row by row,
    in a batch whose rows need padding: scoring measures what training fits."""
    m = tiny_model(in_dim=DIM, graph_position=position, mode=mode, tokens=2, seed=2, question_first=question_first)
    with torch.no_grad():
        for p in m.parameters():
            if p.requires_grad:
                p.add_(0.1 * torch.randn_like(p))
    m.eval()
    choices = ["support", "counter", "no"]
    scores = m.score_choices(make_batch(examples, with_answers=False), choices)
    for i, ex in enumerate(examples):
        for j, c in enumerate(choices):
            b = make_batch([ex])
            b.answers = [c]
            n_tok = len(m.tokenizer(c, add_special_tokens=False)["input_ids"]) + 1
            with torch.no_grad():
                ref = -float(m(b)) * n_tok
            assert scores[i, j].item() == pytest.approx(ref, abs=1e-3), (i, c)


def bigram_model(chain: dict[str, str], **kw) -> TopoRAGModel:
    """A model that answers by a bigram table: attention and MLP outputs are zeroed, so the last
    hidden state is the normalised embedding of the current token, and the head maps it to its successor."""
    m = tiny_model(in_dim=DIM, use_graph=False, **kw)
    llm, tok = m.llm, m.tokenizer
    with torch.no_grad():
        for layer in llm.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = llm.get_input_embeddings().weight
        h = llm.model.norm(emb)  # hidden state for each input token
        head = llm.get_output_embeddings().weight
        head.zero_()
        for src, dst in chain.items():
            s = tok(src, add_special_tokens=False)["input_ids"][0] if src != "<eos>" else tok.eos_token_id
            d = tok(dst, add_special_tokens=False)["input_ids"][0] if dst != "<eos>" else tok.eos_token_id
            head[d] += 20 * h[s] / h[s].norm()
    return m


def test_generation_stops_at_end_of_line():
    # The prompt ends with "]" ("[/INST]"): "]" -> "\n" -> "a" -> "b" -> "\n" -> "c" -> "d" -> ...
    chain = {"]": "\n", "\n": "a", "a": "b", "b": "\n", "c": "d", "d": "c"}
    m = bigram_model(chain, chat=False, max_new_tokens=8).eval()
    batch = QABatch(None, ["q"], ["context"])
    # leading newline skipped, the answer ends at the newline after "ab"
    assert m.generate(batch) == ["ab"]
    raw = m.generate(batch, stop_at_newline=False)[0]
    assert raw.startswith("ab\na")  # without the rule it runs on ("\n" -> "a" again)
    out = m.answer(batch)[0]
    assert out["answer"] == "ab" and out["clean"] and out["kind"] == "generated"
    # the generated answer's probability: the per-token geometric mean of "ab" + end under the same prompt
    ll = float(m.score_choices(batch, [["ab"]], truncate=False)[0, 0])
    assert out["probability"] == pytest.approx(math.exp(ll / 3), rel=1e-5) and 0 < out["probability"] <= 1


def test_short_answer_and_clean_check():
    assert short_answer('The answer is: "red".\nMore text') == "red"
    assert short_answer("Answer: two cups") == "two cups"
    assert short_answer("Tony Warren, Tony Warren, tony warren,") == "Tony Warren"  # a looping list, once each
    assert short_answer("Pat Nixon, Richard Nixon, Pat Nixon") == "Pat Nixon, Richard Nixon"
    assert short_answer("1,000,000") == "1,000,000" and short_answer("Paris, France") == "Paris, France"
    q = "What color is the cup to the left of the plate?"
    ctx = "node_id,node_attr\n0,name: cup; attribute: red\n\nsrc,edge_attr,dst\n1,to the left of,2"
    assert is_clean("red", q, ctx) and is_clean("support", "", "")
    for dump in ("c0: name: cup; attribute: red, ceramic; (x,y,w,h): 1,2,3,4", "1,to the left of,2",
                 short_answer('The answer is: "c1"'), "node_id,node_attr 0,cup", ""):
        assert not is_clean(dump, q, ctx), dump
    assert not is_clean("What color is the cup to the left of the plate", q, ctx)  # the question again
    assert not is_clean("the cup to the left of", q, ctx)
    assert not is_clean(" ".join(["word"] * 20), q, ctx)  # not a short phrase


@pytest.mark.parametrize("question_first", [False, True])
def test_frozen_cache_precomputed_equals_inline_and_lora_leaves_it_alone(examples, tmp_path, question_first):
    m = tiny_model(in_dim=DIM, graph_position="before_question", mode="lora", tokens=2, seed=4,
                   question_first=question_first)
    store = DiskKVShards(tmp_path / "kv").build(m, examples, batch_size=4, shard_size=4, show_progress=False)
    assert len(store) == len(examples)
    batch = make_batch(examples)
    cached = make_batch(examples, kv=store)
    with torch.no_grad():
        assert float(m(cached)) == pytest.approx(float(m(batch)), abs=1e-3)  # float16 storage
        before = m.context_kv(batch)
        for n, p in m.named_parameters():
            if "lora_" in n:
                p.add_(torch.randn_like(p))
        after = m.context_kv(batch)
        assert all(torch.equal(a, b) for a, b in zip(before, after))  # adapters are off in the frozen part
    loss = m(cached)
    loss.backward()
    lora = [p for n, p in m.named_parameters() if "lora_" in n and p.requires_grad]
    assert lora and any(p.grad is not None and p.grad.abs().sum() > 0 for p in lora)
    assert all(p.grad is not None for p in m.encoder.parameters() if p.requires_grad)


def test_before_question_caches_only_the_context_and_reads_the_question_after_the_graph(examples):
    """The "before_question" frozen part is the chat prefix, the context and its separator: its cache has
    exactly those positions, and the question is read in the trained tail, after the graph tokens, so
    LoRA changes the answer's score through the question's positions while the cache stays. The prefix
    layout has no frozen part."""
    bq = tiny_model(in_dim=DIM, graph_position="before_question", mode="lora", tokens=2, seed=4)
    batch = make_batch(examples, with_answers=False)
    lay = bq.prompt_layout_ids()
    for e, kv in zip(examples, bq.context_kv(batch)):
        frozen = bq.frozen_ids(e.context, e.question)
        assert frozen == lay["pre"] + bq.context_ids(e.context, e.question)[0] + lay["sep"]
        assert kv.shape[3] == len(frozen)
    with torch.no_grad():
        before = bq.score_choices(batch, ["support", "counter"])
        for n, p in bq.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
        assert not torch.allclose(before, bq.score_choices(batch, ["support", "counter"]), atol=1e-3)
    with pytest.raises(ValueError, match="has no frozen part"):
        tiny_model(in_dim=DIM, graph_position="prefix").frozen_ids("c", "q")


def test_kv_store_key_changes_with_the_frozen_part():
    from toporag_core.training import kv_store_key

    keys = {qf: kv_store_key(tiny_model(in_dim=DIM, graph_position="before_question", tokens=2, question_first=qf),
                             "data") for qf in (False, True)}
    assert keys[False] != keys[True]  # different frozen parts never share a cache
    same = tiny_model(in_dim=DIM, graph_position="before_question", tokens=2, seed=3)  # other weights only
    assert kv_store_key(same, "data") == keys[False]
    # more graph tokens leave less of the input budget to the context, which is then cut elsewhere
    assert kv_store_key(tiny_model(in_dim=DIM, graph_position="before_question", tokens=4), "data") != keys[False]
    assert kv_store_key(tiny_model(in_dim=DIM, graph_position="before_question", use_graph=False), "data") != keys[False]
    assert kv_store_key(tiny_model(in_dim=DIM, graph_position="before_question", tokens=2), "other") != keys[False]


@pytest.mark.training
def test_cached_training_with_kv_store_learns_through_the_graph(examples, tmp_path):
    """Same text for every example, labels alternate: only the graph tokens in the tail can tell
    them apart; accuracy-based selection with label scoring reaches all right on the training set."""
    import dataclasses

    same = [dataclasses.replace(e, question="Q?", context="") for e in examples[:4]]
    m = tiny_model(in_dim=DIM, graph_position="before_question", tokens=4, answer_set=("support", "counter"))
    store = DiskKVShards(tmp_path / "kv")
    cfg = TrainConfig(lr=1e-2, weight_decay=0.0, batch_size=2, epochs=40, patience=100, grad_clip=0.0,
                      select="accuracy", show_progress=False, bucket=2, lr_schedule="cosine", warmup_steps=2)
    summary = train(m, same, same, cfg, tmp_path / "run", kv=store)
    assert summary["best_val_accuracy"] == 1.0
    loaded = TopoRAGModel.load(tmp_path / "run" / "best", llm=tiny_model(in_dim=DIM).llm, tokenizer=m.tokenizer)
    assert loaded.config.answer_set == ("support", "counter")
    preds = [r["answer"] for r in loaded.answer(make_batch(same, with_answers=False))]
    assert preds == [e.answer for e in same]


def test_evaluate_writes_task_answers_and_counts_unclean(tmp_path, examples):
    import json

    from toporag_core.evaluation.evaluate import evaluate

    closed = tiny_model(in_dim=DIM, tokens=2, answer_set=("support", "counter")).eval()
    res = evaluate(closed, examples, "expla_graphs", out=tmp_path / "c.jsonl", batch_size=4, show_progress=False)
    recs = [json.loads(x) for x in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert {"id", "qtype", "question", "gold", "answer", "correct", "clean", "seconds", "probability"} <= set(recs[0])
    assert all(r["answer"] in ("support", "counter") and 0.5 <= r["probability"] <= 1 for r in recs)
    assert res["unclean"] == 0 and res["graph_token_rel_std"] > 0
    open_ = tiny_model(in_dim=DIM, tokens=2).eval()  # random tiny LM: gibberish, mostly unclean
    res = evaluate(open_, examples, "expla_graphs", out=tmp_path / "o.jsonl", batch_size=4, show_progress=False)
    recs = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert res["unclean"] == sum(not r["clean"] for r in recs)
    assert all("\n" not in r["answer"] and r["answer_kind"] == "generated" and r["margin"] is None for r in recs)
    assert all((0 < r["probability"] <= 1) if r["answer"].strip() else r["probability"] is None for r in recs)


def test_yes_no_questions_are_closed_others_open():
    from toporag_core.model import yes_no_choices

    assert yes_no_choices("Is the cup red?") == ("yes", "no")
    assert yes_no_choices("cup -> plate -> cup: are the cup and the plate the same colour?") == ("yes", "no")
    assert yes_no_choices("Question: Is there a dog left of the sofa?\nAnswer:") == ("yes", "no")
    for q in ("What colour is the cup?", "Is the cup red or blue?", "cup -> plate: what is the cup made of?",
              "Do argument 1 and argument 2 support or counter each other?"):
        assert yes_no_choices(q) is None, q


def test_eval_scores_yes_no_for_polar_questions_like_the_pipeline(examples, tmp_path):
    """An open-answer model (no answer_set, as the scene checkpoint): ``toporag eval`` scores yes/no
    on polar questions (an answer with a probability, never free text) and generates for the rest -
    the rule the pipeline and the app use (``choices_for``)."""
    from toporag_core.evaluation.evaluate import evaluate
    from toporag_core.model import choices_for

    polar = "Question: Is the cup red?\nAnswer:"
    rows = [dataclasses.replace(e, question=polar if i % 2 == 0 else "What colour is the cup?")
            for i, e in enumerate(examples[:4])]
    m = tiny_model(in_dim=DIM, tokens=2).eval()
    assert choices_for(m.config, polar) == ("yes", "no") and choices_for(m.config, "What colour is the cup?") is None
    evaluate(m, rows, "scene_graphs", out=tmp_path / "p.jsonl", batch_size=4, show_progress=False)
    recs = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    for r in recs:
        if r["question"] == polar:
            assert r["answer"] in ("yes", "no") and 0.5 <= r["probability"] <= 1 and r["answer_kind"] == "label"
        else:
            assert r["answer_kind"] == "generated" and (r["probability"] is None) == (not r["answer"].strip())
    closed = tiny_model(in_dim=DIM, tokens=2, answer_set=("support", "counter")).eval()
    assert choices_for(closed.config, polar) == ("support", "counter")  # a checkpoint's own label set wins


def test_a_kv_cache_of_another_length_is_refused(examples, tmp_path):
    """A cached frozen part that does not match the current prompt (other layout / budget) raises
    instead of silently conditioning the tail on the wrong text."""
    m = tiny_model(in_dim=DIM, graph_position="before_question", tokens=2, answer_set=("support", "counter"))
    store = DiskKVShards(tmp_path / "kv").build(m, examples[:2], show_progress=False)
    assert float(m(make_batch(examples[:2], kv=store))) > 0  # the matching cache is used
    short = [t[:, :, :, 1:] for t in store.get([e.id for e in examples[:2]])]  # one position too few
    batch = make_batch(examples[:2])
    batch.kv = short
    with pytest.raises(ValueError, match="rebuild the KV cache"):
        m(batch)


def test_encoder_lr_moves_the_graph_encoder_at_its_own_rate(examples, tmp_path):
    """``encoder_lr`` puts the encoder in its own AdamW group on the same schedule:
    one step at encoder_lr 1e-9 leaves the encoder where it was while the projector and adapters move
    at lr (AdamW's first step is ~lr per parameter whatever the gradient)."""
    from toporag_core.training import param_groups

    m = tiny_model(in_dim=DIM, graph_position="before_question", tokens=2, mode="lora",
                   answer_set=("support", "counter"))
    cfg = TrainConfig(lr=1e-2, encoder_lr=1e-9, weight_decay=0.0, batch_size=4, epochs=1, max_steps=1,
                      show_progress=False, grad_clip=0.0)
    params = {n: p for n, p in m.named_parameters() if p.requires_grad}
    groups = param_groups(params, cfg)
    graph_ids = {id(p) for p in groups[0]["params"]}
    assert groups[0]["lr_scale"] == pytest.approx(1e-7) and groups[1]["lr_scale"] == 1.0
    assert graph_ids == {id(p) for n, p in params.items() if n.startswith("encoder.")}
    before = {n: p.detach().clone() for n, p in params.items()}
    train(m, examples[:4], examples[:2], cfg, tmp_path / "run")
    moved = {n: float((p.detach() - before[n]).abs().max()) for n, p in params.items()}
    assert max(v for n, v in moved.items() if n.startswith("encoder.")) < 1e-6
    assert min(v for n, v in moved.items() if n.startswith("projector.")) > 1e-3
    assert max(v for n, v in moved.items() if "lora_B" in n) > 1e-3
    with pytest.raises(ValueError, match="encoder_lr"):
        TrainConfig(encoder_lr=0.0)


def test_question_first_reads_the_context_knowing_the_question(examples):
    """``question_first``: the frozen part is ``prefix, question, \\n, context, \\n`` (the question is
    still re-read after the graph tokens); the context budget shrinks by the extra question; the
    cached context states now depend on the question (they do not without it); a saved config
    keeps the switch and the KV store key tells the two apart."""
    from toporag_core.model import TopoRAGConfig
    from toporag_core.training import kv_store_key

    bq = tiny_model(in_dim=DIM, graph_position="before_question", mode="lora", tokens=2, seed=4)
    qf = tiny_model(in_dim=DIM, graph_position="before_question", mode="lora", tokens=2, seed=4, question_first=True)
    lay = qf.prompt_layout_ids()
    for e in examples:
        q, sep = qf.prompter.ids(e.question), lay["sep"]
        assert qf.context_budget(e.question) == max(0, bq.context_budget(e.question) - len(q) - len(sep))
        c = qf.context_ids(e.context, e.question)[0]
        assert qf.frozen_ids(e.context, e.question) == lay["pre"] + q + sep + c + sep
        shown = qf.prompt_layout(e.context, e.question)
        assert shown["question_first"] and shown["input_tokens"] == len(lay["pre"]) + 2 + 2 * (len(q) + len(sep)) \
            + len(c) + len(lay["post"])
        c_bq = bq.context_ids(e.context, e.question)[0]
        assert bq.prompt_layout(e.context, e.question)["input_tokens"] == len(lay["pre"]) + 2 + len(q) + len(sep) \
            + len(c_bq) + len(lay["post"])
    # same context, two questions of one length (same positions, so RoPE cannot tell them apart): the
    # context's cached states differ only when the question comes first
    e, questions = examples[0], ["which one is it?", "where was it now"]
    assert len(qf.prompter.ids(questions[0])) == len(qf.prompter.ids(questions[1]))
    two = QABatch(None, questions, [e.context, e.context])
    for m, differ in ((bq, False), (qf, True)):
        kv = m.context_kv(two)
        n_ctx = len(m.context_ids(e.context, "x")[0])
        last = [t[:, :, :, -(n_ctx + 1):-1] for t in kv]  # the context positions (before the final "\n")
        assert (not torch.allclose(last[0], last[1], atol=1e-5)) == differ
    assert TopoRAGConfig.from_dict(qf.config.to_dict()).question_first
    assert kv_store_key(qf, "data") != kv_store_key(bq, "data")


def test_kv_data_key_is_one_folder_name_per_data_folder(tmp_path):
    """``--data-dir`` gives one path component (no nested folders from an absolute path), the same key
    for the same folder however it is written, and different keys for two folders of one name."""
    from toporag_core.training import kv_data_key

    assert kv_data_key("scene_graphs", "k", None) == "scene_graphs-k-shared"
    a, b = tmp_path / "x" / "scenes", tmp_path / "y" / "scenes"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    ka = kv_data_key("scene_graphs", "k", a)
    assert "/" not in ka and ka.startswith("scene_graphs-k-scenes-")
    assert kv_data_key("scene_graphs", "k", str(a) + "/../scenes") == ka
    assert kv_data_key("scene_graphs", "k", b) != ka


def test_per_row_candidate_lists_score_like_one_call_per_row(examples):
    """score_choices with one candidate list per row (the evidence path) gives each row exactly the
    scores of a separate call with its own list (which equals the teacher-forced loss, above)."""
    m = tiny_model(in_dim=DIM, graph_position="before_question", tokens=2, seed=3).eval()
    rows = [["red. Answer: yes", "red. Answer: no"], ["a blue cup. Answer: yes", "a blue cup. Answer: no"],
            ["Answer: yes", "Answer: no"]]
    batch = make_batch(examples[:3], with_answers=False)
    together = m.score_choices(batch, rows, truncate=False)
    for i, cands in enumerate(rows):
        alone = m.score_choices(make_batch(examples[i:i + 1], with_answers=False), cands, truncate=False)
        assert torch.allclose(together[i], alone[0], atol=1e-4), i
    with pytest.raises(ValueError, match="candidate lists of one length"):
        m.score_choices(batch, [["a", "b"], ["a"], ["a", "b"]])


def test_evidence_target_and_split_round_trip():
    from toporag_core.model import evidence_target, split_evidence

    t = evidence_target("The metal  cup is orange.", "no")
    assert t == "The metal cup is orange. Answer: no"
    assert split_evidence(t) == ("The metal cup is orange", "no")
    assert split_evidence("The cup is red. Answer: yes.\nmore") == ("The cup is red", "yes")
    assert split_evidence("the cup is red") == ("the cup is red", None)  # no cue: all of it is evidence
    assert evidence_target("", "yes") == "Answer: yes" and split_evidence("Answer: yes") == ("", "yes")
    # an open (cited) answer keeps all its words; a cue with nothing after it has no label
    assert split_evidence("cup [2] left of box [4]. Answer: to the left of.") == ("cup [2] left of box [4]",
                                                                                  "to the left of")
    assert split_evidence("cup [2]: red. Answer:") == ("cup [2]: red", None)


def test_evidence_decoding_writes_evidence_then_scores_the_labels_after_it(examples):
    """An answer_style="evidence" model answers a polar question by generating (greedy, what
    ``generate`` alone gives) and then scoring "<its evidence>. Answer: yes/no" - the same scores as a
    fresh prompt pass, so generation did not touch the cache scoring reads. Open questions and a
    label-style model with the same weights are unchanged."""
    from toporag_core.model import evidence_target, split_evidence

    polar, open_q = "Question: Is the cup red?\nAnswer:", "Question: What colour is the cup?\nAnswer:"
    rows = [dataclasses.replace(e, question=q) for e, q in zip(examples[:3], (polar, open_q, polar))]
    ev_model = tiny_model(in_dim=DIM, graph_position="before_question", tokens=2, seed=5, max_new_tokens=10,
                          answer_style="evidence").eval()
    lab_model = tiny_model(in_dim=DIM, graph_position="before_question", tokens=2, seed=5, max_new_tokens=10).eval()
    batch = make_batch(rows, with_answers=False)
    out, base = ev_model.answer(batch), lab_model.answer(batch)
    for i, r in enumerate(rows):
        one = make_batch([r], with_answers=False)
        if r.question == open_q:
            assert out[i]["answer"] == base[i]["answer"] and out[i]["kind"] == "generated"
            assert "evidence" not in out[i]
            continue
        raw = ev_model.generate(one)[0]
        ev = split_evidence(raw)[0]
        ref = ev_model.score_choices(one, [evidence_target(ev, "yes"), evidence_target(ev, "no")], truncate=False)[0]
        assert out[i]["raw"] == raw and out[i]["evidence"] == ev
        assert out[i]["scores"]["yes"] == pytest.approx(float(ref[0]), abs=1e-4)
        assert out[i]["scores"]["no"] == pytest.approx(float(ref[1]), abs=1e-4)
        assert out[i]["answer"] == ("yes" if ref[0] >= ref[1] else "no")
        assert out[i]["probability"] == pytest.approx(float(torch.softmax(ref, -1).max()), abs=1e-4)
        # the label-style twin scores the bare labels: different scores, no evidence
        assert "evidence" not in base[i] and base[i]["raw"] in ("yes", "no")
        assert base[i]["scores"]["yes"] != pytest.approx(out[i]["scores"]["yes"], abs=1e-3)
    assert ev_model.uses_evidence(("yes", "no")) and not ev_model.uses_evidence(("support", "counter"))
    assert not lab_model.uses_evidence(("yes", "no"))
    with pytest.raises(ValueError, match="answer_style"):
        tiny_model(in_dim=DIM, answer_style="essay")


def test_cited_decoding_reads_the_open_answer_after_the_generated_cue(examples):
    """An answer_style="cited" model generates an open answer exactly as ``generate`` does, then
    reports the words after the last "Answer:" as the answer and the text before it as the evidence
    (the whole line when the cue is missing: then the answer is that line cut short, as for a label
    model). Polar rows are decoded evidence first, as for answer_style="evidence"."""
    from toporag_core.model import split_evidence

    polar, open_q = "Question: Is the cup red?\nAnswer:", "Question: What colour is the cup?\nAnswer:"
    rows = [dataclasses.replace(e, question=q) for e, q in zip(examples[:3], (open_q, polar, open_q))]
    cited = tiny_model(in_dim=DIM, graph_position="before_question", tokens=2, seed=5, max_new_tokens=10,
                       answer_style="cited").eval()
    ev_model = tiny_model(in_dim=DIM, graph_position="before_question", tokens=2, seed=5, max_new_tokens=10,
                          answer_style="evidence").eval()
    batch = make_batch(rows, with_answers=False)
    out, ref = cited.answer(batch), ev_model.answer(batch)
    raws = cited.generate(make_batch([rows[0], rows[2]], with_answers=False))
    for i, raw in zip((0, 2), raws):
        ev, label = split_evidence(raw)
        assert out[i]["raw"] == raw and out[i]["evidence"] == ev and out[i]["kind"] == "generated"
        assert out[i]["answer"] == short_answer(label if label is not None else raw)
        assert "evidence" not in ref[i] and ref[i]["answer"] == short_answer(raw)  # same weights, no citing
    assert out[1] == ref[1] and "evidence" in out[1]  # polar: the evidence-first decoder, unchanged
    assert cited.uses_evidence(("yes", "no")) and not cited.uses_evidence(None)


def test_cited_answer_is_parsed_from_a_forced_generation(examples, monkeypatch):
    """The parsing itself, on a generation we choose: the label after the cue is the answer, the cited
    lines are the evidence, and the answer's cleanliness is judged on the label alone (the cited lines
    name node ids, which would make the whole text look like a context dump)."""
    cited = tiny_model(in_dim=DIM, graph_position="before_question", tokens=2, seed=5, answer_style="cited").eval()
    text = "cabinet [5]: yellow, wooden; cabinet [5] in front of clock [9]. Answer: clock"
    monkeypatch.setattr(cited, "generate", lambda sub, **kw: [text] * len(sub))
    row = dataclasses.replace(examples[0], question="Question: What is behind the yellow cabinet?\nAnswer:")
    (out,) = cited.answer(make_batch([row], with_answers=False))
    assert out["answer"] == "clock" and out["clean"] is True
    assert out["evidence"] == "cabinet [5]: yellow, wooden; cabinet [5] in front of clock [9]"
    assert not is_clean(text, row.question, row.context)  # the raw text alone would count as a dump


def test_lookup_draft_follows_the_first_longest_suffix_match():
    from toporag_core.model import lookup_draft

    src = [5, 6, 7, 8, 9, 5, 6, 1, 2, 3]
    assert lookup_draft(src, [5, 6], 3) == [7, 8, 9]  # the first occurrence of the 2-gram (5, 6)
    assert lookup_draft(src, [9, 5], 2) == [6, 1]  # the longest suffix wins over the 1-gram (5)
    assert lookup_draft(src, [4, 8], 4) == [9, 5, 6, 1]  # (4, 8) is absent: falls back to (8)
    assert lookup_draft(src, [3], 2) == []  # the last token is followed by nothing
    assert lookup_draft(src, [42], 5) == [] and lookup_draft(src, [5], 0) == [] and lookup_draft([], [5], 3) == []


@pytest.mark.training  # long generations on the tiny model: the whole suite's tier
@pytest.mark.parametrize("seed", [0, 3, 7])
def test_prompt_lookup_decoding_is_greedy_decoding(examples, seed):
    """Prompt-lookup decoding (drafts copied from the context, checked in one pass, the cache cropped to
    what greedy decoding keeps) writes exactly what one-token-at-a-time greedy decoding writes, whatever
    is accepted or rejected; a cited model uses it by default for one row."""
    model = tiny_model(in_dim=DIM, graph_position="before_question", tokens=2, seed=seed, max_new_tokens=40,
                       answer_style="cited").eval()
    for e in examples[:4]:
        one = make_batch([e], with_answers=False)
        for n in (1, 7, 40):
            plain = model.generate(one, max_new_tokens=n, lookup=0)
            assert model.generate(one, max_new_tokens=n, lookup=6) == plain
            assert model.generate(one, max_new_tokens=n, lookup=6, stop_at_newline=False) == \
                model.generate(one, max_new_tokens=n, lookup=0, stop_at_newline=False)
        assert model.generate(one) == model.generate(one, lookup=0)  # the default (cited: on) too


def test_prompt_lookup_decoding_needs_fewer_passes_when_the_model_copies(examples, monkeypatch):
    """A model that always writes "a", on a context of "a"s: every draft is accepted, so 30 tokens take
    1 + ceil(29 / 9) passes with 8-token drafts instead of 30, and the text is the same."""
    m = unigram_model({"a": 0.9}, eos_p=0.01, graph_position="before_question").eval()
    row = make_batch([dataclasses.replace(examples[0], context="a" * 60)], with_answers=False)
    calls = []
    real = m.llm.forward
    monkeypatch.setattr(m.llm, "forward", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    plain = m.generate(row, max_new_tokens=30, lookup=0, stop_at_newline=False)
    n_plain, calls[:] = len(calls), []
    fast = m.generate(row, max_new_tokens=30, lookup=8, stop_at_newline=False)
    assert fast == plain == ["a" * 30]
    assert n_plain == 30 and len(calls) == 1 + math.ceil(29 / 9)
    # a label-style model does not draft by default; its lookup_tokens attribute switches it on
    calls[:] = []
    assert m.generate(row, max_new_tokens=30, stop_at_newline=False) == plain and len(calls) == 30
    m.lookup_tokens, calls[:] = 8, []
    assert m.generate(row, max_new_tokens=30, stop_at_newline=False) == plain and len(calls) == 1 + math.ceil(29 / 9)


def test_citation_grammar_allows_exactly_real_lines_then_a_free_label():
    """A cited answer is ``L ("; " L)* ". Answer: " label`` over the context's node lines, or a bare label."""
    from toporag_core.retrieval.citations import CitationGrammar

    g = CitationGrammar("nodes\ncup [5]: red, glass\njug [2]: blue\n\nrelations\ncup [5] on jug [2]\n")
    assert g.lines == ["cup [5] on jug [2]", "cup [5]: red, glass", "jug [2]: blue"]  # headers name no node
    for text, state in [("", "free"), ("red", "free"), (" cup", "free"), ("cup [", "open"), ("cup [5] on j", "open"),
                        ("cup [5]: red, glass;", "open"), ("cup [5]: red, glass; cup [5] on", "open"),
                        ("cup [5] on jug [2]. Ans", "open"), ("cup [5] on jug [2]. Answer: jug", "done"),
                        ("cup [5]: red, glass; cup [5] on jug [2]. Answer: anything at all", "done"),
                        ("cup [6", None), ("cup [5] on m", None), ("cup [5] on jug [2] ", None),
                        ("cup [5] on jug [2]; cup [5] under", None), ("cup [5]: red. Answer: red", None),
                        ("red; blue", None)]:
        assert g.state(text) == state, text
        assert g.allows(text) == (state is not None)
    assert g.may_stop("red") and g.may_stop("cup [5] on jug [2]. Answer: jug")
    assert not g.may_stop("cup [5] on jug [2]") and not g.may_stop("cup [5] on m")
    assert g.missing("cup [5]: red, glass; cup [5] on mug [7]") == ["cup [5] on mug [7]"]
    assert CitationGrammar(None).lines == [] and not CitationGrammar("").allows("cup [5]")


def test_kv_build_refuses_up_front_when_the_disk_cannot_hold_it(examples, tmp_path, monkeypatch):
    """The KV cache estimate is close to what the build writes, and a build the free space cannot hold
    is refused before any forward pass, naming the folder, the need and the free space; nothing is lost."""
    import shutil
    from collections import namedtuple

    m = tiny_model(in_dim=DIM, graph_position="before_question", mode="lora", tokens=2, seed=4)
    need = DiskKVShards(tmp_path / "probe").check_space(m, examples, margin=1.0)
    store = DiskKVShards(tmp_path / "kv").build(m, examples, batch_size=4, shard_size=4, show_progress=False)
    stored = sum(t.numel() * 2 for t in store.get([e.id for e in examples]))  # float16 bytes
    assert 0.5 * stored <= need <= 1.5 * stored
    assert store.check_space(m, examples) == 0  # all cached: nothing to add

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**12, 0, need // 2))
    small = DiskKVShards(tmp_path / "small")
    with pytest.raises(OSError, match=r"kv cache .*small: about [\d.]+ GB needed for \d+ examples, [\d.]+ GB free"):
        small.build(m, examples, show_progress=False)
    assert len(small) == 0 and not list((tmp_path / "small").iterdir())
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**12, 0, 10 * need))
    assert len(small.build(m, examples, show_progress=False)) == len(examples)


@pytest.mark.parametrize("position", ["prefix", "before_question"])
def test_one_fused_scoring_pass_gives_the_two_pass_scores(examples, position):
    """score_choices without a prompt (prompt and candidates in one pass under the tree mask) equals
    the prompt pass followed by the candidates over a repeated cache, for candidates of different
    token lengths and per-row lists; a row alone scores as in the batch."""
    torch.manual_seed(5)
    m = tiny_model(in_dim=DIM, mode="lora", graph_position=position, tokens=2, seed=3).eval()
    with torch.no_grad():  # non-zero adapters: the tail and candidates run with LoRA on
        for n, p in m.llm.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    rows = [["yes", "no, not at all"], ["a blue cup", "b"], ["red", "Answer: a red glass cup"]]
    batch = make_batch(examples[:3], with_answers=False)
    soft = m.graph_tokens(batch.cells)
    fused = m.score_choices(batch, rows, soft=soft, truncate=False)
    two = m.score_choices(batch, rows, prompt=m.prompt_pass(batch, soft), truncate=False)
    assert fused.shape == (3, 2)
    torch.testing.assert_close(fused, two, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(fused[:, 0], fused[:, 1], atol=1e-2)  # not vacuous: candidates differ
    for i in range(3):
        one = make_batch(examples[i:i + 1], with_answers=False)
        alone = m.score_choices(one, rows[i], soft=soft[i:i + 1], truncate=False)
        torch.testing.assert_close(alone[0], fused[i], atol=1e-4, rtol=1e-4)


def test_candidate_mask_keeps_candidates_apart():
    from toporag_core.model.decode import candidate_mask

    fmask = torch.tensor([[0, 1]])  # one padded frozen position
    tmask = torch.tensor([[0, 1, 1]])  # one padded tail position
    real = torch.tensor([[[True, True], [True, False]]])  # candidate 1 has one step
    sees = candidate_mask(fmask, tmask, real, torch.float32)[0, 0] == 0  # (Q=7, K=9)
    frozen, tail, c0, c1 = [0, 1], [2, 3, 4], [5, 6], [7, 8]
    assert sees.shape == (7, 9)
    assert sees[1, [1, 3, 4]].tolist() == [True, True, False]  # tail query 1: real frozen, tail <= itself
    assert not sees[:, 0].any() and not sees[1:, 2].any()  # padding is seen by no real query
    assert sees[0, 2]  # ... but a padded query sees itself (finite output)
    assert sees[3, c0].tolist() == [True, False] and not sees[3, c1].any()  # c0 step 0
    assert sees[4, c0].tolist() == [True, True] and not sees[4, c1].any()  # c0 step 1
    assert sees[5, c1].tolist() == [True, False] and not sees[5, c0].any()  # c1 step 0, never c0
    assert sees[5, frozen].tolist() == [False, True] and sees[5, tail].tolist() == [False, True, True]
    assert not sees[:6, 8].any() and sees[6, 8]  # c1's padded step: seen only by itself


def test_open_answers_read_the_frozen_part_once_and_answer_as_before(monkeypatch):
    from toporag_core.model import QABatch, frozen_kv, with_context_kv

    m = tiny_model(in_dim=DIM, graph_position="before_question", use_graph=False, seed=5)
    batch = QABatch(cells=None, questions=["what is a?", "what is b?", "what is c?"],
                    contexts=["a r b\nb r c", "c r d", "a r b\nb r c"])
    from toporag_core.model import dispatch

    calls = []
    real = frozen_kv.context_kv
    monkeypatch.setattr(frozen_kv, "context_kv", lambda model, b: calls.append(len(b)) or real(model, b))
    with monkeypatch.context() as mp:
        mp.setattr(dispatch, "with_context_kv", lambda model, b: b)  # each pass reads the frozen part itself
        plain = m.answer(batch, choices=[None] * 3, max_new_tokens=4)
    assert calls == [3, 3]
    calls.clear()
    shared = m.answer(batch, choices=[None] * 3, max_new_tokens=4)
    assert calls == [2]  # generation and scoring share one pass over the two distinct frozen parts
    assert [r["answer"] for r in shared] == [r["answer"] for r in plain]
    assert [r["probability"] for r in shared] == pytest.approx([r["probability"] for r in plain], abs=1e-6)
    kv = with_context_kv(m, batch).kv
    assert len(kv) == 3 and kv[0] is kv[2] and kv[0] is not kv[1]
    assert with_context_kv(m, with_context_kv(m, batch)).kv is not None
    prefix = tiny_model(in_dim=DIM, graph_position="prefix", use_graph=False)
    assert with_context_kv(prefix, batch) is batch  # no frozen part: nothing to cache
