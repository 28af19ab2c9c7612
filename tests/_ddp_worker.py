"""One rank of the DDP test job (``torchrun --nproc_per_node=2 tests/_ddp_worker.py OUT MODE``), or the
one-process reference (``python tests/_ddp_worker.py OUT MODE``). MODE: ``ddp`` (train_distributed)
or ``train`` (toporag_core.train.train, one process). Writes ``OUT/losses-rank<r>.json``."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from toporag_core.distributed import DistEnv, init_distributed, shutdown, train_distributed
from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.retrieval import RetrievalSetting
from toporag_core.tasks import RawExample
from toporag_core.tasks.prep import PrepConfig, prepare_example
from toporag_core.testing import tiny_model
from toporag_core.train import TrainConfig, train

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


def examples():
    enc = HashingEncoder()
    prep = PrepConfig(RetrievalSetting.make("toporag", k0=2, k1=2, k2=1))
    raws = [RawExample(id=str(i), graph=TextualGraph.from_triples(t, name=f"g{i}"), question=f"Q{i}: {t[0][0]}?",
                       label=ANSWERS[i], answer=ANSWERS[i]) for i, t in enumerate(GRAPHS)]
    exs = [prepare_example(r, enc, prep) for r in raws]
    return exs, exs[:4]


def main(out: str, mode: str) -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    env = init_distributed()
    train_set, val_set = examples()
    model = tiny_model(in_dim=256, seed=0)
    if mode == "ddp":
        summary = train_distributed(model, train_set, val_set, CFG, out, env=env)
        losses = summary["losses"]
    else:
        summary = train(model, train_set, val_set, CFG, out)
        losses = []
    Path(out, f"losses-rank{env.rank}.json").write_text(json.dumps({"losses": losses, "steps": summary["steps"],
                                                                    "world": env.world}))
    shutdown()


if __name__ == "__main__":
    assert DistEnv.from_env().world in (1, 2)
    main(sys.argv[1], sys.argv[2])
