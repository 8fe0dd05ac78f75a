"""The picklable descriptions of a judge env: :class:`JudgeConfig` (a judge, or a simulated user)
and :class:`JudgeEnvConfig` (the game: tasks, rubrics, reward kind, turns).

Nothing here does I/O or imports a backend (cheap to import: ``python -m envs.judge.train``
exposes both as nested keys and still rejects a bad key in well under a second): a config names
its completer by a spec string, resolved by :func:`envs.judge.registry.make_completer` when a
judge is first used.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

import chz

from backend.model import SMOLLM2  # a constant: backend.model imports no torch

DATA_DIR = Path(__file__).parent / "data"
"""Shipped prompts (``prompts.jsonl``) and rubrics (``rubrics.json``)."""


@dataclass(frozen=True)
class JudgeConfig:
    """A picklable description of a guarded completer (a judge, or a simulated user).

    ``completer`` is a spec ``"<kind>:<argument>"``: ``"local:HuggingFaceTB/SmolLM2-135M-Instruct"``,
    ``"tinker:Qwen/Qwen3-8B"``, ``"openai:gpt-4o-mini"`` (with ``base_url``), ``"rules"``,
    ``"rm:<local:// or tinker:// path>"`` (a learned preference model, :mod:`envs.judge.reward_model`), a name given to
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
    reply_prefix: str | None = None
    """``local``/``tinker`` judges: prefill the reply with this text (e.g. ``"Score: "``), so a small
    model only writes the score (:class:`PrefilledSamplingCompleter`); other kinds ignore it.
    None: no prefill, except in a judge env, which prefills its verdict's own prefix (``"Score: "``
    for rubric grading, ``"Preferred: "`` for pairwise); ``""``: never."""

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


SMALL_LOCAL_JUDGE = functools.partial(
    JudgeConfig,
    completer=f"local:{SMOLLM2}",
    max_tokens=3,
    temperature=1.0,
    samples=4,
    timeout_s=300.0,
    max_attempts=2,
)
"""The default judge of the judge envs: the embedded SmolLM2-135M on the local backend, set up
for a 135M grader on 2 CPU cores. Its reply is prefilled with the verdict's prefix and it writes
at most 3 more tokens; 4 samples at temperature 1 are averaged (its single greedy verdict is
nearly always ``10``); a call may take 300 s (2 attempts, then the fallback reward). A
``functools.partial`` of :class:`JudgeConfig`: call it with fields to change (chz composes
``judge.<field>=...`` keys with it the same way). A real judge needs its own budget, e.g.
``JudgeConfig("openai:gpt-4o-mini")``, or from the command line ``judge=envs.judge.config:JudgeConfig
judge.completer=openai:gpt-4o-mini``."""


class JudgeEnvKind(StrEnum):
    """Which reward a judge dataset uses."""

    RUBRIC = "rubric"
    """Each transcript graded alone against its rubric (reward = normalised score)."""
    PAIRWISE = "pairwise"
    """The group's transcripts compared in pairs (reward = win rate)."""


class OnTruncation(StrEnum):
    """What a judged chat does with a turn cut by ``max_tokens`` (under ``envs.judge.env.DEFAULT_FAULTS``)."""

    JUDGE = "judge"
    """The chat ends there and is judged as it is (keeps the token extension intact)."""
    CONTINUE = "continue"
    """The chat goes on (the simulated user answers); the cut turn is closed with the end-of-turn
    token, so the token history still extends. Useful for small policies that ramble."""


class PairingScheme(StrEnum):
    """Which pairs of a group's responses the judge compares (response ``i`` shown as A, ``j`` as B)."""

    ALL_PAIRS = "all_pairs"
    """Every unordered pair once, lower index as A: G(G-1)/2 comparisons; keeps position bias."""
    BOTH_ORDERS = "both_orders"
    """Every pair in both orders: G(G-1) comparisons; a position bias of the judge cancels exactly."""
    ROUND_ROBIN = "round_robin"
    """Each response meets its next ``rounds`` neighbours on a ring: G*rounds comparisons, each
    response shown as A and as B equally often, so position bias cancels at linear cost."""


VERDICT_PREFIX = {JudgeEnvKind.RUBRIC: "Score: ", JudgeEnvKind.PAIRWISE: "Preferred: "}
"""How a verdict of each kind starts (what a prefilled judge's reply starts with)."""


