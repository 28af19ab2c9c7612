"""Neural-core speed: training throughput and answer latency of the default model.

Default model: packaged SmolLM2-135M-Instruct (frozen) + CW encoder + 1 soft prompt token
(the committed ExplaGraphs checkpoint when present, else a freshly initialised one).
References measured in the same run on the same examples:

* training: the frozen LLM's forward pass alone on the same batches (no encoder, no backward),
  against three training set-ups on the same examples: the paper's layout with a frozen LLM
  (soft prompt first, ``soft_prompt``), the paper's "w/ LoRA" row (``lora``, prefix layout: every
  position runs forward and backward), and the cacheable layout with LoRA on the tail
  (``before_question + lora``: the context's key/value cache is computed once - its one-off cost per
  example is printed - and each step runs only the tail, the question after the graph tokens, with
  grad). Tokens/s counts every input
  token of an example (context included) once per training step;
* answering: plain frozen-LLM generation on the same context + question, without graph encoder
  or soft prompt (``use_graph=False``); and retrieval alone.

Runs unchanged on a GPU (``--device auto`` picks CUDA + bf16). Data: ExplaGraphs from the shared
folder when present, else synthetic graphs.

    .venv/bin/python benchmarks/bench_neural.py [--steps 4] [--answers 12] [--device auto]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def synthetic_examples(n: int):
    from toporag_core.embed import get_encoder
    from toporag_core.tasks import RawExample
    from toporag_core.tasks.prep import PrepConfig, prepare_example
    from toporag_core.graph import TextualGraph

    enc, raws = get_encoder(), []
    for i in range(n):
        t = [(f"idea {i}", "causes", f"effect {i}"), (f"effect {i}", "is a", "harm"), ("harm", "relates to", f"idea {i}")]
        raws.append(RawExample(str(i), TextualGraph.from_triples(t), f"Question {i}: support or counter?\n\nAnswer:",
                               "support", "support", query=f"idea {i}"))
    return [prepare_example(r, enc, PrepConfig()) for r in raws], raws


def load_examples(n: int):
    from toporag_core.tasks import load_raw
    from toporag_core.tasks.prep import prepare_dataset

    try:
        data = prepare_dataset("expla_graphs", splits=("test",), show_progress=False)
        raws = load_raw("expla_graphs")["test"]
        return data["test"][:n], raws[:n], "ExplaGraphs test"
    except (FileNotFoundError, ValueError):
        exs, raws = synthetic_examples(n)
        return exs, raws, "synthetic"


def timed(fn, sync) -> float:
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=4, help="training steps (batch 8) to time")
    ap.add_argument("--answers", type=int, default=12, help="questions to time answering on")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--llm", default=None, help="LLM of every row (default: the checkpoint's, else the packaged "
                    "SmolLM2-135M; e.g. gemma3-270m)")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from toporag_core.model.llm import DEFAULT_LLM, load_llm
    from toporag_core.model import QABatch, TopoRAGConfig, TopoRAGModel
    from toporag_core.nn import CWNConfig
    from toporag_core.answering.pipeline import DEFAULT_CHECKPOINT, TopoRAGPipeline
    from toporag_core.tasks.batching import make_batch

    bs = 8
    exs, raws, source = load_examples(max(args.steps * bs, args.answers))
    ck = Path(args.checkpoint) if args.checkpoint else DEFAULT_CHECKPOINT
    ck_llm = json.loads((ck / "config.json").read_text())["config"]["llm"] if (ck / "config.json").is_file() else None
    if args.llm and ck_llm and args.llm != ck_llm:  # a checkpoint's adapters only fit the LLM it was trained on
        ap.error(f"--llm {args.llm}: checkpoint {ck} was trained on {ck_llm} (pass a matching --checkpoint)")
    llm_name = args.llm or ck_llm
    llm, tok = load_llm(llm_name, device=args.device)
    dev = llm.get_input_embeddings().weight.device
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)
    if (ck / "config.json").is_file():
        model = TopoRAGModel.load(ck, llm=llm, tokenizer=tok)
    else:
        model = TopoRAGModel(TopoRAGConfig(cwn=CWNConfig(in_dim=exs[0].tensors.dim), llm=llm_name or DEFAULT_LLM),
                             llm, tok)
    plain = TopoRAGModel(TopoRAGConfig(use_graph=False, llm=llm_name or DEFAULT_LLM), llm, tok)

    # -- training throughput ------------------------------------------------------------
    from toporag_core.training import DiskKVShards

    n_train = args.steps * bs
    chunks = [exs[i * bs:(i + 1) * bs] for i in range(args.steps)]
    tokens = sum(plain.prompt_layout(e.context, e.question)["input_tokens"]
                 + len(tok(e.answer, add_special_tokens=False)["input_ids"]) + 1 for e in exs[:n_train])

    def throughput(m, kv=None) -> float:
        opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-5)
        batches = [make_batch(c, use_graph=m.config.use_graph, kv=kv) for c in chunks]

        def step(b):
            loss = m(b.to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()

        m.train()
        step(batches[0])  # warm-up (allocations, lazy init)
        t = sum(timed(lambda b=b: step(b), sync) for b in batches)
        m.eval()
        return t

    rows = [("soft prompt, prefix (paper, frozen LLM)", throughput(model))]
    dim = exs[0].tensors.dim
    lora_targets = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    for name, position in (("LoRA + soft prompt, prefix (paper w/ LoRA)", "prefix"),
                           ("LoRA + soft prompt, before_question, cached context", "before_question")):
        llm_l, tok_l = load_llm(llm_name, device=args.device)  # LoRA is injected into its own LLM instance
        m = TopoRAGModel(TopoRAGConfig(cwn=CWNConfig(in_dim=dim), llm=llm_name or DEFAULT_LLM, num_graph_tokens=4,
                                       mode="lora", lora_r=16,
                                       lora_alpha=32, lora_targets=lora_targets, graph_position=position),
                         llm_l, tok_l)
        kv = None
        if position != "prefix":
            import tempfile

            kv = DiskKVShards(tempfile.mkdtemp(prefix="bench_kv_"))
            t_kv = timed(lambda m=m, kv=kv: kv.build(m, exs[:n_train], batch_size=bs, show_progress=False), sync)
        rows.append((name, throughput(m, kv)))
        del m, llm_l
    with torch.no_grad():
        plain_batches = [make_batch(c, use_graph=False) for c in chunks]
        t_fwd = sum(timed(lambda b=b: plain(b.to(dev)), sync) for b in plain_batches)

    # -- answer latency -----------------------------------------------------------------
    pipe = TopoRAGPipeline(model, meta={})
    ecxs = [pipe.prepare(r.graph) for r in raws[: args.answers]]
    pipe.answer(ecxs[0], raws[0].question, query=raws[0].query)  # warm-up
    lat, ret, gen_plain, gen_same = [], [], [], []
    for ecx, r in zip(ecxs, raws[: args.answers]):
        out = pipe.answer(ecx, r.question, query=r.query)
        lat.append(out["timings"]["total"] - out["timings"]["prepare"])
        ret.append(out["timings"]["retrieve"])
        same_text = QABatch(None, [r.question], [out["context"]])  # same prompt text, no graph tokens
        gen_plain.append(timed(lambda b=same_text: plain.generate(b), sync))
        # same output length as TopoRAG's answer (+ EOS): isolates the encoder / soft-prompt overhead
        n_new = len(tok(out["answer"], add_special_tokens=False)["input_ids"]) + 1
        gen_same.append(timed(lambda b=same_text: plain.generate(b, max_new_tokens=n_new), sync))

    dev_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"\nneural core on {dev_name}, {source} examples, LLM {llm_name or DEFAULT_LLM}, model: "
          f"{'checkpoint ' + str(ck) if (ck / 'config.json').is_file() else 'untrained'}")
    fw = n_train / t_fwd
    print(f"\n| training set-up (batch {bs}) | examples/s | tokens/s | frozen forward ex/s | ratio |")
    print("|---|---|---|---|---|")
    for name, t in rows:
        print(f"| {name} | {n_train / t:.2f} | {tokens / t:.0f} | {fw:.2f} | {n_train / t / fw:.2f} |")
    print(f"| one-off key/value cache of the frozen part | {n_train / t_kv:.2f} | {tokens / t_kv:.0f} | {fw:.2f} | "
          f"{n_train / t_kv / fw:.2f} |")
    print(f"\n{'measure':44s} {'value':>12s} {'reference':>12s} {'ratio':>8s}")
    print("-" * 80)
    for name, q in (("median", 0.5), ("p95", 0.95)):
        a, p, same = pct(lat, q), pct(gen_plain, q), pct(gen_same, q)
        print(f"{'answer latency ' + name + ' (s)':44s} {a:12.3f} {p:12.3f} {a / p:8.2f}   ref: plain frozen-LLM generation")
        print(f"{'answer latency ' + name + ' (s)':44s} {a:12.3f} {same:12.3f} {a / same:8.2f}   "
              "ref: same, capped at TopoRAG's answer length")
    print(f"{'  of which retrieval, median (s)':44s} {statistics.median(ret):12.4f}")
    print(f"\n{n_train} training examples, {len(lat)} answers; ratio = TopoRAG / reference")


if __name__ == "__main__":
    main()
