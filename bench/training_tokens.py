"""Training tokens of one synthetic multi-turn episode: merged vs compacted vs one datum per turn.

A deterministic 20-turn conversation with thinking (qwen3 family, embedded tokenizer, no model)
is played through the real token-in/token-out env core (``envs.core.ChatEnv``), each action
being the renderer's own rendering of the assistant turn; the trajectory goes through the
cookbook's ``trajectory_to_data`` and the datums' tokens are counted:

- merged: ``turngym/qwen3_preserve_thinking`` (extension property) -> 1 datum;
- compact every N: ``CompactingRenderer(qwen3, N)`` -> ceil(T/N) datums;
- per turn: ``qwen3`` (strips thinking from history, like the HF template) -> T datums.

Run: ``.venv/bin/python bench/training_tokens.py [--turns 20] [--period 4] [--quick]`` (``--quick``:
8 turns). The last line is
``ratio_merged_vs_per_turn=<x> ratio_compact4_vs_per_turn=<y>`` (training tokens, lower = cheaper).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tinker
from tinker_cookbook.completers import TokensWithLogprobs
from tinker_cookbook.renderers import Message, Renderer
from tinker_cookbook.rl.data_processing import trajectory_to_data
from tinker_cookbook.rl.types import InitialObservationOverflow, Trajectory, Transition

from backend.model import SMOLLM2, register_tokenizers
from envs.core import METRIC_FAULT_PREFIX, ChatEnv, EnvLimits, Reply
from renderers_ext import QWEN3_PRESERVE_THINKING, CompactingRenderer, load_renderer
from renderers_ext.testing import assistant_indices, sampled_action

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "it",
    "for",
    "on",
    "with",
    "as",
    "was",
    "by",
    "at",
    "be",
    "this",
    "from",
    "or",
    "an",
    "are",
    "which",
    "not",
    "have",
    "number",
    "guess",
    "higher",
    "lower",
    "between",
    "range",
    "answer",
    "check",
    "again",
    "maybe",
    "think",
    "try",
    "half",
    "middle",
    "value",
]


def synthetic_conversation(turns: int, seed: int = 0) -> list[Message]:
    """System + user, then ``turns`` x (assistant with thinking, user reply). Deterministic."""
    rng = random.Random(seed)

    def words(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."

    conv: list[Message] = [
        {"role": "system", "content": "You are playing a guessing game. " + words(20)},
        {"role": "user", "content": "I picked a number between 1 and 1000. " + words(15)},
    ]
    for t in range(turns):
        conv.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": words(60)},
                    {"type": "text", "text": f"My guess is {rng.randint(1, 1000)}. " + words(15)},
                ],
            }
        )
        conv.append({"role": "user", "content": f"Turn {t + 1}: " + words(20)})
    return conv


class ReplayEnv(ChatEnv):
    """Answers the k-th assistant message with the k-th scripted reply; the last turn ends."""

    def __init__(self, renderer: Renderer, initial: list[Message], replies: list[list[Message]]):
        super().__init__(renderer, limits=EnvLimits(max_turns=len(replies)))
        self._initial, self._replies, self._k = initial, replies, 0

    def initial_messages(self) -> list[Message]:
        return list(self._initial)

    async def on_message(self, message: Message) -> Reply:
        self._k += 1
        if self._k >= len(self._replies):
            return Reply(done=True, reward=1.0)
        return Reply(messages=self._replies[self._k - 1])


async def play(renderer: Renderer, conv: list[Message]) -> tuple[Trajectory, int]:
    idxs = assistant_indices(conv)
    replies = [conv[i + 1 : j] for i, j in zip(idxs, [*idxs[1:], len(conv)], strict=True)]
    env = ReplayEnv(renderer, conv[: idxs[0]], replies)
    first = await env.initial_observation()
    if isinstance(first, InitialObservationOverflow):
        raise RuntimeError("initial prompt overflowed")
    ob = first[0]
    transitions = []
    for idx in idxs:
        action = sampled_action(renderer, conv, idx)
        result = await env.step(action, extra={"stop_reason": "stop"})
        faults = [k for k in result.metrics if k.startswith(METRIC_FAULT_PREFIX)]
        if faults:
            raise RuntimeError(f"unexpected fault {faults} at message {idx}")
        transitions.append(
            Transition(
                ob=ob,
                ac=TokensWithLogprobs(tokens=action, maybe_logprobs=[-1.0] * len(action)),
                reward=result.reward,
                episode_done=result.episode_done,
                metrics=result.metrics,
            )
        )
        ob = result.next_observation
    return Trajectory(transitions=transitions, final_ob=tinker.ModelInput.empty()), env.rerenders


@dataclass(frozen=True)
class Count:
    name: str
    datums: int
    training_tokens: int
    sampled_tokens: int
    rerenders: int


def count(name: str, renderer: Renderer, conv: list[Message]) -> Count:
    traj, rerenders = asyncio.run(play(renderer, conv))
    data = trajectory_to_data(traj, traj_advantage=1.0)
    return Count(
        name=name,
        datums=len(data),
        training_tokens=sum(d.model_input.length for d in data),
        sampled_tokens=int(sum(float(d.loss_fn_inputs["mask"].to_torch().sum()) for d in data)),
        rerenders=rerenders,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--period", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="8 turns instead of --turns (a smoke run)")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns = 8
    register_tokenizers()  # the embedded tokenizer, offline (a fresh clone has no hub cache)
    conv = synthetic_conversation(args.turns)
    qwen3 = load_renderer("qwen3", SMOLLM2)
    rows = [
        count("merged (preserve thinking)", load_renderer(QWEN3_PRESERVE_THINKING, SMOLLM2), conv),
        count(f"compact every {args.period}", CompactingRenderer(qwen3, args.period), conv),
        count("per turn (strip thinking)", qwen3, conv),
    ]
    print(f"synthetic episode: {args.turns} turns with thinking, qwen3 family, cookbook trajectory_to_data")
    print(f"{'config':28s} {'datums':>6s} {'train tokens':>12s} {'sampled':>8s} {'rerenders':>9s}")
    for r in rows:
        print(f"{r.name:28s} {r.datums:6d} {r.training_tokens:12d} {r.sampled_tokens:8d} {r.rerenders:9d}")
    merged, compact, per_turn = rows
    if merged.sampled_tokens != compact.sampled_tokens or compact.sampled_tokens != per_turn.sampled_tokens:
        print("warning: configurations trained on different sampled-token counts", file=sys.stderr)
    x = merged.training_tokens / per_turn.training_tokens
    y = compact.training_tokens / per_turn.training_tokens
    print(f"ratio_merged_vs_per_turn={x:.3f} ratio_compact{args.period}_vs_per_turn={y:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
