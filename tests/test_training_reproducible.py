"""Reproducible runs: the same seed gives the same sampled tokens and metrics (TINY model).

Two runs of the real loop (:mod:`training.testing`'s parity env, 2 steps with evaluations) with
one seed must agree on every metric that is not a timing, on every evaluation and on every
transcript (the sampled tokens); a third run with another seed must not.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections import Counter
from pathlib import Path

import anyio
import numpy as np
import pytest
import tinker
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, StepResult

import training
from backend.seeding import SEED_BITS, mix_seed
from rollout import EngineConfig, RolloutEngine, SampleCall
from training import SeededTokenCompleter, call_seed
from training._logging import read_rows
from training._rollouts import batch_seed, sample_batch
from training.testing import ToyConfig


def _run(path: Path, seed: int) -> Path:
    training.train(ToyConfig(log_path=str(path), max_steps=2, eval_every=1, seed=seed, progress=False))
    return path


PREFIX_CACHE = ("sampler/prefill_tokens", "sampler/reused_tokens")


def _untimed(path: Path, name: str) -> list[dict[str, object]]:
    """Every figure of every row but timings. The prefix cache's split of the prompt tokens is
    timing too: of two identical prompts in flight at once, whichever the sampler admits first is
    prefilled and the other reuses it. Their sum (every prompt token) is kept."""

    def timing(key: str) -> bool:
        return "time/" in key or key.endswith("/time") or "per_second" in key or key.endswith(PREFIX_CACHE)

    rows = []
    for row in read_rows(path / name):
        kept: dict[str, object] = {k: v for k, v in row.items() if not timing(k)}
        for prefix in {k.removesuffix(PREFIX_CACHE[0]) for k in row if k.endswith(PREFIX_CACHE[0])}:
            kept[f"{prefix}sampler/prompt_tokens"] = (
                row[prefix + PREFIX_CACHE[0]] + row[prefix + PREFIX_CACHE[1]]
            )
        rows.append(kept)
    return rows


def _transcripts(path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((path / "transcripts").glob("*.html"))}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("repro")
    return _run(root / "a", 3), _run(root / "b", 3), _run(root / "c", 4)


def test_same_seed_same_tokens_and_metrics(runs: tuple[Path, Path, Path]) -> None:
    a, b, _ = runs
    assert len(_untimed(a, "metrics.jsonl")) == 2
    assert "sampler/prompt_tokens" in _untimed(a, "metrics.jsonl")[0]
    assert _untimed(a, "metrics.jsonl") == _untimed(b, "metrics.jsonl")
    assert _untimed(a, "eval.jsonl") == _untimed(b, "eval.jsonl")
    assert _transcripts(a) and _transcripts(a) == _transcripts(b)


def test_the_run_logs_its_compute_dtype_choice(runs: tuple[Path, Path, Path]) -> None:
    a, _, _ = runs  # ToyConfig keeps the default local_compute_dtype=auto
    log = (a / "train.log").read_text()
    assert "local compute dtype: auto -> " in log


def test_another_seed_samples_otherwise(runs: tuple[Path, Path, Path]) -> None:
    a, _, c = runs
    assert _transcripts(a) != _transcripts(c)
    assert _untimed(a, "metrics.jsonl") != _untimed(c, "metrics.jsonl")


# --- per-call seeds: a sample's seed follows its place in the batch, not its arrival ---------------
class _EchoEnv(Env):
    """Three turns; the next observation is a constant, so envs that sampled alike send identical
    prompts (a sampler that seeds by prompt and arrival order then decides by timing who gets what)."""

    def __init__(self) -> None:
        self.turn = 0

    async def initial_observation(self) -> tuple[tinker.ModelInput, list[int]]:
        return tinker.ModelInput.from_ints([1, 2, 3]), [0]

    async def step(self, action: list[int], *, extra: object = None) -> StepResult:
        self.turn += 1
        return StepResult(
            reward=float(action[0] == 5),
            episode_done=self.turn >= 3,
            next_observation=tinker.ModelInput.from_ints([9]),
            next_stop_condition=[0],
        )


class _Group(EnvGroupBuilder):
    async def make_envs(self) -> list[Env]:
        return [_EchoEnv() for _ in range(6)]


class _ArrivalSeededSampler:
    """Seeds a request without a seed from its prompt and how many requests of that prompt came
    before (as a sampler must when it knows nothing else), then answers after a random delay."""

    def __init__(self, timing_seed: int) -> None:
        self.arrivals: Counter[tuple[int, ...]] = Counter()
        self.timing = random.Random(timing_seed)
        self.seeds: list[int | None] = []

    async def sample_async(
        self, prompt: tinker.ModelInput, num_samples: int, sampling_params: tinker.SamplingParams, **_: object
    ) -> tinker.SampleResponse:
        key = tuple(prompt.to_ints())
        self.seeds.append(sampling_params.seed)
        seed = sampling_params.seed if sampling_params.seed is not None else hash((key, self.arrivals[key]))
        self.arrivals[key] += 1
        await anyio.sleep(self.timing.random() * 0.01)
        token = random.Random(seed).choice([5, 6])
        return tinker.SampleResponse(
            sequences=[
                tinker.SampledSequence(
                    stop_reason="stop",
                    sequence_id=f"s{len(self.seeds)}",
                    tokens_np=np.asarray([token, 0], dtype=np.int32),
                    logprobs_np=np.asarray([-0.7, -0.1], dtype=np.float32),
                )
            ]
        )


def _slot_actions(seed: int | None, timing_seed: int) -> list[list[tuple[int, ...]]]:
    sampler = _ArrivalSeededSampler(timing_seed)
    batch = anyio.run(
        functools.partial(
            sample_batch,
            [_Group(), _Group()],
            sampler,
            max_tokens=4,
            temperature=1.0,
            sampler_step=0,
            seed=seed,
        )
    )
    assert all(s is not None for s in sampler.seeds) == (seed is not None)
    return [[tuple(t.ac.tokens) for t in traj.transitions] for g in batch.groups for traj in g.trajectories_G]


def test_a_seeded_batch_samples_each_env_alike_whatever_the_timing() -> None:
    runs = [_slot_actions(seed=11, timing_seed=t) for t in range(4)]
    assert all(r == runs[0] for r in runs)
    assert _slot_actions(seed=12, timing_seed=0) != runs[0]  # and the seed matters


def test_an_unseeded_batch_hands_samples_out_by_arrival() -> None:
    """What the seeds fix: with seeds by arrival, timing alone changes which env got which sample
    (this is how two same-seed runs of the loop drifted apart from their second step)."""
    runs = {tuple(map(tuple, _slot_actions(seed=None, timing_seed=t))) for t in range(8)}
    assert len(runs) > 1


def test_call_seeds_differ_by_every_part_of_the_place() -> None:
    base = SampleCall(seed=7, group=0, slot=0, attempt=0, turn=0)
    fields = ("seed", "group", "slot", "attempt", "turn")
    places = [base, *(dataclasses.replace(base, **{f: 1}) for f in fields)]
    seeds = {call_seed(c) for c in places}
    assert len(seeds) == len(places)
    assert all(0 <= s < 2**SEED_BITS for s in seeds)
    assert batch_seed(7, "train", 3) != batch_seed(7, "eval", 3) != batch_seed(7, "train", 4)


def test_one_mixer_of_one_width() -> None:
    """Every seed is ``mix_seed``'s: 31 bits (what every Tinker service accepts, an int32),
    stable, and sensitive to each part and its position."""
    assert SEED_BITS == 31
    assert mix_seed(1, "a", 2) == mix_seed(1, "a", 2) != mix_seed(2, "a", 1)
    assert mix_seed(1, 2) != mix_seed(12) and mix_seed(b"x") != mix_seed("x")
    assert all(0 <= mix_seed(i) < 2**31 for i in range(200))
    assert len({mix_seed(i) for i in range(200)}) == 200


def test_a_seeded_engine_hands_each_call_its_place() -> None:
    """With ``EngineConfig.seed``, the engine passes every policy call its place; without, the
    policy is called as the cookbook calls it (no ``call``)."""
    seen: list[SampleCall | None] = []

    class _Recording(SeededTokenCompleter):
        async def __call__(self, model_input, stop, *, max_tokens=None, call=None):  # type: ignore[override]
            seen.append(call)
            return await super().__call__(model_input, stop, max_tokens=max_tokens, call=call)

    policy = _Recording(_ArrivalSeededSampler(0), max_tokens=4)  # type: ignore[arg-type]
    anyio.run(RolloutEngine(policy, EngineConfig(seed=9)).run_batch, [_Group(), _Group()])
    assert sorted((c.seed, c.group, c.slot, c.attempt, c.turn) for c in seen if c is not None) == [
        (9, g, s, 0, t) for g in range(2) for s in range(6) for t in range(3)
    ]
    assert len(seen) == 36
    seen.clear()
    anyio.run(RolloutEngine(policy).run_batch, [_Group()])
    assert seen == [None] * 18


def test_a_seeded_engine_refuses_a_policy_that_takes_no_call() -> None:
    from completers import ScriptedTokenCompleter

    with pytest.raises(TypeError, match="takes no `call` keyword"):
        RolloutEngine(ScriptedTokenCompleter([[1]]), EngineConfig(seed=1))


def test_the_seeded_completer_seeds_by_call_else_by_its_own_seed() -> None:
    sampler = _ArrivalSeededSampler(0)
    prompt = tinker.ModelInput.from_ints([1, 2])
    call = SampleCall(seed=3, group=1, slot=2, attempt=0, turn=4)
    seeded = SeededTokenCompleter(sampler, max_tokens=2, seed=5)  # type: ignore[arg-type]
    anyio.run(lambda: seeded(prompt, [0], call=call))
    anyio.run(lambda: seeded(prompt, [0]))
    anyio.run(lambda: SeededTokenCompleter(sampler, max_tokens=2)(prompt, [0]))  # type: ignore[arg-type]
    assert sampler.seeds == [call_seed(call), 5, None]


def test_a_retried_env_samples_under_its_next_attempt() -> None:
    """A slot whose env failed is retried on a fresh env under ``attempt + 1`` (so its seeds differ
    from the failed attempt's), the others stay at attempt 0."""
    class _FailsOnce(_EchoEnv):
        failed = False

        async def step(self, action: list[int], *, extra: object = None) -> StepResult:
            if not _FailsOnce.failed:
                _FailsOnce.failed = True
                raise RuntimeError("flaky env")
            return await super().step(action, extra=extra)

    class _OneFlaky(EnvGroupBuilder):
        async def make_envs(self) -> list[Env]:
            return [_EchoEnv(), _FailsOnce()]

    sampler = _ArrivalSeededSampler(0)
    batch = anyio.run(
        functools.partial(
            sample_batch, [_OneFlaky()], sampler, max_tokens=4, temperature=1.0, sampler_step=0, seed=5
        )
    )
    assert len(batch.groups[0].trajectories_G) == 2
    # The failed attempt sampled once (turn 0) before its env raised.
    places = [(0, 0, t) for t in range(3)] + [(1, 0, 0)] + [(1, 1, t) for t in range(3)]
    expected = sorted(call_seed(SampleCall(5, 0, s, a, t)) for s, a, t in places)
    assert sorted(s for s in sampler.seeds if s is not None) == expected


def test_seeds_sent_to_any_sampler_fit_an_int32() -> None:
    """SkyRL tx answers 400 ("out of bounds for int32") to a larger seed: every seed the loop
    sends fits, whatever the backend."""
    sampler = _ArrivalSeededSampler(0)
    anyio.run(
        functools.partial(
            sample_batch, [_Group(), _Group()], sampler, max_tokens=4, temperature=1.0, sampler_step=0, seed=11
        )
    )
    assert sampler.seeds and all(s is not None and 0 <= s < 2**31 for s in sampler.seeds)
    assert len(set(sampler.seeds)) == len(sampler.seeds)  # 36 places, 36 seeds
