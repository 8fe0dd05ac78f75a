"""What the engine returns: per-trajectory stats, per-group outcomes, batch results, errors.

Trajectories and groups are the cookbook's own types (``Trajectory``, ``TrajectoryGroup`` with
``rollout_errors``); these classes wrap them with the accounting the cookbook does not keep.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tinker_cookbook.rl.types import EnvGroupBuilder, RolloutError, TrajectoryGroup

from rollout._extension import ExtensionBreak

_set_dict = object.__setattr__


class RolloutFailure(Exception):
    """Base class of the failures the engine itself raises (all recorded, never swallowed).

    A sampling call past ``RolloutLimits.sampling_turn_timeout_seconds`` raises the cookbook's own
    ``SamplingTurnTimeoutError`` instead (same meaning, one name)."""


class StepTimeout(RolloutFailure):
    """``env.step`` or ``env.initial_observation`` exceeded ``EngineConfig.step_timeout_s``."""


class RewardTimeout(RolloutFailure):
    """``compute_group_rewards`` exceeded ``EngineConfig.reward_timeout_s``."""


class CleanupTimeout(RolloutFailure):
    """``cleanup`` exceeded ``EngineConfig.cleanup_timeout_s``."""


class InvalidCompletion(RolloutFailure):
    """The completer returned something unusable (e.g. logprobs not aligned with tokens)."""


class InvalidGroup(RolloutFailure):
    """``make_envs`` returned no envs, or ``compute_group_rewards`` a wrong-length list."""


class GroupBelowFloor(RolloutFailure):
    """Fewer rollouts than the min-viable floor succeeded."""


def error_of(exc: BaseException) -> RolloutError:
    """The cookbook's ``RolloutError`` (type name + one-line message) of an exception."""
    message = str(exc).strip().splitlines()
    return RolloutError(error_type=type(exc).__name__, error_message=message[0] if message else "")


@dataclass(frozen=True, init=False)
class TrajectoryStats:
    """Engine-side facts about one trajectory (also merged into ``TrajectoryGroup.metrics_G``).

    Frozen; its ``__init__`` is written out (the engine builds one per trajectory): a frozen
    dataclass's generated one sets each field through ``object.__setattr__``, ~2.5x slower.
    """

    turns: int
    """Policy calls that produced a transition."""
    sampled_tokens: int
    """Action tokens over all turns."""
    breaks: tuple[ExtensionBreak, ...]
    """Observations that did not extend the previous observation + action."""
    datums: int
    """Datums the cookbook's ``trajectory_to_data`` will make of it (``breaks + 1`` normally)."""
    tokens_trained: int
    """Tokens in those datums (what the trainer processes)."""
    tokens_unique: int
    """Distinct tokens: the prefix tree of all contexts."""
    tokens_per_turn: int
    """Tokens if every turn were its own datum (no merging)."""
    stop_reason: str
    """The trajectory's stop reason (also on ``Trajectory.stop_reason``)."""
    elapsed_s: float
    """Wall-clock time of the (successful) attempt."""
    compaction_unsupported: bool = False
    """Compaction was requested but the env could not honour it (the episode ran uncompacted)."""

    def __init__(
        self,
        turns: int,
        sampled_tokens: int,
        breaks: tuple[ExtensionBreak, ...],
        datums: int,
        tokens_trained: int,
        tokens_unique: int,
        tokens_per_turn: int,
        stop_reason: str,
        elapsed_s: float,
        compaction_unsupported: bool = False,
    ) -> None:
        _set_dict(
            self,
            "__dict__",
            {
                "turns": turns,
                "sampled_tokens": sampled_tokens,
                "breaks": breaks,
                "datums": datums,
                "tokens_trained": tokens_trained,
                "tokens_unique": tokens_unique,
                "tokens_per_turn": tokens_per_turn,
                "stop_reason": stop_reason,
                "elapsed_s": elapsed_s,
                "compaction_unsupported": compaction_unsupported,
            },
        )

    @property
    def unexpected_breaks(self) -> int:
        """Breaks the env's renderer did not announce: a bug in the env or the renderer."""
        return sum(1 for b in self.breaks if not b.expected)

    @property
    def compactions(self) -> int:
        """Breaks that were compactions (earlier thinking stripped at a window start)."""
        return sum(1 for b in self.breaks if b.compaction)

    def as_metrics(self) -> dict[str, float]:
        """Numeric metrics under ``rollout/`` (what ``TrajectoryGroup.metrics_G`` carries).

        Breaks and compactions are not among them: one count per fact, and those are counted
        once per batch by :func:`rollout.summarize` (``traj/ext_breaks``,
        ``traj/ext_breaks_unexpected``, ``traj/compactions``, ``traj/compaction_unsupported``),
        located on their transitions (``rollout/ext_break``, ``rollout/compaction``,
        ``rollout/compaction_unsupported``) and listed per trajectory in :attr:`breaks`.
        """
        return {
            "rollout/turns": float(self.turns),
            "rollout/sampled_tokens": float(self.sampled_tokens),
            "rollout/datums": float(self.datums),
            "rollout/tokens_trained": float(self.tokens_trained),
            "rollout/tokens_unique": float(self.tokens_unique),
            "rollout/tokens_per_turn": float(self.tokens_per_turn),
        }


