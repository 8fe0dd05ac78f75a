"""A token-level TurnGym / tinker-cookbook env as a real ``gymnasium.Env``.

The wrapped env is async (``tinker_cookbook.rl.types.Env``); :class:`TokenEnv` runs it on an
event loop in a helper thread behind an anyio blocking portal
(``anyio.from_thread.start_blocking_portal``), so ``reset`` / ``step`` are plain blocking calls
that work from synchronous code and from inside a running event loop alike.

Sources (anything :func:`resolve_builder` understands):

- an ``EnvGroupBuilder`` (one problem; every reset makes a fresh group from it),
- an ``RLDataset`` (the episode seed picks the batch and the group in it),
- a factory: a callable taking nothing, an ``int`` seed (a parameter named ``seed``) or a
  ``random.Random`` (a parameter named ``rng`` or annotated ``random.Random``), returning (or
  awaiting to) an ``EnvGroupBuilder`` or a single ``Env``.
"""

from __future__ import annotations

import contextlib
import inspect
import random
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, SupportsFloat, TypeAlias

import gymnasium as gym
import numpy as np
import tinker
from anyio.from_thread import BlockingPortal, start_blocking_portal
from gymnasium import spaces
from tinker_cookbook.completers import StopCondition, TokensWithLogprobs
from tinker_cookbook.rl.types import (
    STOP_METRIC_PREFIX,
    Env,
    EnvGroupBuilder,
    InitialObservationOverflow,
    Metrics,
    RLDataset,
    StepResult,
    StopReason,
    Trajectory,
    Transition,
)
from tinker_cookbook.tokenizer_utils import Tokenizer

EnvSource: TypeAlias = EnvGroupBuilder | RLDataset | Env | Callable[..., Any]
"""What :class:`TokenEnv` and the conformance checker accept: a builder, a dataset, a factory
(or, for one episode, a single ``Env``)."""

TokenObs: TypeAlias = tuple[int, ...]
"""A token-level observation or action: a tuple of token ids."""

TRUNCATION_REASONS: frozenset[str] = frozenset(
    {
        StopReason.MAX_TURNS,
        StopReason.MAX_TOKENS,
        StopReason.MAX_SAMPLED_TOKENS,
        StopReason.MAX_TOOL_CALLS,
        StopReason.CONTEXT_OVERFLOW,
        StopReason.ROLLOUT_TIMEOUT,
    }
)
"""Stop reasons that are budgets (gymnasium ``truncated``); every other end is ``terminated``."""


def stop_reason_of(metrics: Metrics) -> str | None:
    """The ``stop/<reason>`` one-hot in ``metrics`` (None when the env reports no reason)."""
    for key, value in metrics.items():
        if key.startswith(STOP_METRIC_PREFIX) and value:
            return key[len(STOP_METRIC_PREFIX) :]
    return None


def is_truncation(stop_reason: str | None) -> bool:
    """Whether an episode that ended with ``stop_reason`` was truncated (a budget ran out)."""
    return stop_reason in TRUNCATION_REASONS


