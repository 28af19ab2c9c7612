"""One rank of the DDP test job (``torchrun --nproc_per_node=2 tests/_ddp_worker.py OUT MODE``), or the
one-process reference (``python tests/_ddp_worker.py OUT MODE [full]``). MODE: ``ddp`` (train with the torchrun
env) or ``train`` (toporag_core.training.train, one process); ``full``: the :data:`FULL` settings.
Writes ``OUT/losses-rank<r>.json``."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from toporag_core.training.distributed import DistEnv, init_distributed, shutdown
from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.retrieval import RetrievalSetting
from toporag_core.tasks import RawExample
from toporag_core.tasks.prep import PrepConfig, prepare_example
from toporag_core.model.tiny import tiny_model
from toporag_core.training import TrainConfig, train

GRAPHS = [
    [("cats", "are", "pets"), ("pets", "need", "care"), ("care", "helps", "cats")],
    [("guns", "cause", "harm"), ("harm", "is", "bad")],
    [("school", "has", "uniforms"), ("uniforms", "reduce", "bullying"), ("bullying", "harms", "school")],
    [("tax", "funds", "roads"), ("roads", "help", "trade")],
    [("sun", "gives", "energy"), ("energy", "powers", "homes"), ("homes", "face", "sun")],
    [("rain", "feeds", "rivers")],
    [("bees", "make", "honey"), ("honey", "feeds", "bees")],
    [("trees", "give", "shade"), ("shade", "cools", "streets"), ("streets", "line", "trees")],
]
ANSWERS = ["support", "counter", "yes", "it counters the claim", "support", "no", "counter", "they support it"]
CFG = TrainConfig(lr=3e-3, batch_size=4, eval_batch_size=4, epochs=3, max_steps=5, eval_every=2, patience=5,
                  seed=7, show_progress=False)
# what the old DDP copy of the loop ignored: cosine schedule, stop_after_steps (schedule of 6 steps cut at 4),
# gradient accumulation, length buckets, accuracy selection; 7 examples in global batches of 2 leave a last
# batch of 1, i.e. an empty share for rank 1
FULL = TrainConfig(lr=3e-3, batch_size=2, eval_batch_size=4, epochs=3, grad_accum=2, bucket=2, lr_schedule="cosine",
                   warmup_steps=2, stop_after_steps=4, eval_every=3, patience=5, seed=7, select="accuracy",
                   show_progress=False)


def examples():
    enc = HashingEncoder()
    prep = PrepConfig(RetrievalSetting.make("toporag", k0=2, k1=2, k2=1))
    raws = [RawExample(id=str(i), graph=TextualGraph.from_triples(t, name=f"g{i}"), question=f"Q{i}: {t[0][0]}?",
                       label=ANSWERS[i], answer=ANSWERS[i]) for i, t in enumerate(GRAPHS)]
    exs = [prepare_example(r, enc, prep) for r in raws]
    return exs, exs[:4]


def main(out: str, mode: str, full: bool = False) -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    env = init_distributed()
    train_set, val_set = examples()
    if full:
        cfg, train_set = FULL, train_set[:7]
        model = tiny_model(in_dim=256, seed=0, answer_set=tuple(sorted(set(ANSWERS))))
    else:
        cfg, model = CFG, tiny_model(in_dim=256, seed=0)
    if mode == "ddp":
        summary = train(model, train_set, val_set, cfg, out, env=env)
        losses = summary["losses"]
    else:
        summary = train(model, train_set, val_set, cfg, out)
        losses = summary["losses"] if full else []
    Path(out, f"losses-rank{env.rank}.json").write_text(json.dumps({"losses": losses, "steps": summary["steps"],
                                                                    "world": env.world,
                                                                    "best_step": summary["best_step"]}))
    shutdown()


if __name__ == "__main__":
    assert DistEnv.from_env().world in (1, 2)
    main(sys.argv[1], sys.argv[2], full=sys.argv[3:] == ["full"])
