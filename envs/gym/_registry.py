"""The TurnGym gymnasium ids, registered lazily, found by name through Python entry points.

An installed package declares its ids in the entry-point group ``turngym.envs`` (see
:data:`ENTRY_POINT_GROUP`): the entry's name is the gymnasium id, its value the ``module:function``
*source* (called with the id's keyword arguments, it returns an env builder, dataset or factory)::

    [project.entry-points."turngym.envs"]
    "myenv/Echo-v0" = "my_env:echo_source"

So ``pip install my-env`` makes ``myenv/Echo-v0`` usable in every CLI (``envs.check``,
``envs.eval``, ``envs.play``, ``envs.train``, ``envs.list``) and in ``gymnasium.make`` once :mod:`envs.gym` is
imported, without importing ``my_env`` itself. TurnGym's own ids are declared the same way in its
``pyproject.toml``; :data:`ENTRIES` keeps their descriptions, and stands in for the entry points
when TurnGym runs from a checkout whose installed metadata predates them.

Registering costs nothing: every id points at the string entry point ``envs.gym._registry:make_env``
with the id's *source* in its kwargs, so an env package is imported only when ``gymnasium.make``
is called; an included id is registered only when its package is present
(``importlib.util.find_spec``, no import).

Keyword arguments of ``gymnasium.make`` besides ``render_mode`` and ``max_tokens`` go to the source function
(e.g. ``gymnasium.make("turngym/TwentyQuestions-v0", candidates=8)``). :func:`env_source`
gives the same source without gymnasium (the conformance checker and the fuzz bench use it).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from envs.gym._adapter import EnvSource, TokenEnv, resolve_builder

NAMESPACE = "turngym"
"""Namespace of every id included with TurnGym."""
ENTRY_POINT_GROUP = "turngym.envs"
"""The entry-point group an env package declares its ids in (name: id, value: ``module:function``)."""
INCLUDED = "turngym"
"""The :attr:`EnvEntry.package` of the ids included with TurnGym."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnvEntry:
    """One TurnGym id."""

    id: str
    """The gymnasium id, ``turngym/<Name>-v<k>``."""
    source: str
    """``module:function`` returning the env source (builder, dataset or factory) for a config."""
    requires: str
    """The module that must exist for the id to be registered."""
    description: str
    """One line about the env."""
    nondeterministic: bool = False
    """Same seed and actions may give different ``info`` (e.g. judge latency and cache hits);
    gymnasium's ``check_env`` then skips its step-determinism check."""
    package: str = INCLUDED
    """The distribution that declares the id (:data:`INCLUDED` for TurnGym's own)."""


ENTRIES: tuple[EnvEntry, ...] = (
    EnvEntry(
        "turngym/TwentyQuestions-v0",
        "envs.gym._registry:twenty_questions_source",
        "envs.twenty_questions",
        "Twenty Questions against the knowledge-base answerer (offline, deterministic)",
    ),
    EnvEntry(
        "turngym/Math-v0",
        "envs.gym._registry:math_source",
        "envs.math",
        "single-turn generated arithmetic / algebra problems, graded answer in \\boxed{}",
    ),
    EnvEntry(
        "turngym/MathMultiTurn-v0",
        "envs.gym._registry:math_multi_turn_source",
        "envs.math",
        "math with feedback after a wrong answer and further attempts",
    ),
    EnvEntry(
        "turngym/MathCalculator-v0",
        "envs.gym._registry:math_calculator_source",
        "envs.math",
        "math with a calculator tool",
    ),
    EnvEntry(
        "turngym/MathPython-v0",
        "envs.gym._registry:math_python_source",
        "envs.code",
        "math with a sandboxed Python tool (run_python: stdout/stderr come back as a tool message)",
    ),
    EnvEntry(
        "turngym/Judge-v0",
        "envs.gym._registry:judge_source",
        "envs.judge",
        "rubric-judged chat tasks; the embedded SmolLM2 judges by default (offline)",
        nondeterministic=True,  # step metrics carry judge/latency_s and judge/cache_hit
    ),
    EnvEntry(
        "turngym/CookbookTwentyQuestions-v0",
        "envs.gym._registry:cookbook_twenty_questions_source",
        "tinker_cookbook.recipes.multiplayer_rl.twenty_questions.env",
        "tinker-cookbook's own Twenty Questions env with a scripted (offline) answerer",
    ),
)
"""Every id TurnGym knows, registered or not (see :data:`ENV_IDS`)."""

ENV_IDS: list[str] = []
"""The ids registered in this process (those whose env package is present)."""

_INSTALLED: list[EnvEntry] = []