@chz.chz
class JudgeEnvConfig:
    """What a judged chat is: tasks, rubrics, reward kind, turns (picklable, frozen).

    ``python -m envs.judge.train`` exposes it whole as ``env.*`` keys; the judge itself is a
    :class:`JudgeConfig` beside it (``judge.*``).
    """

    kind: JudgeEnvKind = JudgeEnvKind.RUBRIC
    """``rubric`` (reward = normalised judge score) or ``pairwise`` (reward = win rate in the group)."""
    tasks_path: str = ""
    """JSONL tasks (empty: the shipped ``envs/judge/data/prompts.jsonl``)."""
    rubrics_path: str = ""
    """JSON rubrics (empty: the shipped ``envs/judge/data/rubrics.json``)."""
    multi_turn: bool = False
    """Keep the persona tasks multi-turn, with a simulated user (slower); False: every task is
    one turn."""
    pattern: PairingScheme = PairingScheme.BOTH_ORDERS
    """Pairwise tournament: ``both_orders``, ``all_pairs`` or ``round_robin``."""
    rounds: int = 1
    """Neighbours each answer meets under ``round_robin``."""
    on_truncation: OnTruncation = OnTruncation.JUDGE
    """A turn cut by ``max_tokens``: ``judge`` (the chat ends and is judged) or ``continue``."""
    user: str = ""
    """Completer spec of the simulated user of multi-turn tasks (empty: the judge's, at
    temperature 1, one sample, no cache, no prefill)."""
    user_max_tokens: int = 24
    """Tokens of a simulated-user reply."""

    @chz.validate
    def _check(self) -> None:
        if self.kind not in tuple(JudgeEnvKind):
            raise ValueError(f"kind must be 'rubric' or 'pairwise', got {self.kind!r}")
        if self.pattern not in tuple(PairingScheme):
            raise ValueError(f"pattern must be both_orders, all_pairs or round_robin, got {self.pattern!r}")
        if self.on_truncation not in tuple(OnTruncation):
            raise ValueError(f"on_truncation must be 'judge' or 'continue', got {self.on_truncation!r}")
        if self.rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {self.rounds}")
        if self.user_max_tokens < 1:
            raise ValueError(f"user_max_tokens must be >= 1, got {self.user_max_tokens}")

    @property
    def tasks_file(self) -> Path:
        """The task file (the shipped one when :attr:`tasks_path` is empty)."""
        return Path(self.tasks_path) if self.tasks_path else DATA_DIR / "prompts.jsonl"

    @property
    def rubrics_file(self) -> Path:
        """The rubric file (the shipped one when :attr:`rubrics_path` is empty)."""
        return Path(self.rubrics_path) if self.rubrics_path else DATA_DIR / "rubrics.json"

    def judge_for(self, judge: JudgeConfig) -> JudgeConfig:
        """``judge`` with this env's verdict prefix when its ``reply_prefix`` is None."""
        if judge.reply_prefix is not None:
            return judge
        return judge.replace(reply_prefix=VERDICT_PREFIX[JudgeEnvKind(self.kind)])

    def user_for(self, judge: JudgeConfig) -> JudgeConfig:
        """The simulated user's completer config: :attr:`user` (or the judge's completer) replying
        once, at temperature 1, with no cache and no prefill."""
        return judge.replace(
            completer=self.user or judge.completer,
            judge_id=None,
            cache=False,
            temperature=1.0,
            samples=1,
            max_tokens=self.user_max_tokens,
            reply_prefix="",
        )


@chz.chz
class JudgeData:
    """The data keys of ``python -m envs.judge.train`` (``data.batch_size=4``...): the fields of
    :class:`~envs.judge.JudgeDatasetBuilder` under the same names, with the train command's
    defaults (the command passes them to the builder as they are)."""

    batch_size: int = 2
    """Prompts (groups) per step."""
    group_size: int = 4
    """Answers per prompt (the GRPO group)."""
    n_test: int = 4
    """Prompts held out for evaluation."""
    test_group_size: int = 2
    """Answers per held-out prompt."""
    epochs: int = 1
    """Passes over the training prompts."""

    @chz.validate
    def _check(self) -> None:
        if self.batch_size < 1 or self.group_size < 1 or self.epochs < 1:
            raise ValueError(
                "data.batch_size, data.group_size and data.epochs must be >= 1, "
                f"got {self.batch_size}, {self.group_size}, {self.epochs}"
            )
