"""A text-level view of a :class:`~envs.gym.TokenEnv`: actions and observations are strings.

An action string is tokenised with the env's tokenizer (no special tokens added) and the
end-of-turn of the current stop condition is appended (the first stop token, or the first stop
string tokenised), so the env sees what a model that stopped cleanly would have produced. When
the token env has ``max_tokens``, a longer action is cut to ``max_tokens`` tokens and sent without
end-of-turn, as a sampler that hit its limit returns it (the env sees a max-tokens stop).
"""

from __future__ import annotations

import string
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.gym._adapter import TokenEnv, TokenObs, decode

_SAMPLE_ALPHABET = string.ascii_letters + string.digits + " ?!.,:'"


class UnicodeText(spaces.Space[str]):
    """Strings of any characters with ``min_length <= len <= max_length``.

    ``gymnasium.spaces.Text`` needs a finite charset; decoded conversations can hold any
    character. Samples use a small printable alphabet.
    """

    def __init__(
        self, max_length: int, *, min_length: int = 0, seed: int | np.random.Generator | None = None
    ):
        if not 0 <= min_length <= max_length:
            raise ValueError(f"need 0 <= min_length <= max_length, got {min_length}, {max_length}")
        self.min_length = min_length
        self.max_length = max_length
        super().__init__(dtype=str, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Strings of any length do not flatten to a fixed-size array."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string from a small printable alphabet (``mask``/``probability`` unsupported)."""
        if mask is not None or probability is not None:
            raise ValueError("UnicodeText.sample supports neither mask nor probability")
        hi = min(self.max_length, max(self.min_length, 32))
        length = int(self.np_random.integers(self.min_length, hi + 1))
        chars = self.np_random.choice(list(_SAMPLE_ALPHABET), size=length)
        return "".join(str(c) for c in chars)

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a string of an allowed length."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, UnicodeText)
            and other.min_length == self.min_length
            and other.max_length == self.max_length
        )


class TextEnv(gym.Wrapper[str, str, Any, Any], gym.utils.RecordConstructorArgs):
    """Strings in, strings out, over a token-level :class:`TokenEnv`.

    - Observation: the decoded observation (the conversation so far, with the chat template).
    - Action: the assistant's reply as text; tokenised and terminated with end-of-turn.
    - ``info["action_tokens"]`` holds the tokens the env received; ``info["new_text"]`` the
      decoded tokens the env appended after them (the new messages and the next header).

    Args:
        env: a :class:`TokenEnv` (possibly wrapped, e.g. by ``gymnasium.make``).
        max_length: longest observation / action string the spaces admit.
    """

    def __init__(self, env: gym.Env[TokenObs, TokenObs], max_length: int = 1_000_000):
        gym.utils.RecordConstructorArgs.__init__(self, max_length=max_length)  # so env.spec can remake it
        gym.Wrapper.__init__(self, cast(Any, env))
        if not isinstance(env.unwrapped, TokenEnv):
            raise TypeError(f"TextEnv wraps a TokenEnv, got {type(env.unwrapped).__name__}")
        self.observation_space = UnicodeText(max_length)
        self.action_space = UnicodeText(max_length)
        self._prev: list[int] = []

    @property
    def token_env(self) -> TokenEnv:
        """The underlying :class:`TokenEnv`."""
        inner = self.env.unwrapped
        assert isinstance(inner, TokenEnv)
        return inner

    def encode_action(self, text: str) -> list[int]:
        """The tokens of ``text`` followed by the end-of-turn of the current stop condition (cut
        to ``max_tokens`` without end-of-turn when longer)."""
        tokenizer = self.token_env.tokenizer
        tokens = list(tokenizer.encode(text, add_special_tokens=False))
        limit = self.token_env.max_tokens
        if limit is not None and len(tokens) >= limit:
            return tokens[:limit]
        stop = self.token_env.stop_condition
        if stop:
            first = stop[0]
            tokens += (
                [first] if isinstance(first, int) else list(tokenizer.encode(first, add_special_tokens=False))
            )
        return tokens

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode; the observation is the decoded prompt."""
        inner: Any = self.env
        obs, info = inner.reset(seed=seed, options=options)
        self._prev = list(obs)
        return decode(self.token_env.tokenizer, obs), info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:  # type: ignore[override]
        """Send ``action`` (text) as one assistant turn."""
        if not isinstance(action, str):
            raise TypeError(f"a TextEnv action is a str, got {type(action).__name__}")
        tokens = self.encode_action(action)
        inner: Any = self.env
        obs, reward, terminated, truncated, info = inner.step(tuple(tokens))
        tokenizer = self.token_env.tokenizer
        new = list(obs)
        prefix = self._prev + tokens
        added = new[len(prefix) :] if new[: len(prefix)] == prefix else new
        info = {**info, "action_tokens": tokens, "new_text": decode(tokenizer, added)}
        self._prev = new
        return decode(tokenizer, new), reward, terminated, truncated, info
