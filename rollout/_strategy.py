"""One group: ``make_envs`` -> rollouts under the error strategy -> ``compute_group_rewards``
-> ``cleanup`` (shielded from cancellation, bounded by ``cleanup_timeout_s``).

Accounting is by *slot* (one per env ``make_envs`` returned): a slot completes with one
trajectory or fails; retries replace the env of a slot (``make_envs()[slot]`` of a fresh call,
so per-position roles survive) without creating new slots. Every failed attempt is recorded.
"""

from __future__ import annotations

import math
import time

import anyio
from tinker_cookbook.completers import TokenCompleter
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, Metrics, RolloutError, Trajectory, TrajectoryGroup

from rollout._config import EngineConfig, StrategyKind
from rollout._results import (
    CleanupTimeout,
    GroupBelowFloor,
    GroupOutcome,
    InvalidGroup,
    RewardTimeout,
    TrajectoryStats,
    error_of,
)
from rollout._runner import CallLimiter, run_episode

_Done = tuple[Trajectory, TrajectoryStats, Env]


async def _run_slots(
    builder: EnvGroupBuilder,
    envs: list[Env],
    policy: TokenCompleter,
    config: EngineConfig,
    errors: list[RolloutError],
    sample_limiter: CallLimiter | None,
    step_limiter: CallLimiter | None,
    index: int,
) -> tuple[list[_Done | None], int, RolloutError | None]:
    """Run every slot under the strategy; return (per-slot results, retries used, group failure).

    Each attempt runs at its place (group ``index``, slot, attempt: :class:`rollout.SampleCall`).
    """
    strategy = config.strategy
    kind = strategy.kind
    n = len(envs)
    floor = strategy.min_successful if strategy.min_successful is not None else math.ceil(0.75 * n)
    results: list[_Done | None] = [None] * n
    retries_left = strategy.max_retries
    retries = 0
    successes = 0
    failure: RolloutError | None = None

    def fail(err: RolloutError) -> None:
        nonlocal failure
        if failure is None:
            failure = err
        slots.cancel_scope.cancel()

    async def slot(i: int) -> None:
        nonlocal retries_left, retries, successes
        env = envs[i]
        attempt = 0
        while True:
            try:
                traj, stats = await run_episode(
                    policy,
                    env,
                    config,
                    sample_limiter=sample_limiter,
                    step_limiter=step_limiter,
                    group=index,
                    slot=i,
                    attempt=attempt,
                )
            except Exception as exc:
                err = error_of(exc)
                errors.append(err)
                if kind is StrategyKind.FAIL_FAST:
                    fail(err)
                    return
                if retries_left > 0 and (kind is StrategyKind.RETRY or successes < floor):
                    retries_left -= 1
                    retries += 1
                    try:
                        fresh = list(await builder.make_envs())
                        if not fresh:
                            raise InvalidGroup("make_envs returned no envs on retry") from None
                    except Exception as exc2:
                        err2 = error_of(exc2)
                        errors.append(err2)
                        fail(err2)
                        return
                    env = fresh[i % len(fresh)]
                    attempt += 1
                    continue
                if kind is StrategyKind.RETRY:
                    fail(err)
                return  # MIN_VIABLE: this slot failed, the others go on
            results[i] = (traj, stats, env)
            successes += 1
            return

    async with anyio.create_task_group() as slots:
        for i in range(n):
            slots.start_soon(slot, i)

    if failure is None and kind is StrategyKind.MIN_VIABLE and successes < floor:
        failure = error_of(GroupBelowFloor(f"{successes}/{n} rollouts succeeded, below the floor of {floor}"))
        errors.append(failure)
    return results, retries, failure


async def _cleanup(builder: EnvGroupBuilder, config: EngineConfig, errors: list[RolloutError]) -> None:
    """``builder.cleanup()``, shielded from cancellation, bounded by ``cleanup_timeout_s``."""
    with anyio.CancelScope(shield=True) as scope:
        if config.cleanup_timeout_s is not None:
            scope.deadline = anyio.current_time() + config.cleanup_timeout_s
        try:
            await builder.cleanup()
        except Exception as exc:
            errors.append(error_of(exc))
    if scope.cancelled_caught:
        errors.append(
            error_of(CleanupTimeout(f"cleanup exceeded cleanup_timeout_s={config.cleanup_timeout_s}"))
        )


async def run_group(
    builder: EnvGroupBuilder,
    policy: TokenCompleter,
    config: EngineConfig,
    *,
    index: int = 0,
    sample_limiter: CallLimiter | None = None,
    step_limiter: CallLimiter | None = None,
) -> GroupOutcome:
    """Run one group to a :class:`GroupOutcome` (never raises for rollout/group failures).

    Cancellation propagates (after the shielded ``cleanup``); every other exception from the
    builder, the envs or the policy is recorded and decides the group's fate per the strategy.
    """
    t0 = time.monotonic()
    errors: list[RolloutError] = []
    failure: RolloutError | None = None
    requested = 0
    retries = 0
    kept: list[_Done] = []
    group: TrajectoryGroup | None = None
    try:
        try:
            envs = list(await builder.make_envs())
            if not envs:
                raise InvalidGroup("make_envs returned no envs")
            requested = len(envs)
            results, retries, failure = await _run_slots(
                builder, envs, policy, config, errors, sample_limiter, step_limiter, index
            )
            if failure is None:
                kept = [r for r in results if r is not None]
                trajectories = [r[0] for r in kept]
                group_envs = [r[2] for r in kept]
                if config.reward_timeout_s is None:
                    rewards = await builder.compute_group_rewards(trajectories, group_envs)
                else:
                    try:
                        with anyio.fail_after(config.reward_timeout_s):
                            rewards = await builder.compute_group_rewards(trajectories, group_envs)
                    except TimeoutError as e:
                        raise RewardTimeout(
                            f"compute_group_rewards exceeded reward_timeout_s={config.reward_timeout_s}"
                        ) from e
                rewards = list(rewards)
                if len(rewards) != len(trajectories):
                    raise InvalidGroup(
                        f"compute_group_rewards returned {len(rewards)} rewards for {len(trajectories)} trajectories"
                    )
                metrics_G: list[Metrics] = []
                for r, (_, m) in zip(kept, rewards, strict=True):
                    merged = r[1].as_metrics()  # a fresh dict: the group's metrics go on top
                    merged.update(m)
                    metrics_G.append(merged)
                group = TrajectoryGroup(
                    trajectories_G=trajectories,
                    final_rewards_G=[float(x) for x, _ in rewards],
                    metrics_G=metrics_G,
                )
        except Exception as exc:
            failure = error_of(exc)
            errors.append(failure)
            group = None
    finally:
        # make_envs may have created resources even when it (or anything after it) failed.
        if type(builder).cleanup is not EnvGroupBuilder.cleanup:  # the default is a no-op
            await _cleanup(builder, config, errors)
    if group is None:
        kept = []
    else:
        group.rollout_errors = list(errors)
    completed = len(kept)
    try:
        tags = tuple(builder.logging_tags())
    except Exception:
        tags = ()
    return GroupOutcome(
        index=index,
        builder=builder,
        group=group,
        stats=tuple(r[1] for r in kept),
        errors=tuple(errors),
        failure=failure,
        requested=requested,
        completed=completed,
        failed=requested - completed,
        retries=retries,
        elapsed_s=time.monotonic() - t0,
        tags=tags,
    )
