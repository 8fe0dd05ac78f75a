"""Supervised warm starts: a few ``cross_entropy`` steps on scripted episodes before RL.

The generic path (the ``warm_start`` key of :class:`training.Config`, any env): the env's
dataset builder plays scripted episodes (:class:`SupportsScriptedEpisodes`); :func:`scripted_datums`
runs them through the rollout engine with the run's own rollout settings (so the renderer,
compaction included, splits them exactly as RL episodes will be split) and makes one
``cross_entropy`` datum per sequence, weight 1 on the sampled (scripted) tokens; the loop then
trains on them with :func:`supervised_warm_start`, ``warm_start.batch_size`` episodes per step
(each with all of its sequences, so a renderer that splits episodes into more sequences, e.g. one
that strips thinking every turn, trains on as much per step as one that keeps them whole). An env
opts in with one method::

    class MyDatasetBuilder(RLDatasetBuilder):
        async def scripted_episodes(self, n: int, seed: int) -> list[tuple[Env, TokenCompleter]]:
            # n fresh envs (drawn with ``seed``, apart from the RL batches), each with the
            # scripted policy that plays it (e.g. envs.PlayerPolicy(env, my_player))
            ...

Lower-level pieces for a hand-made warm start (the ``warm_start=`` hook of :func:`training.train`):
:func:`sft_datum` turns a token sequence with per-token weights into a next-token datum, and
:func:`supervised_warm_start` makes a :data:`training.WarmStart` hook that trains on such datums
through the run's own training client (so the result is in the first checkpoint, and a resumed
run does not redo it).
"""

from __future__ import annotations

import inspect
import logging
import random
import time
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import anyio
import tinker
import torch
from tinker_cookbook.completers import TokenCompleter
from tinker_cookbook.rl.data_processing import trajectory_to_data
from tinker_cookbook.rl.types import Env

from rollout import EngineConfig, run_episode
from training._config import Config, ConfigError

logger = logging.getLogger(__name__)

ScriptedEpisode = tuple[Env, TokenCompleter]
"""A fresh env and the scripted policy that plays it (token level: a ``TokenCompleter``)."""


@runtime_checkable
class SupportsScriptedEpisodes(Protocol):
    """A dataset builder that can script episodes for a supervised warm start
    (``warm_start.episodes > 0``; the protocol in full: ``docs/training-protocol.md``).

    ``async def scripted_episodes(self, n, seed)`` returns ``n`` :data:`ScriptedEpisode` s: fresh
    envs (cookbook ``Env`` s), each with the scripted token-level policy that plays it, drawn with
    ``seed`` (``warm_start.seed``) apart from the RL batches (other problems or other draws of the
    training split; never the held-out split). The usual policy is
    ``envs.PlayerPolicy(env, player)``: ``player`` is a message-level scripted player that reads
    ``env.messages`` (the conversation so far) and answers with an assistant message, rendered
    into tokens with the env's renderer. The method must be ``async`` and take ``(n, seed)``: the
    loop checks both before anything is written or the model loads, and checks what it returns
    (one line each). The warm start trains on every token the scripted policies produce, so
    script the behaviour you want the policy to start from.
    """

    async def scripted_episodes(self, n: int, seed: int) -> Sequence[ScriptedEpisode]:
        """``n`` (env, scripted policy) pairs drawn with ``seed``."""
        ...


def check_scripted_episodes(builder: object) -> None:
    """Raise :class:`training.ConfigError` (one line) when ``builder`` cannot script episodes:
    no ``scripted_episodes`` method, one that is not ``async def``, or one that does not take
    ``(n, seed)``. Cheap (no call is made): the loop runs it before anything is written and
    before the model loads."""
    name = type(builder).__name__
    see = "see training.SupportsScriptedEpisodes and docs/training-protocol.md"
    method = getattr(builder, "scripted_episodes", None)
    if not callable(method):
        raise ConfigError(
            f"warm_start.episodes > 0 but the dataset builder {name} cannot script episodes "
            f"(no scripted_episodes method; {see})"
        )
    if not inspect.iscoroutinefunction(method):
        raise ConfigError(
            f"{name}.scripted_episodes must be `async def scripted_episodes(self, n, seed)` "
            f"returning a list of (env, scripted policy) pairs; it is not async ({see})"
        )
    try:
        inspect.signature(method).bind(1, 0)
    except TypeError:
        raise ConfigError(
            f"{name}.scripted_episodes must take (n, seed): got {inspect.signature(method)} ({see})"
        ) from None


