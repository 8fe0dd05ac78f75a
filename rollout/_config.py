"""Configuration of the rollout engine: limits, error strategies, concurrency, advantages.

Per-rollout budgets are the cookbook's own ``RolloutLimits`` (same fields, same semantics as its
``rollout_runner``); what the cookbook has no knob for lives on :class:`EngineConfig`.
Everything here is frozen (picklable, hashable, safe to share between tasks). Invalid values
raise ``ValueError`` with a one-line message at construction time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from tinker_cookbook.rl.rollout_limits import RolloutLimits


def _positive(name: str, value: float | None, *, allow_zero: bool = False) -> None:
    if value is None:
        return
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound} or None, got {value!r}")


class StrategyKind(StrEnum):
    """How a group reacts to the failure of one of its rollouts."""

    FAIL_FAST = "fail_fast"
    """The first failure fails the whole group (its other rollouts are cancelled)."""
    RETRY = "retry"
    """A failed rollout is retried on a fresh env (from ``make_envs``) up to ``max_retries``
    times per group; once the budget is spent, the next failure fails the group."""
    MIN_VIABLE = "min_viable"
    """Failures are retried while the floor is unmet and the budget lasts; the group is kept
    (with its survivors only) when at least ``min_successful`` rollouts succeed."""


@dataclass(frozen=True)
class Strategy:
    """Error strategy of a group. Build with :meth:`fail_fast`, :meth:`retry`, :meth:`min_viable`."""

    kind: StrategyKind = StrategyKind.FAIL_FAST
    """Which strategy."""
    max_retries: int = 0
    """Retry budget shared by all rollouts of a group (``RETRY`` / ``MIN_VIABLE``)."""
    min_successful: int | None = None
    """Floor of ``MIN_VIABLE`` (``None``: ``ceil(0.75 * group size)``, the cookbook default)."""
    abort_batch: bool = False
    """Raise :class:`BatchAborted` (cancelling the rest of the batch) when a group fails,
    instead of recording the failure and going on."""

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.min_successful is not None and self.min_successful < 1:
            raise ValueError(f"min_successful must be >= 1 or None, got {self.min_successful}")
        if self.kind == StrategyKind.FAIL_FAST and self.max_retries:
            raise ValueError("fail_fast takes no retries; use Strategy.retry(n)")
        if self.kind != StrategyKind.MIN_VIABLE and self.min_successful is not None:
            raise ValueError("min_successful only applies to Strategy.min_viable(k)")

    @classmethod
    def fail_fast(cls, *, abort_batch: bool = False) -> Strategy:
        """Any failure fails the group (and the batch too, with ``abort_batch``)."""
        return cls(StrategyKind.FAIL_FAST, abort_batch=abort_batch)

    @classmethod
    def retry(cls, max_retries: int = 3, *, abort_batch: bool = False) -> Strategy:
        """Retry failed rollouts on fresh envs, ``max_retries`` per group."""
        return cls(StrategyKind.RETRY, max_retries=max_retries, abort_batch=abort_batch)

    @classmethod
    def min_viable(cls, min_successful: int | None = None, max_retries: int = 0) -> Strategy:
        """Keep a group when at least ``min_successful`` of its rollouts succeed."""
        return cls(StrategyKind.MIN_VIABLE, max_retries=max_retries, min_successful=min_successful)

    @classmethod
    def from_cookbook(cls, strategy: object) -> Strategy:
        """The equivalent of a cookbook ``FailFast`` / ``RetryOnFailure`` / ``MinViableGroup``.

        Their ``per_rollout_timeout`` (a hard, retryable failure) has no field here: set
        ``RolloutLimits.rollout_timeout_seconds`` (graceful stop) or
        ``RolloutLimits.sampling_turn_timeout_seconds`` (failure) in ``EngineConfig.limits``.
        """
        from tinker_cookbook.rl.rollout_strategy import FailFast, MinViableGroup, RetryOnFailure

        if getattr(strategy, "per_rollout_timeout", None):
            raise ValueError(
                "per_rollout_timeout has no Strategy equivalent; use EngineConfig.limits "
                "(rollout_timeout_seconds or sampling_turn_timeout_seconds)"
            )
        if isinstance(strategy, FailFast):
            return cls.fail_fast()
        if isinstance(strategy, RetryOnFailure):
            return cls.retry(strategy.max_retries)
        if isinstance(strategy, MinViableGroup):
            return cls.min_viable(strategy.min_successful, strategy.max_retries)
        raise ValueError(f"unknown cookbook rollout strategy {type(strategy).__name__}")


class ExtensionCheck(StrEnum):
    """How the run-time extension check compares observations (see ``rollout._extension``)."""

    FULL = "full"
    """Exact: the whole previous observation + action is compared with the new observation's
    prefix (one C-level list comparison per turn, no ``to_ints()`` copies)."""
    BOUNDARY = "boundary"
    """O(window) per turn: lengths, the action tokens and ``window`` tokens on each side of the
    previous observation's end and at the start. Catches every break that shifts or rewrites
    content near the boundary (re-tokenisation, stripped thinking, changed templates); may miss
    an in-place edit of the same length far from both ends."""
    OFF = "off"
    """No check and no datum/token accounting (those ``TrajectoryStats`` fields are 0); datum
    assembly still splits at breaks, silently."""


@dataclass(frozen=True)
class EngineConfig:
    """Everything the engine needs besides the envs and the policy.

    Not the cookbook's ``rollout_presets.RolloutConfig`` (a bundle of env-side and runner-side
    policies): this one configures our engine; its ``limits`` are the cookbook's
    ``RolloutLimits``. Args mirror the fields; see each field's docstring.
    """

    limits: RolloutLimits = field(default_factory=RolloutLimits)
    """Per-rollout budgets (the cookbook's ``RolloutLimits``, same semantics as its
    ``rollout_runner``): turns, trajectory / sampled / per-turn tokens, tool calls (pushed into
    envs that support ``set_max_tool_calls``), the graceful whole-rollout deadline
    (``rollout_timeout_seconds``: the trajectory so far is kept, ``StopReason.ROLLOUT_TIMEOUT``)
    and the per-sampling-call deadline (``sampling_turn_timeout_seconds``: raises the cookbook's
    ``SamplingTurnTimeoutError``, a retryable failure). Unset fields fall back to the env's own
    ``rollout_limits``, as in the cookbook."""
    step_timeout_s: float | None = None
    """Deadline of one ``env.step`` / ``env.initial_observation`` call (the cookbook has none).
    Raises :class:`StepTimeout` (a failure, retryable)."""
    strategy: Strategy = field(default_factory=Strategy)
    """Error strategy of every group."""
    max_concurrent_samples: int | None = 64
    """Global cap on in-flight sampling calls (``None``: unlimited)."""
    max_concurrent_env_steps: int | None = None
    """Global cap on in-flight ``env.step`` calls (``None``: unlimited)."""
    max_concurrent_groups: int | None = None
    """Cap on groups running at once (``None``: all groups of a batch start together)."""
    compaction_period: int | None = None
    """Ask every env to compact its history every this many assistant turns (strip earlier
    thinking once per window), through :class:`rollout.SupportsCompaction` at rollout start.
    ``None``: leave envs as they are."""
    compaction_required: bool = True
    """When an env cannot compact (no ``set_compaction_period``): True fails its rollout with
    :class:`rollout.CompactionUnsupported`; False runs it uncompacted, logs a warning once per env
    type and counts it (``rollout/compaction_unsupported``)."""
    extension_check: ExtensionCheck = ExtensionCheck.FULL
    """Run-time extension check mode."""
    boundary_window: int = 16
    """Tokens compared on each side of the boundary in ``ExtensionCheck.BOUNDARY`` mode."""
    reward_timeout_s: float | None = None
    """Deadline of ``compute_group_rewards`` (raises :class:`RewardTimeout`: the group fails)."""
    cleanup_timeout_s: float | None = 60.0
    """Deadline of the (shielded) ``cleanup`` call; a timeout is recorded as a failure."""
    set_completed_stop_reason: bool = True
    """Record ``StopReason.COMPLETED`` when an env ends an episode without a ``stop/`` metric."""
    seed: int | None = None
    """Seed of the policy calls: when set, every call gets ``call=`` a :class:`rollout.SampleCall`
    (this seed and the call's place: group, slot, attempt, turn), from which the policy seeds its
    request (``training.SeededTokenCompleter``); the policy must accept that keyword. ``None``:
    policies are called as the cookbook calls them."""

    def __post_init__(self) -> None:
        if not isinstance(self.extension_check, ExtensionCheck):
            # "off" must mean OFF: the engine compares modes by identity.
            try:
                object.__setattr__(self, "extension_check", ExtensionCheck(self.extension_check))
            except ValueError:
                modes = ", ".join(m.value for m in ExtensionCheck)
                raise ValueError(f"extension_check must be one of {modes}, got {self.extension_check!r}") from None
        for name in ("max_concurrent_samples", "max_concurrent_env_steps", "max_concurrent_groups"):
            _positive(name, getattr(self, name))
        _positive("compaction_period", self.compaction_period)
        _positive("step_timeout_s", self.step_timeout_s)
        _positive("reward_timeout_s", self.reward_timeout_s)
        _positive("cleanup_timeout_s", self.cleanup_timeout_s)
        if self.boundary_window < 1:
            raise ValueError(f"boundary_window must be >= 1, got {self.boundary_window}")


@dataclass(frozen=True)
class AdvantageConfig:
    """How rewards become per-token advantages in :func:`rollout.assemble`.

    Default (all off): the cookbook's ``compute_advantages``: total reward minus the group mean,
    the same scalar on every action token of a trajectory.
    """

    normalize_std: bool = False
    """Divide group-centred advantages by the group's reward std (population) + ``eps``."""
    eps: float = 1e-6
    """Added to the std before dividing."""
    discount: float | None = None
    """Per-turn discounting: turn ``t`` of a trajectory gets ``G_t - mean_group(G_0)`` where
    ``G_t = sum_{k>=t} discount**(k-t) * r_k`` (the group reward is added to the last turn's
    reward). ``None``: one scalar per trajectory (cookbook behaviour)."""

    def __post_init__(self) -> None:
        if self.discount is not None and not 0.0 <= self.discount <= 1.0:
            raise ValueError(f"discount must be in [0, 1] or None, got {self.discount}")
        if self.eps <= 0:
            raise ValueError(f"eps must be > 0, got {self.eps}")