def _from_entry_points() -> list[EnvEntry]:
    """The ids of the installed ``turngym.envs`` entry points that :data:`ENTRIES` does not hold
    (a bad name or a clash with an included id is skipped with a warning)."""
    from gymnasium.envs.registration import parse_env_id

    included = {e.id: e for e in ENTRIES}
    found: list[EnvEntry] = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        package = ep.dist.name if ep.dist is not None else "?"
        if ep.name in included:
            if ep.value != included[ep.name].source:
                logger.warning("%s: id %r is TurnGym's own; the entry point is ignored", package, ep.name)
            continue
        if ":" not in ep.value:
            logger.warning("%s: entry point %r: expected module:function, got %r", package, ep.name, ep.value)
            continue
        try:
            parse_env_id(ep.name)
        except Exception as error:
            logger.warning("%s: entry point %r is not a gymnasium id (%s)", package, ep.name, error)
            continue
        if any(e.id == ep.name for e in found):
            logger.warning("%s: id %r is declared twice; the first is kept", package, ep.name)
            continue
        found.append(EnvEntry(ep.name, ep.value, ep.module, "", package=package))
    return found


def installed_entries(*, refresh: bool = False) -> list[EnvEntry]:
    """Every id available here: the included ones whose package is present, then those the installed
    packages declare in :data:`ENTRY_POINT_GROUP` (read once; ``refresh`` reads them again)."""
    if refresh or not _INSTALLED:
        _INSTALLED[:] = [e for e in ENTRIES if _present(e.requires)] + _from_entry_points()
    return list(_INSTALLED)


def _present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def register_envs() -> list[str]:
    """Register every available id (included or declared by an installed package) with gymnasium
    (idempotent); return them."""
    for entry in installed_entries():
        if entry.id not in gym.registry:
            gym.register(
                id=entry.id,
                entry_point="envs.gym._registry:make_env",
                nondeterministic=entry.nondeterministic,
                kwargs={"source": entry.source},
            )
        if entry.id not in ENV_IDS:
            ENV_IDS.append(entry.id)
    return list(ENV_IDS)


def _entry(env_id: str) -> EnvEntry:
    for entry in installed_entries():
        if entry.id == env_id:
            return entry
    known = ", ".join(e.id for e in installed_entries())
    raise KeyError(f"unknown env id {env_id!r}; installed: {known}")


def describe(entry: EnvEntry) -> str:
    """One line about ``entry``: its description, else the first line of its source's docstring
    (imports the source's module)."""
    if entry.description:
        return entry.description
    try:
        doc = (_load(entry.source).__doc__ or "").strip()
    except Exception as error:
        return f"(cannot import {entry.source}: {type(error).__name__}: {error})"
    return doc.splitlines()[0] if doc else ""


def _load(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def env_source(env_id: str, **config: Any) -> EnvSource:
    """The env source behind ``env_id`` (a builder, dataset or factory), for ``config``; also
    another framework's env through its adapter (``textarena:<GameId>``, ``openenv:<server url>``,
    ``verifiers:<name>``, see :mod:`envs.interop`)."""
    if env_id.startswith("textarena:"):
        from envs.interop.textarena import textarena_source

        return textarena_source(env_id, **config)
    if env_id.startswith("openenv:"):
        from envs.interop.openenv import openenv_source

        return openenv_source(env_id, **config)
    if env_id.startswith("verifiers:"):
        from envs.interop.verifiers import verifiers_source

        return verifiers_source(env_id, **config)
    return _load(_entry(env_id).source)(**config)


def make_env(
    source: str, render_mode: str | None = None, max_tokens: int | None = None, **config: Any
) -> TokenEnv:
    """The gymnasium entry point of every TurnGym id: a :class:`TokenEnv` over ``source(**config)``
    (``max_tokens``: the sampler's limit, see :class:`TokenEnv`)."""
    return TokenEnv(_load(source)(**config), render_mode=render_mode, max_tokens=max_tokens)


class LazyDatasetFactory:
    """An env factory over a dataset built on first use (awaiting an ``RLDatasetBuilder``).

    Called with an episode seed, returns the group builder the seed picks (see
    :func:`envs.gym._adapter.resolve_builder`). Picklable when the dataset builder is.
    """

    def __init__(self, dataset_builder: Any, split: str = "train"):
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        self.dataset_builder = dataset_builder
        self.split = split
        self._dataset: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"dataset_builder": self.dataset_builder, "split": self.split, "_dataset": None}

    async def __call__(self, seed: int) -> Any:
        """The builder for episode ``seed``."""
        if self._dataset is None:
            train, test = await self.dataset_builder()
            dataset = train if self.split == "train" else test
            if dataset is None:
                raise ValueError(f"{type(self.dataset_builder).__name__} has no {self.split} split")
            self._dataset = dataset
        return await resolve_builder(self._dataset, seed)