def check_episodes(builder: object, episodes: object, n: int) -> list[ScriptedEpisode]:
    """What ``scripted_episodes(n, seed)`` returned, checked: ``n`` pairs of a cookbook ``Env`` and
    a ``TokenCompleter`` (duck-typed: what the rollout engine calls); :class:`training.ConfigError`
    (one line) otherwise."""
    name = f"{type(builder).__name__}.scripted_episodes"
    if not isinstance(episodes, Sequence) or len(episodes) != n:
        got = f"{len(episodes)} items" if isinstance(episodes, Sequence) else type(episodes).__name__
        raise ConfigError(f"{name}({n}, seed) must return a list of {n} (env, policy) pairs, got {got}")
    for i, item in enumerate(episodes):
        ok = isinstance(item, tuple) and len(item) == 2
        is_env = ok and all(callable(getattr(item[0], m, None)) for m in ("initial_observation", "step"))
        if not ok or not is_env or not callable(item[1]):
            raise ConfigError(
                f"{name} item {i} must be an (env, policy) pair: a tinker_cookbook Env and a TokenCompleter, "
                f"got {type(item).__name__}"
                + (f" ({type(item[0]).__name__}, {type(item[1]).__name__})" if ok else "")
            )
    return list(episodes)


def sft_datum(tokens: Sequence[int], weights: Sequence[float]) -> tinker.Datum:
    """A next-token datum: inputs ``tokens[:-1]``, targets ``tokens[1:]``, weights ``weights[1:]``."""
    if len(tokens) != len(weights) or len(tokens) < 2:
        raise ValueError(f"need >= 2 tokens and one weight per token, got {len(tokens)} and {len(weights)}")
    return tinker.Datum(
        model_input=tinker.ModelInput.from_ints(list(tokens[:-1])),
        loss_fn_inputs={
            "target_tokens": tinker.TensorData.from_torch(torch.tensor(list(tokens[1:]), dtype=torch.int64)),
            "weights": tinker.TensorData.from_torch(torch.tensor(list(weights[1:]), dtype=torch.float32)),
        },
    )


async def scripted_datums(
    episodes: Sequence[ScriptedEpisode], rollout_config: EngineConfig
) -> tuple[list[tinker.Datum], dict[str, float]]:
    """Play ``episodes`` (concurrently) with the rollout engine under ``rollout_config`` and
    return ``cross_entropy`` datums (one per sequence the cookbook's ``trajectory_to_data``
    makes of an episode, weight 1 on the scripted tokens) and metrics (``warm_start/``:
    episodes, datums, trained tokens, mean scripted reward and turns)."""
    per_episode, metrics = await _episode_datums(episodes, rollout_config)
    return [d for group in per_episode for d in group], metrics


async def _episode_datums(
    episodes: Sequence[ScriptedEpisode], rollout_config: EngineConfig
) -> tuple[list[list[tinker.Datum]], dict[str, float]]:
    """:func:`scripted_datums`, the datums grouped by episode (one list per episode, in order)."""
    results: list[Any] = [None] * len(episodes)

    async def play(i: int, env: Env, policy: TokenCompleter) -> None:
        results[i] = await run_episode(policy, env, rollout_config)

    async with anyio.create_task_group() as tg:
        for i, (env, policy) in enumerate(episodes):
            tg.start_soon(play, i, env, policy)
    per_episode: list[list[tinker.Datum]] = []
    rewards: list[float] = []
    turns: list[int] = []
    for traj, stats in results:
        rewards.append(sum(t.reward for t in traj.transitions))
        turns.append(stats.turns)
        per_episode.append(
            [
                tinker.Datum(
                    model_input=d.model_input,
                    loss_fn_inputs={
                        "target_tokens": d.loss_fn_inputs["target_tokens"],
                        "weights": d.loss_fn_inputs["mask"],
                    },
                )
                for d in trajectory_to_data(traj, 1.0)
            ]
        )
    datums = [d for group in per_episode for d in group]
    n = max(len(results), 1)
    metrics = {
        "warm_start/episodes": float(len(results)),
        "warm_start/datums": float(len(datums)),
        "warm_start/trained_tokens": float(sum(d.loss_fn_inputs["weights"].to_torch().sum() for d in datums)),
        "warm_start/scripted_reward": sum(rewards) / n,
        "warm_start/scripted_turns": sum(turns) / n,
    }
    return per_episode, metrics


