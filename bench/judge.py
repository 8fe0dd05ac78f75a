"""Benchmark: pairwise-preference group rewards, our concurrent judging vs the cookbook's pattern.

Groups of 4 responses, tournament ``both_orders`` (12 comparisons per group), a scripted judge
that sleeps 50 ms per comparison, the judge's default concurrency cap (16).

- ``concurrent`` (ours): every group's ``compute_group_rewards`` at once (as a trainer does),
  each running its comparisons concurrently; the judge's limiter caps what is in flight.
- ``cookbook`` (the baseline, the peer's own pattern): groups at once, comparisons one after
  another inside each group (tinker-cookbook's ``PairwisePreferenceGroupBuilder``).
- ``sequential`` (for reference): every comparison one after another.

Each mode gets a fresh judge (cache off), built before the clock starts. Measured at two batch sizes: ``--groups`` (16: as many groups as the cap, so the cookbook's
pattern already fills the judge and both modes should take about as long) and ``--small-groups``
(2: a small batch, e.g. async/off-policy training or an eval slice, where only in-group
concurrency keeps the judge busy).

Ends with ``ratio_wall_concurrent_vs_cookbook=<x>`` (at ``--groups``) and
``ratio_wall_concurrent_vs_cookbook_small=<y>`` (at ``--small-groups``); lower is better.

Run: ``.venv/bin/python bench/judge.py [--groups 16 --small-groups 2 --group-size 4 --delay-ms 50 --max-concurrency N] [--quick]``
(``--quick``: 4 and 1 groups, 5 ms per comparison)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
import tinker
from tinker_cookbook.rl.types import Trajectory

import envs.judge.testing  # noqa: F401  (registers the scripted: judge specs)
from backend import register_tokenizers
from envs.judge import (
    JudgeConfig,
    JudgeTask,
    PairingScheme,
    PairwiseGroupBuilder,
    clear_judges,
    get_judge,
    tournament_pairs,
)


async def prepare(builders: list[PairwiseGroupBuilder]) -> list[list]:
    """Play every group: env ``k`` of group ``g`` answers a distinct short text."""
    groups = []
    for g, builder in enumerate(builders):
        envs = list(await builder.make_envs())
        for k, env in enumerate(envs):
            await env.initial_observation()
            renderer = env.renderer
            text = f"Answer {k} to question {g}." + " more" * k
            stops = [t for t in renderer.get_stop_sequences() if isinstance(t, int)]
            tokens: list[int] = list(renderer.tokenizer.encode(text, add_special_tokens=False)) + stops
            await env.step(tokens)
        groups.append(envs)
    return groups


def _placeholders(envs: list) -> list[Trajectory]:
    """The pairwise builder reads the envs' transcripts; trajectories only need to match in number."""
    return [Trajectory([], tinker.ModelInput.empty()) for _ in envs]


async def run(builders: list[PairwiseGroupBuilder], groups: list[list], *, groups_at_once: bool) -> float:
    """Wall time of computing every group's rewards."""
    start = time.monotonic()
    if groups_at_once:
        async with anyio.create_task_group() as tg:
            for builder, envs in zip(builders, groups, strict=True):
                tg.start_soon(builder.compute_group_rewards, _placeholders(envs), envs)
    else:
        for builder, envs in zip(builders, groups, strict=True):
            await builder.compute_group_rewards(_placeholders(envs), envs)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--small-groups", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument(
        "--max-concurrency", type=int, default=None, help="judge cap (default: JudgeConfig's)"
    )
    parser.add_argument(
        "--pattern", default=str(PairingScheme.BOTH_ORDERS), choices=[str(p) for p in PairingScheme]
    )
    parser.add_argument(
        "--quick", action="store_true", help="4 and 1 groups, 5 ms per comparison (a smoke run)"
    )
    args = parser.parse_args()
    if args.quick:
        args.groups, args.small_groups, args.delay_ms = 4, 1, 5.0
    register_tokenizers()  # the embedded tokenizer the groups' renderers load, offline

    cap = {"max_concurrency": args.max_concurrency} if args.max_concurrency else {}
    spec = f"scripted:sleep:{args.delay_ms:g}:prefers_a"

    def builders(mode: str, concurrent: bool, n_groups: int) -> list[PairwiseGroupBuilder]:
        # cache off and one judge per mode: every mode pays for every comparison
        judge = JudgeConfig(spec, judge_id=f"bench-{mode}-{n_groups}", cache=False, timeout_s=30.0, **cap)  # type: ignore[arg-type]
        return [
            PairwiseGroupBuilder(
                JudgeTask(f"q{g}", ({"role": "user", "content": f"Question {g}?"},)),
                judge,
                group_size=args.group_size,
                pattern=PairingScheme(args.pattern),
                concurrent=concurrent,
            )
            for g in range(n_groups)
        ]

    clear_judges()
    per_group = len(tournament_pairs(args.group_size, args.pattern))
    modes = {"concurrent": (True, True), "cookbook": (False, True), "sequential": (False, False)}
    ratios: dict[int, float] = {}
    for n_groups in (args.groups, args.small_groups):
        total = per_group * n_groups
        walls: dict[str, float] = {}
        for mode, (concurrent, groups_at_once) in modes.items():
            bs = builders(mode, concurrent, n_groups)
            groups = anyio.run(prepare, bs)
            # Warm-up: build the judge's completer now. Left to the first calls, every comparison
            # started before it exists hops to a worker thread to build it (192 hops when all
            # groups start at once): a one-time cost of a new judge, not of judging.
            _ = get_judge(bs[0].judge).completer
            walls[mode] = anyio.run(
                lambda bs=bs, groups=groups, g=groups_at_once: run(bs, groups, groups_at_once=g)
            )
            judge = get_judge(bs[0].judge)
            stats = judge.stats
            assert stats.calls == total and stats.fallbacks == 0, stats.snapshot()
            print(
                f"{n_groups:3d} groups {mode:>11}: {walls[mode]:7.3f} s for {total} comparisons "
                f"({per_group} per group), peak in flight {stats.peak_in_flight}, cap {judge.config.max_concurrency}"
            )
        limit = get_judge(builders("concurrent", True, n_groups)[0].judge).config.max_concurrency
        ideal = total * args.delay_ms / 1000.0
        print(
            f"{n_groups:3d} groups lower bounds: sequential {ideal:.3f} s, cookbook"
            f" {ideal / min(n_groups, limit):.3f} s, concurrent {ideal / min(total, limit):.3f} s;"
            f" concurrent / sequential = {walls['concurrent'] / walls['sequential']:.4f}"
        )
        ratios[n_groups] = walls["concurrent"] / walls["cookbook"]
    print(f"ratio_wall_concurrent_vs_cookbook={ratios[args.groups]:.4f}")
    print(f"ratio_wall_concurrent_vs_cookbook_small={ratios[args.small_groups]:.4f}")


if __name__ == "__main__":
    main()