# --- sources -----------------------------------------------------------------------------
def twenty_questions_source(
    split: str = "train",
    group_size: int = 1,
    model_name_for_tokenizer: str | None = None,
    renderer_name: str | None = None,
    **rules: Any,
) -> EnvSource:
    """Twenty Questions with the KB answerer; ``rules`` are ``TwentyQuestionsConfig`` fields
    (``max_questions``, ``candidates``, ``win_reward``...); the player's tokenizer and renderer
    default to the embedded SmolLM2's."""
    from backend.model import SMOLLM2
    from envs.twenty_questions import TwentyQuestionsConfig, TwentyQuestionsDatasetBuilder

    builder = TwentyQuestionsDatasetBuilder(
        batch_size=1,
        group_size=group_size,
        test_group_size=group_size,
        env=TwentyQuestionsConfig(**rules),
        model_name_for_tokenizer=model_name_for_tokenizer or SMOLLM2,
        renderer_name=renderer_name,
    )
    return LazyDatasetFactory(builder, split)


def _math(preset: str, split: str, group_size: int, fields: dict[str, Any]) -> EnvSource:
    from envs.math import MathDatasetBuilder, MathEnvConfig

    fields.setdefault("n_train", 256)
    fields.setdefault("n_test", 64)
    env = fields.pop("env", None) or MathEnvConfig.preset(preset)
    builder = MathDatasetBuilder(env=env, batch_size=1, group_size=group_size, **fields)
    return LazyDatasetFactory(builder, split)


def math_source(split: str = "train", group_size: int = 1, **fields: Any) -> EnvSource:
    """Single-turn math; ``fields`` are ``envs.math.MathDatasetBuilder`` fields (``levels``...)."""
    return _math("single", split, group_size, fields)


def math_multi_turn_source(split: str = "train", group_size: int = 1, **fields: Any) -> EnvSource:
    """Math with feedback and further attempts (``MathDatasetBuilder`` preset ``feedback``)."""
    return _math("feedback", split, group_size, fields)


def math_calculator_source(split: str = "train", group_size: int = 1, **fields: Any) -> EnvSource:
    """Math with a calculator tool (``MathDatasetBuilder`` preset ``calculator``)."""
    return _math("calculator", split, group_size, fields)


def math_python_source(split: str = "train", group_size: int = 1, **fields: Any) -> EnvSource:
    """Math with a sandboxed Python tool; ``fields`` are ``envs.code.CodeDatasetBuilder`` fields
    (``levels``, ``env``...) or ``envs.code.CodeEnvConfig`` fields (``max_tool_calls``, ``sandbox``...)."""
    import chz

    from envs.code import CodeDatasetBuilder, CodeEnvConfig

    fields.setdefault("n_train", 256)
    fields.setdefault("n_test", 64)
    game = {k: fields.pop(k) for k in list(fields) if k in chz.asdict(CodeEnvConfig())}  # env.* fields
    env = fields.pop("env", None) or CodeEnvConfig(**game)
    builder = CodeDatasetBuilder(env=env, batch_size=1, group_size=group_size, **fields)
    return LazyDatasetFactory(builder, split)


def judge_source(
    completer: str | None = None, split: str = "train", group_size: int = 1, **fields: Any
) -> EnvSource:
    """Rubric-judged tasks; the judge is ``completer`` (a completer spec, ``envs.judge``; default:
    ``envs.judge.SMALL_LOCAL_JUDGE``, the embedded SmolLM2, offline). Checks and tests that want
    an instant judge import ``envs.judge.testing`` (the scripted test judges) and pass e.g.
    ``completer="scripted:score:7"``; nothing here imports a test double. ``fields`` are
    ``envs.judge.JudgeDatasetBuilder`` or ``envs.judge.JudgeEnvConfig`` fields."""
    import chz

    from envs.judge import SMALL_LOCAL_JUDGE, JudgeConfig, JudgeDatasetBuilder, JudgeEnvConfig

    if split == "test":
        fields.setdefault("n_test", 2)
    game = {k: fields.pop(k) for k in list(fields) if k in chz.asdict(JudgeEnvConfig())}  # env.* fields
    builder = JudgeDatasetBuilder(
        env=fields.pop("env", None) or JudgeEnvConfig(**game),
        judge=SMALL_LOCAL_JUDGE() if completer is None else JudgeConfig(completer=completer),
        batch_size=1,
        group_size=group_size,
        test_group_size=group_size,
        **fields,
    )
    return LazyDatasetFactory(builder, split)


def cookbook_twenty_questions_source(group_size: int = 1) -> EnvSource:
    """tinker-cookbook's Twenty Questions (:func:`envs.testing.cookbook_twenty_questions`)."""
    from functools import partial

    from envs.gym._cookbook import cookbook_twenty_questions

    return partial(cookbook_twenty_questions, group_size=group_size)