def _factory_call(factory: Callable[..., Any], seed: int) -> Any:
    """Call ``factory`` for episode seed ``seed``: a parameter named ``seed`` gets the int, one
    named ``rng`` (or a lone required one annotated ``random.Random``) a seeded ``random.Random``,
    another lone required parameter the int; a factory without parameters is called bare."""
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature
        return factory()
    named = {p.name: p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)}
    if "seed" in named:
        return factory(seed=seed)
    if "rng" in named:
        return factory(rng=random.Random(seed))
    required = [
        p
        for p in params
        if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if not required:
        return factory()
    if len(required) > 1:
        names = ", ".join(p.name for p in required)
        raise TypeError(f"env factory {factory!r} needs {len(required)} arguments ({names}); expected 0 or 1")
    if required[0].annotation in (random.Random, "random.Random", "Random"):
        return factory(random.Random(seed))
    return factory(seed)


async def resolve_builder(source: EnvSource, seed: int = 0) -> EnvGroupBuilder | Env:
    """The builder (or single env) that ``source`` yields for episode seed ``seed``."""
    if isinstance(source, EnvGroupBuilder):
        return source
    if isinstance(source, RLDataset):
        n = len(source)
        if n == 0:
            raise ValueError("the RLDataset is empty")
        batch = source.get_batch(seed % n)
        if not batch:
            raise ValueError(f"batch {seed % n} of the RLDataset is empty")
        return batch[(seed // n) % len(batch)]
    if isinstance(source, Env):
        return source
    if not callable(source):
        raise TypeError(
            f"expected an EnvGroupBuilder, an RLDataset or an env factory, got {type(source).__name__}"
        )
    made = _factory_call(source, seed)
    if inspect.isawaitable(made):
        made = await made
    if isinstance(made, EnvGroupBuilder | Env):
        return made
    raise TypeError(
        f"env factory {getattr(source, '__name__', source)!r} returned {type(made).__name__}, "
        "expected an EnvGroupBuilder or an Env"
    )


async def make_env_group(made: EnvGroupBuilder | Env) -> Sequence[Env]:
    """The envs of a builder (``make_envs``), or the single env itself."""
    if isinstance(made, Env):
        return [made]
    return await made.make_envs()


def find_tokenizer(obj: Any) -> Tokenizer | None:
    """The tokenizer an env / builder exposes through ``.renderer`` or ``.tokenizer``, if any."""
    renderer = getattr(obj, "renderer", None)
    tokenizer = getattr(renderer, "tokenizer", None) or getattr(obj, "tokenizer", None)
    return tokenizer if tokenizer is not None and hasattr(tokenizer, "decode") else None


def ends_with_stop(tokens: Sequence[int], stop: StopCondition, tokenizer: Tokenizer) -> bool:
    """Whether ``tokens`` end with one of the stop sequences (a stop token id, or a stop string
    the decoded tail ends with): a sampler stopped there, not at ``max_tokens``."""
    if not tokens:
        return False
    for s in stop:
        if isinstance(s, int):
            if tokens[-1] == s:
                return True
        elif decode(tokenizer, tokens[-len(s) - 8 :]).endswith(s):
            return True
    return False


def decode(tokenizer: Tokenizer, tokens: Sequence[int]) -> str:
    """``tokenizer.decode`` of one token sequence, as a ``str``."""
    text = tokenizer.decode([int(t) for t in tokens])
    return text if isinstance(text, str) else "".join(text)


def model_input_tokens(model_input: tinker.ModelInput) -> list[int]:
    """The token ids of a text-only ``ModelInput``."""
    return [int(t) for t in model_input.to_ints()]


@dataclass(frozen=True)
class EpisodeEnd:
    """How an episode ended, as :class:`TokenEnv` reports it."""

    stop_reason: str | None
    """The ``stop/<reason>`` the env reported (None when it reported none)."""
    truncated: bool
    """True for budget stop reasons (:data:`TRUNCATION_REASONS`)."""
    episode_return: float
    """Sum of the rewards of the episode."""


class TokenEnv(gym.Env[TokenObs, TokenObs]):
    """A token-level env (TurnGym or cookbook-style) as a ``gymnasium.Env``.

    - Observation and action spaces: ``Sequence(Discrete(vocab_size))``; observations and
      actions are tuples of token ids.
    - ``reset(seed=...)`` draws an episode seed from ``np_random``, asks the source for a builder
      with it, makes the group and plays env ``env_index`` of it (of a multi-seat group, its
      ``alone()``: the first training seat, the policy's other seats held by its stand-in).
    - ``step(action)`` returns ``(obs, reward, terminated, truncated, info)``; budgets
      (:data:`TRUNCATION_REASONS`) truncate, every other end terminates. ``info`` carries
      ``stop_reason``, ``metrics``, ``logs``, ``stop_condition``, ``turn`` and
      ``sampler_stop`` (see below).
    - With ``max_tokens`` (the sampler's limit), an action of that many tokens that does not end
      with the stop condition is what a sampler returns when it hits the limit: the env gets
      ``extra={"stop_reason": "length"}`` (a max-tokens stop, e.g. ``Fault.TRUNCATED``, not a
      parse error); every other action gets ``"stop"``.
    - The final observation is the env's ``next_observation`` when it gives one, else the last
      observation + the last action (the whole transcript).
    - ``render_mode="ansi"``: ``render()`` returns the decoded conversation.

    Args:
        source: an ``EnvGroupBuilder``, an ``RLDataset`` or an env factory (see the module doc).
        tokenizer: the policy tokenizer; found on the source or its envs (``.renderer``) if None.
        env_index: which env of the group to play.
        render_mode: None or ``"ansi"``.
        group_rewards: when the group is one env and the builder overrides
            ``compute_group_rewards``, add its reward to the last step's (as the cookbook's
            rollouts do) and report ``info["group_reward"]`` / ``info["group_metrics"]``.
        max_tokens: the policy sampler's ``max_tokens``: an action that long without the stop
            sequence at its end was cut there (see above). None: never assume a cut.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012

    def __init__(
        self,
        source: EnvSource,
        *,
        tokenizer: Tokenizer | None = None,
        env_index: int = 0,
        render_mode: str | None = None,
        group_rewards: bool = True,
        max_tokens: int | None = None,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        from backend.model import register_tokenizers

        register_tokenizers()  # envs of the embedded models resolve their tokenizers offline
        self.source = source
        self.env_index = env_index
        self.render_mode = render_mode
        self._portal_cm: contextlib.AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._finalizer: weakref.finalize | None = None
        self._made: EnvGroupBuilder | Env | None = None
        self._env_used = False
        self.env: Env | None = None
        """The cookbook env of the current episode."""
        self.tokenizer: Tokenizer = tokenizer or find_tokenizer(source) or self._probe_tokenizer()
        vocab = len(self.tokenizer)  # slow in transformers 5 (tens of ms): computed once
        self.vocab_size = vocab
        """Number of token ids (``len(tokenizer)``, added tokens included)."""
        self.observation_space = spaces.Sequence(spaces.Discrete(vocab))
        self.action_space = spaces.Sequence(spaces.Discrete(vocab))
        self.stop_condition: StopCondition = []
        """Stop condition of the next action (from the last reset / step)."""
        self.turn = 0
        """Actions taken this episode."""
        self.end: EpisodeEnd | None = None
        """How the episode ended (None while it runs)."""
        self._tokens: list[int] = []
        self._return = 0.0
        self._overflow: InitialObservationOverflow | None = None
        self._observation = tinker.ModelInput.empty()
        self._group: list[Env] = []
        self._transitions: list[Transition] = []
        self._sampler_stop = "stop"
        self.max_tokens = max_tokens
        """The sampler's ``max_tokens`` (None: unknown)."""
        self.group_rewards = group_rewards
        """Add the builder's group reward at the end (groups of one env only)."""

    # --- portal --------------------------------------------------------------------------
    def _call(self, func: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        if self._portal is None:
            self._portal_cm = start_blocking_portal()
            self._portal = self._portal_cm.__enter__()
            # an env never closed stops its portal when collected or at exit (not in a noisy teardown)
            self._finalizer = weakref.finalize(self, _stop_portal, self._portal_cm)
        return self._portal.call(func, *args)

    def _probe_tokenizer(self) -> Tokenizer:
        async def probe() -> Tokenizer | None:
            made = await resolve_builder(self.source, 0)
            found = find_tokenizer(made)
            if found is None:
                envs = await make_env_group(made)
                found = next((t for t in map(find_tokenizer, envs) if t is not None), None)
            if isinstance(made, EnvGroupBuilder):
                await made.cleanup()
            return found

        found = self._call(probe)
        if found is None:
            raise TypeError("cannot find the env's tokenizer (no .renderer.tokenizer): pass tokenizer=...")
        return found

    async def _cleanup(self) -> None:
        made, self._made, self.env = self._made, None, None
        if isinstance(made, EnvGroupBuilder):
            await made.cleanup()

    # --- gymnasium -----------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[TokenObs, dict[str, Any]]:
        """Start a new episode (``options["env_index"]`` overrides ``env_index`` for this one)."""
        super().reset(seed=seed)
        episode_seed = int(self.np_random.integers(0, 2**31 - 1))
        index = int((options or {}).get("env_index", self.env_index))
        first = self._call(self._start, episode_seed, index)
        self.turn, self.end, self._return = 0, None, 0.0
        info: dict[str, Any] = {"episode_seed": episode_seed, "turn": 0}
        if isinstance(first, InitialObservationOverflow):
            self._overflow, self._tokens, self.stop_condition = first, [], []
            info.update(initial_overflow=True, metrics=dict(first.metrics), logs=dict(first.logs))
        else:
            self._overflow = None
            observation, self.stop_condition = first
            self._tokens = model_input_tokens(observation)
            self._observation = observation
        info["stop_condition"] = list(self.stop_condition)
        return tuple(self._tokens), info

    async def _start(self, episode_seed: int, index: int) -> Any:
        await self._cleanup()
        if isinstance(self.source, Env):
            if self._env_used:
                raise RuntimeError(
                    "an Env instance is single-use: pass a factory or a builder to reset again"
                )
            self._env_used = True
        made = await resolve_builder(self.source, episode_seed)
        from envs.seats import SeatedGroupBuilder

        if isinstance(made, SeatedGroupBuilder):  # one seat, the policy's others held by stand-ins
            made = made.alone()
        envs = await make_env_group(made)
        if not 0 <= index < len(envs):
            raise IndexError(f"env_index {index} is outside the group of {len(envs)} envs")
        self._made, self.env, self._group = made, envs[index], list(envs)
        self._transitions = []
        return await self.env.initial_observation()

    def step(self, action: Any) -> tuple[TokenObs, SupportsFloat, bool, bool, dict[str, Any]]:
        """Take one action (a sequence of token ids)."""
        if self.env is None:
            raise RuntimeError("call reset() before step()")
        if self.end is not None:
            raise RuntimeError("the episode is over: call reset() before step()")
        tokens = self._validate(action)
        self.turn += 1
        cut = (
            self.max_tokens is not None
            and len(tokens) >= self.max_tokens
            and not ends_with_stop(tokens, self.stop_condition, self.tokenizer)
        )
        self._sampler_stop = "length" if cut else "stop"
        if self._overflow is not None:
            result = StepResult(
                reward=self._overflow.reward,
                episode_done=True,
                next_observation=tinker.ModelInput.empty(),
                next_stop_condition=[],
                metrics=dict(self._overflow.metrics),
                logs=dict(self._overflow.logs),
            )
        else:
            result = self._call(self._step, tokens, self._sampler_stop)
        reward = float(result.reward)
        self._transitions.append(
            Transition(
                ob=self._observation,
                ac=TokensWithLogprobs(tokens, None),
                reward=reward,
                episode_done=result.episode_done,
                metrics=dict(result.metrics),
                logs=dict(result.logs),
            )
        )
        self._observation = result.next_observation
        group: tuple[float, Metrics] | None = None
        if result.episode_done and self.group_rewards:
            group = self._call(self._group_reward, result)
            if group is not None:
                reward += group[0]
        self._return += reward
        next_tokens = model_input_tokens(result.next_observation)
        self.stop_condition = result.next_stop_condition
        reason = stop_reason_of(result.metrics) if result.episode_done else None
        terminated = truncated = False
        if result.episode_done:
            truncated = is_truncation(reason)
            terminated = not truncated
            self.end = EpisodeEnd(reason, truncated, self._return)
            self._tokens = next_tokens or [*self._tokens, *tokens]
        else:
            self._tokens = next_tokens
        info: dict[str, Any] = {
            "stop_reason": reason,
            "metrics": dict(result.metrics),
            "logs": dict(result.logs),
            "stop_condition": list(self.stop_condition),
            "turn": self.turn,
            "sampler_stop": self._sampler_stop,
        }
        if self.end is not None:
            info["episode_return"] = self.end.episode_return
        if group is not None:
            info["group_reward"], info["group_metrics"] = group[0], dict(group[1])
        return tuple(self._tokens), reward, terminated, truncated, info

    async def _step(self, tokens: list[int], sampler_stop: str) -> StepResult:
        assert self.env is not None
        return await self.env.step(tokens, extra={"stop_reason": sampler_stop})  # type: ignore[typeddict-item]

    async def _group_reward(self, last: StepResult) -> tuple[float, Metrics] | None:
        """The builder's ``compute_group_rewards`` for this episode, when the group is this env alone."""
        made = self._made
        if not isinstance(made, EnvGroupBuilder) or len(self._group) != 1:
            return None
        if type(made).compute_group_rewards is EnvGroupBuilder.compute_group_rewards:
            return None
        trajectory = Trajectory(
            transitions=list(self._transitions),
            final_ob=last.next_observation,
            stop_reason=stop_reason_of(last.metrics),
        )
        [(reward, metrics)] = await made.compute_group_rewards([trajectory], self._group)
        return float(reward), metrics

    def _validate(self, action: Any) -> list[int]:
        try:
            tokens = [int(t) for t in np.asarray(action, dtype=np.int64).reshape(-1)]
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"an action is a sequence of token ids, got {type(action).__name__}: {e}"
            ) from None
        n = self.vocab_size
        bad = next((t for t in tokens if not 0 <= t < n), None)
        if bad is not None:
            raise ValueError(f"action token id {bad} is outside the vocabulary [0, {n})")
        return tokens

    def render(self) -> str | None:  # type: ignore[override]
        """The decoded conversation so far (``render_mode="ansi"``); None for other modes."""
        if self.render_mode != "ansi":
            return None
        text = decode(self.tokenizer, self._tokens)
        if self.end is not None:
            reward = self.end.episode_return
            text += f"\n[episode over after {self.turn} turns: {self.end.stop_reason}, return {reward:g}]"
        return text

    def close(self) -> None:
        """Clean up the current group and stop the portal thread. Idempotent."""
        if self._portal is not None:
            try:
                self._portal.call(self._cleanup)
            finally:
                self._portal_cm = self._portal = None
                if self._finalizer is not None:
                    self._finalizer()  # stops the portal thread (once)
                    self._finalizer = None
        super().close()

    @property
    def episode_tokens(self) -> list[int]:
        """The current observation (or, after the end, the whole transcript) as token ids."""
        return list(self._tokens)


def _stop_portal(cm: contextlib.AbstractContextManager[BlockingPortal]) -> None:
    with contextlib.suppress(Exception):
        cm.__exit__(None, None, None)
