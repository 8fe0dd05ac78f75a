"""The picklable description of a judge (or a simulated user): :class:`JudgeConfig`.

Nothing here does I/O or imports a backend: a config names its completer by a spec string,
resolved by :func:`envs.judge.registry.make_completer` when a judge is first used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class JudgeConfig:
    """A picklable description of a guarded completer (a judge, or a simulated user).

    ``completer`` is a spec ``"<kind>:<argument>"``: ``"local:HuggingFaceTB/SmolLM2-135M-Instruct"``,
    ``"tinker:Qwen/Qwen3-8B"``, ``"openai:gpt-4o-mini"`` (with ``base_url``), a name given to
    :func:`~envs.judge.registry.register_completer`, or in tests ``"scripted:score:7"`` (after
    ``import envs.judge.testing``).
    """

    completer: str
    """Completer spec, resolved by :func:`~envs.judge.registry.make_completer`."""
    judge_id: str | None = None
    """Cache identity (defaults to ``completer``). Change it when the judge model changes."""
    max_concurrency: int = 16
    """Concurrent calls in flight to this judge (one limiter per judge)."""
    timeout_s: float = 60.0
    """Deadline of one call, in seconds."""
    max_attempts: int = 3
    """Calls before falling back (1 = no retry)."""
    backoff_s: float = 0.25
    """Sleep before the first retry; doubled each retry."""
    backoff_max_s: float = 8.0
    """Cap of the backoff sleep."""
    fallback_reward: float = 0.0
    """Value of a call whose attempts all failed."""
    cache: bool = True
    """Cache parsed results in memory (and on disk with ``cache_path``)."""
    cache_path: str | None = None
    """SQLite file of a persistent cache shared across runs and processes (None: memory only)."""
    max_tokens: int = 256
    """Sampling budget of one reply (model-backed completers)."""
    temperature: float = 0.0
    """Sampling temperature (model-backed completers)."""
    renderer_name: str | None = None
    """Renderer of a ``local``/``tinker`` judge (default: the model's recommended one)."""
    base_url: str | None = None
    """Endpoint of an ``openai`` judge (e.g. ``http://localhost:8000/v1``), or a Tinker URL."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the ``openai`` judge's API key (read lazily)."""
    samples: int = 1
    """Judge replies per verdict, sampled concurrently; the parsed values are averaged
    (self-consistency; use with ``temperature`` > 0). Failed samples are counted, the verdict
    needs one parsed sample."""
    reply_prefix: str = ""
    """``local``/``tinker`` judges: prefill the reply with this text (e.g. ``"Score:"``), so a small
    model only writes the score (:class:`PrefilledSamplingCompleter`). Other kinds ignore it."""

    def __post_init__(self) -> None:
        if not self.completer or not isinstance(self.completer, str):
            raise ValueError(f"JudgeConfig.completer must be a non-empty spec string, got {self.completer!r}")
        if self.max_concurrency < 1:
            raise ValueError(f"JudgeConfig.max_concurrency must be >= 1, got {self.max_concurrency}")
        if not self.timeout_s > 0:
            raise ValueError(f"JudgeConfig.timeout_s must be > 0, got {self.timeout_s}")
        if self.max_attempts < 1:
            raise ValueError(f"JudgeConfig.max_attempts must be >= 1, got {self.max_attempts}")
        if self.backoff_s < 0 or self.backoff_max_s < 0:
            raise ValueError(f"JudgeConfig backoff must be >= 0, got {self.backoff_s}/{self.backoff_max_s}")
        if not math.isfinite(self.fallback_reward):
            raise ValueError(f"JudgeConfig.fallback_reward must be finite, got {self.fallback_reward}")
        if self.samples < 1:
            raise ValueError(f"JudgeConfig.samples must be >= 1, got {self.samples}")
        if self.max_tokens < 1:
            raise ValueError(f"JudgeConfig.max_tokens must be >= 1, got {self.max_tokens}")

    @property
    def id(self) -> str:
        """The judge's identity in cache keys."""
        return self.judge_id or self.completer

    def replace(self, **changes: Any) -> JudgeConfig:
        """A copy with some fields changed (validated)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        unknown = set(changes) - set(values)
        if unknown:
            raise ValueError(f"unknown JudgeConfig field(s): {', '.join(sorted(unknown))}")
        return JudgeConfig(**{**values, **changes})