def supervised_warm_start(
    datums: Sequence[tinker.Datum | Sequence[tinker.Datum]],
    *,
    steps: int,
    batch_size: int,
    learning_rate: float,
    seed: int = 0,
) -> Any:
    """A :data:`training.WarmStart` hook: ``steps`` AdamW steps of ``cross_entropy`` on
    ``batch_size`` items each (reshuffled every pass). An item is a datum, or the datums of one
    episode, which then train in the same step (``batch_size`` counts episodes: a renderer that
    splits an episode into more sequences does not train on less of it per step). Returns metrics
    (first/last loss per weighted token, seconds)."""
    pool: list[list[tinker.Datum]] = [[d] if isinstance(d, tinker.Datum) else list(d) for d in datums]
    pool = [group for group in pool if group]
    if not pool:
        raise ValueError("a supervised warm start needs at least one datum")

    async def warm_start(training_client: Any, config: Config) -> dict[str, float]:
        rng = random.Random(seed)
        order: list[list[tinker.Datum]] = []
        losses: list[float] = []
        t0 = time.monotonic()
        adam = tinker.AdamParams(
            learning_rate=learning_rate,
            beta1=config.beta1,
            beta2=config.beta2,
            eps=config.eps,
            weight_decay=config.weight_decay,
            grad_clip_norm=config.grad_clip_norm,
        )
        for step in range(steps):
            batch: list[tinker.Datum] = []
            for _ in range(min(batch_size, len(pool))):
                if not order:
                    order = pool[:]
                    rng.shuffle(order)
                batch.extend(order.pop())
            fb_future = await training_client.forward_backward_async(batch, loss_fn="cross_entropy")
            optim_future = await training_client.optim_step_async(adam)
            fb = await fb_future.result_async()
            await optim_future.result_async()
            loss = _mean_nll(batch, fb)
            losses.append(loss)
            logger.info("warm start step %d/%d: loss per token %.4f", step + 1, steps, loss)
            print(f"[warm start] step {step + 1}/{steps}: loss/token {loss:.4f}", flush=True)
        return {
            "warm_start/steps": float(steps),
            "warm_start/loss_first": losses[0] if losses else 0.0,
            "warm_start/loss_last": losses[-1] if losses else 0.0,
            "warm_start/seconds": time.monotonic() - t0,
        }

    return warm_start


def scripted_warm_start(builder: object, config: Config, rollout_config: EngineConfig) -> Any:
    """The :data:`training.WarmStart` hook of ``config.warm_start``: play
    ``config.warm_start.episodes`` scripted episodes of ``builder`` (which must implement
    :class:`SupportsScriptedEpisodes`) under ``rollout_config``, then train on them."""
    check_scripted_episodes(builder)
    keys = config.warm_start

    async def warm_start(training_client: Any, cfg: Config) -> dict[str, float]:
        t0 = time.monotonic()
        episodes = check_episodes(
            builder,
            await builder.scripted_episodes(keys.episodes, keys.seed),  # type: ignore[attr-defined]
            keys.episodes,
        )
        per_episode, played = await _episode_datums(episodes, rollout_config)
        print(
            f"[warm start] {len(episodes)} scripted episodes -> {int(played['warm_start/datums'])} sequences "
            f"(scripted reward {played['warm_start/scripted_reward']:.3f})",
            flush=True,
        )
        hook = supervised_warm_start(
            per_episode,
            steps=keys.steps,
            batch_size=keys.batch_size,
            learning_rate=keys.learning_rate,
            seed=keys.seed,
        )
        trained = await hook(training_client, cfg)
        return {**played, **trained, "warm_start/seconds": time.monotonic() - t0}

    return warm_start


def _mean_nll(batch: list[tinker.Datum], fb: tinker.ForwardBackwardOutput) -> float:
    """Loss per weighted token of one ``cross_entropy`` step: from the returned per-token logprobs
    (the cookbook's ``compute_mean_nll``, which every Tinker service returns), else from the
    ``loss:sum`` metric. A Tinker-API server that returns no ``loss:sum`` (SkyRL tx) logged 0.0."""
    from tinker_cookbook.supervised.common import compute_mean_nll

    outputs = getattr(fb, "loss_fn_outputs", None) or []
    if len(outputs) == len(batch) and all("logprobs" in o for o in outputs):
        return compute_mean_nll(
            [o["logprobs"] for o in outputs], [d.loss_fn_inputs["weights"] for d in batch]
        )
    n = sum(float(d.loss_fn_inputs["weights"].to_torch().sum()) for d in batch)
    return float((fb.metrics or {}).get("loss:sum", 0.0)) / max(n, 1.0)