@dataclass(frozen=True)
class GroupOutcome:
    """One group's result: the cookbook ``TrajectoryGroup`` if kept, and its accounting.

    Invariant: ``requested == completed + failed``. ``requested`` is the number of envs
    ``make_envs`` returned (0 when it raised); ``completed`` the trajectories in the kept group
    (0 when the group failed); ``failed`` the rest.
    """

    index: int
    """Position of the builder in the batch."""
    builder: EnvGroupBuilder
    """The group's builder."""
    group: TrajectoryGroup | None
    """The kept group (``rollout_errors`` filled), or None when the group failed."""
    stats: tuple[TrajectoryStats, ...]
    """One per trajectory of ``group`` (same order)."""
    errors: tuple[RolloutError, ...]
    """Every failure event, in order: failed attempts (retried or not), group-level errors,
    cleanup errors."""
    failure: RolloutError | None
    """Why the group was dropped (None when kept)."""
    requested: int
    """Rollouts the group asked for (its env count)."""
    completed: int
    """Trajectories delivered."""
    failed: int
    """Rollouts not delivered (``requested - completed``)."""
    retries: int
    """Retry attempts spent."""
    elapsed_s: float
    """Wall-clock time of the group, ``make_envs`` to ``cleanup``."""
    tags: tuple[str, ...] = ()
    """``builder.logging_tags()``."""

    @property
    def ok(self) -> bool:
        """Whether the group was kept."""
        return self.group is not None


@dataclass(frozen=True)
class BatchResult:
    """Outcomes of a batch (in builder order) and its metric summary."""

    outcomes: tuple[GroupOutcome, ...]
    """One per builder that finished (all of them, unless the batch was aborted)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """See :func:`rollout.summarize`."""
    elapsed_s: float = 0.0
    """Wall-clock time of the batch."""

    @property
    def groups(self) -> list[TrajectoryGroup]:
        """The kept groups, ready for :func:`rollout.assemble` or the cookbook's data processing."""
        return [o.group for o in self.outcomes if o.group is not None]


class BatchAborted(Exception):
    """A group failed under a strategy with ``abort_batch=True``; the rest was cancelled.

    ``result`` holds the outcomes that finished (the failing one included); ``cancelled`` is
    the number of groups that did not.
    """

    def __init__(self, result: BatchResult, cancelled: int):
        failure = next((o.failure for o in result.outcomes if o.failure is not None), None)
        what = f"{failure.error_type}: {failure.error_message}" if failure else "a group failed"
        super().__init__(f"batch aborted ({what}); {cancelled} group(s) cancelled")
        self.result = result
        self.cancelled = cancelled
