"""Record the datums of one real RL training step of a TurnGym env (default: the Twenty Questions
main job's first step) for ``bench/local_trainer.py``.

Runs ``envs.<env>.train`` with the given keys (default: the main job's, with one RL step and no
evaluation) and writes the datums of the first ``forward_backward`` whose loss is not
``cross_entropy`` (the warm start's steps are) as gzipped JSON: a list of
``{"model_input": [...], "loss_fn_inputs": {key: [...]}}``.

Run: ``.venv/bin/python scripts/record_training_batch.py [--out bench/data/twenty_questions_step0.json.gz]
[key=value ...]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "bench" / "data" / "twenty_questions_step0.json.gz"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--env", default="twenty_questions")
    ap.add_argument("keys", nargs="*", help="training keys (default: one RL step, no evaluation)")
    args = ap.parse_args()

    from backend.local._trainer import TrainerCore

    original = TrainerCore.forward_backward
    recorded: list[Any] = []

    def recording(self: TrainerCore, data: Any, loss_fn: str, *rest: Any, **kwargs: Any) -> Any:
        if loss_fn != "cross_entropy" and not recorded:
            recorded.extend(
                {
                    "model_input": d.model_input.to_ints(),
                    "loss_fn_inputs": {k: v.tolist() for k, v in d.loss_fn_inputs.items()},
                }
                for d in data
            )
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(args.out, "wt") as f:
                json.dump({"loss_fn": loss_fn, "datums": recorded}, f)
            print(f"recorded {len(recorded)} datums ({loss_fn}) to {args.out}", flush=True)
        return original(self, data, loss_fn, *rest, **kwargs)

    TrainerCore.forward_backward = recording  # type: ignore[method-assign]
    import importlib

    train = importlib.import_module(f"envs.{args.env}.train")
    keys = args.keys or [
        "max_steps=1",
        "eval_every=0",
        "log_path=/tmp/turngym_record_batch",
        "progress=False",
    ]
    status = train.main(keys)
    return status if recorded else 1


if __name__ == "__main__":
    raise SystemExit(main())
