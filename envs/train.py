"""``python -m envs.train <id | module:attr> [key=value ...]``: RL on any env, by id.

The env is what ``python -m envs.eval`` and ``python -m envs.check`` take: an installed id
(``python -m envs.list``: ``turngym/Math-v0``, ids of installed packages), another framework's
env through its adapter (``textarena:<GameId>``, ``openenv:<server url>``, ``verifiers:<name>``)
or ``module:attribute`` naming a builder, dataset (builder) or env factory. ``env_args`` (a JSON
object) goes to an id's source, as in ``envs.eval``.

Every key of :class:`training.Config` works (``backend``, ``model_name``, ``learning_rate``,
``max_steps``, ``eval_every``, ``rollout_executor``, ``log_path`` ...; ``--help`` lists them),
plus the data keys below:

- **Train groups**: ``batch_size`` groups per step, each one task (seed
  ``(seed + 1) * TRAIN_SEED_BASE + i``) played ``group_size`` times. An id's source makes the
  group itself (its ``group_size``); a seated (multi-player) id gives a self-play group of
  ``group_size`` games, every seat the policy and every seat training, each centred within its
  role (what ``envs.interop.textarena_train`` does). A ``module:attr`` builder or dataset
  (builder) keeps its own groups; a factory that returns a single env is called ``group_size``
  times per task.
- **Held-out**: ``eval_tasks`` tasks on seeds ``eval_seed, eval_seed + 1, ...`` (apart from the
  train seeds), played once each at ``eval_temperature``; an id whose source has a ``split``
  (TurnGym's datasets) and a ``module:attr`` dataset builder play their test split. A seated
  TextArena game plays the policy on seat 0 against random players (tagged ``vs_random``), as
  ``envs.interop.textarena_train`` does.
- **No warm start**: there is no scripted player for an arbitrary env, so
  ``warm_start.episodes`` stays 0 (the env's own recipe, e.g. ``envs.interop.textarena_train``,
  has one where a scripted player exists).

A bad id (unknown, a game or env that needs a download, an OpenEnv server that does not answer,
a bad ``env_args``) fails before anything is written: one line, exit 2. The run folder (``log_path``, default
``runs/train/<env>``) is the one every train CLI writes; rerunning resumes.

Examples::

    python -m envs.train textarena:GuessTheNumber-v0 max_steps=8
    python -m envs.train verifiers:arith-retry group_size=4 learning_rate=5e-4
    python -m envs.train turngym/Math-v0 backend=tinker model_name=meta-llama/Llama-3.2-1B
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import chz
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, RLDataset, RLDatasetBuilder

import training
from backend.model import SMOLLM2
from envs.datasets import GroupDataset
from envs.eval import folder_name, parse_env_args

__all__ = ["TRAIN_SEED_BASE", "EnvDatasetBuilder", "EnvTrainConfig", "main"]

TRAIN_SEED_BASE = 100_000
"""Train seeds are ``(seed + 1) * TRAIN_SEED_BASE + i``; held-out seeds ``eval_seed + i`` stay below."""
ADAPTER_PREFIXES = ("textarena:", "openenv:", "verifiers:")
"""Ids of other frameworks' envs (their group builders take the policy's renderer and tokenizer)."""


def _takes(func: Any, name: str, *, through_kwargs: bool) -> bool:
    """Whether ``func`` takes the keyword ``name`` (by name, or through ``**kwargs`` when
    ``through_kwargs``: TurnGym's own sources hand those to a builder that has the field)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or (through_kwargs and p.kind is p.VAR_KEYWORD) for p in params)


@dataclass(frozen=True)
class _Source:
    """How to open one env id: its source function and the keywords it gets."""

    env: str
    args: dict[str, Any]
    renderer_name: str | None
    model_name: str

    def _function(self) -> tuple[Any, bool]:
        """An installed id's source function, and whether it is TurnGym's own."""
        from envs.gym._registry import INCLUDED, _entry, _load

        entry = _entry(self.env)
        return _load(entry.source), entry.package == INCLUDED

    def open(self, *, group_size: int, held_out: bool) -> Any:
        """The env source (builder, dataset or factory) of the train or held-out split."""
        from envs.check import TargetError, load_target
        from envs.gym import env_source

        if ":" in self.env and not self.env.startswith(ADAPTER_PREFIXES):
            if self.args:
                raise TargetError("env_args applies to an id only, not to module:attr")
            dataset_builder = _dataset_builder_at(self.env)
            if dataset_builder is not None:  # its own splits: the held-out tasks are its test split
                from envs.gym._registry import LazyDatasetFactory

                return LazyDatasetFactory(dataset_builder, "test" if held_out else "train")
            return load_target(self.env)
        kwargs = dict(self.args)
        if self.env.startswith(ADAPTER_PREFIXES):  # every adapter's group takes these
            kwargs.update(group_size=group_size)
            kwargs.setdefault("renderer_name", self.renderer_name)
            kwargs.setdefault("model_name_for_tokenizer", self.model_name)
            if held_out and self.env.startswith("textarena:") and _seated_textarena(self.env):
                kwargs.update(opponent="random", tags=("vs_random",))
        else:  # an installed id: what its source function takes
            function, own = self._function()
            wanted = {
                "group_size": group_size,
                "split": "test" if held_out else "train",
                "renderer_name": self.renderer_name,
                "model_name_for_tokenizer": self.model_name,
            }
            for name, value in wanted.items():
                if value is not None and name not in kwargs and _takes(function, name, through_kwargs=own):
                    kwargs[name] = value
        return env_source(self.env, **kwargs)

    def check(self) -> None:
        """Fail now, in one line, on an id that cannot run here (unknown, needs a download,
        bad arguments): open it and resolve its first task's builder (makes no env)."""
        import contextlib
        import io

        from envs.gym import resolve_builder

        # a game that needs a download says so in our one line, not in its downloader's messages
        # (nltk prints them wherever the game is first built: opening the id, or make_game below)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            source = self.open(group_size=1, held_out=False)
            if not isinstance(source, Env):
                _run_sync(resolve_builder, source, 0)
            if self.env.startswith("textarena:"):
                from envs.interop.textarena import game_id, make_game

                make_game(game_id(self.env))
        if self.env.startswith("openenv:"):
            _probe_openenv(self.env)


def _probe_openenv(env: str) -> None:
    """An OpenEnv server that does not answer its ``/health`` fails here, not mid-run."""
    import urllib.request

    from envs.interop.openenv import OpenEnvError, server_url

    url = server_url(env).replace("ws://", "http://", 1).replace("wss://", "https://", 1)
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=10.0):
            pass
    except OSError as error:
        reason = getattr(error, "reason", None) or error
        raise OpenEnvError(
            f"{env} does not answer at {url}/health ({reason}); start the server first"
        ) from None


def _run_sync(func: Any, *args: Any) -> Any:
    """``anyio.run(func, *args)``, also from inside a running event loop (the training loop
    checks the data again there), in a thread of its own."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    import anyio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(func, *args)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, func, *args).result()


def _dataset_builder_at(spec: str) -> RLDatasetBuilder | None:
    """The ``RLDatasetBuilder`` (instance, or class made with no arguments) that ``module:attr``
    names; None for anything else, or anything that does not import (``load_target`` then says
    why in one line)."""
    import pkgutil

    try:
        obj = pkgutil.resolve_name(spec)
        if inspect.isclass(obj) and issubclass(obj, RLDatasetBuilder):
            obj = obj()
    except Exception:
        return None
    return obj if isinstance(obj, RLDatasetBuilder) else None


def _seated_textarena(env: str) -> bool:
    from envs.interop.textarena import players_of

    return (players_of(env) or 1) > 1


@dataclass(frozen=True)
class _EnvFactoryGroup(EnvGroupBuilder):
    """A group of ``group_size`` envs from a factory that returns one env per call (all with
    episode seed ``seed``), made when the group is played."""

    factory: Any
    seed: int
    group_size: int

    async def make_envs(self) -> Sequence[Env]:
        from envs.gym import resolve_builder

        envs: list[Env] = []
        for _ in range(self.group_size):
            made = await resolve_builder(self.factory, self.seed)
            if not isinstance(made, Env):
                raise TypeError(f"the env factory returned a {type(made).__name__}, then an Env")
            envs.append(made)
        return envs


class _Builders(GroupDataset):
    """Resolved group builders in batches of ``batch_size``."""

    def __init__(self, builders: list[EnvGroupBuilder], batch_size: int):
        super().__init__(batch_size, len(builders))
        self.builders = builders

    def group(self, index: int) -> EnvGroupBuilder:
        return self.builders[index]


async def _resolve(source: Any, seeds: list[int], group_size: int) -> list[EnvGroupBuilder]:
    """The group builder of each seed; for a factory of single envs, groups that call it
    ``group_size`` times when played."""
    from envs.gym import resolve_builder

    if isinstance(source, Env):
        raise TypeError("an Env is single-use; point at its EnvGroupBuilder or a factory returning envs")
    first = await resolve_builder(source, seeds[0])
    if isinstance(first, Env):  # never started: nothing to release
        return [_EnvFactoryGroup(source, seed, group_size) for seed in seeds]
    return [first, *[await _builder(source, seed) for seed in seeds[1:]]]


async def _builder(source: Any, seed: int) -> EnvGroupBuilder:
    from envs.gym import resolve_builder

    made = await resolve_builder(source, seed)
    if isinstance(made, Env):
        raise TypeError(f"the env source gave a builder for one seed and an Env for seed {seed}")
    return made


@chz.chz
class EnvDatasetBuilder(RLDatasetBuilder):
    """Train groups and held-out tasks of one env id (see the module docstring)."""

    env: str
    """Installed env id, adapter id (``textarena:``, ``openenv:``, ``verifiers:``) or ``module:attr``."""
    env_args: str = "{}"
    """JSON object of keyword arguments for the id's source."""
    batch_size: int = 4
    group_size: int = 8
    num_batches: int = 16
    eval_tasks: int = 32
    eval_seed: int = 0
    seed: int = 0
    renderer_name: str | None = None
    model_name_for_tokenizer: str = SMOLLM2

    def source(self) -> _Source:
        """How the id is opened."""
        return _Source(
            self.env, parse_env_args(self.env_args), self.renderer_name, self.model_name_for_tokenizer
        )

    async def __call__(self) -> tuple[RLDataset, RLDataset]:
        import anyio

        source = self.source()
        n = self.batch_size * self.num_batches
        train_seeds = [(self.seed + 1) * TRAIN_SEED_BASE + i for i in range(n)]
        held_out = [self.eval_seed + i for i in range(self.eval_tasks)]

        def opened(held: bool) -> Any:
            return source.open(group_size=1 if held else self.group_size, held_out=held)

        train = await _resolve(await anyio.to_thread.run_sync(opened, False), train_seeds, self.group_size)
        test = await _resolve(await anyio.to_thread.run_sync(opened, True), held_out, 1)
        return _Builders(train, self.batch_size), _Builders(test, max(1, self.eval_tasks))


@chz.chz
class EnvTrainConfig(training.Config):
    """:class:`training.Config` over any env id, with its data keys."""

    env: str
    """Installed env id (``turngym/Math-v0``), adapter id (``textarena:Wordle-v0``,
    ``openenv:http://host:port``, ``verifiers:<name>``) or ``module:attr``."""
    env_args: str = "{}"
    """JSON object of keyword arguments for the id's source (e.g. ``{"max_turns": 8}``)."""
    log_path: str = "runs/train"
    """Folder of every artifact (the command line's default: ``runs/train/<env>``)."""
    batch_size: int = 4
    """Groups (tasks) per training step."""
    group_size: int = 8
    """Episodes per group (one task)."""
    eval_tasks: int = 32
    """Held-out tasks (seeds ``eval_seed`` ...), played once each."""
    eval_seed: int = 0
    """First held-out seed."""

    @chz.validate
    def _check_data_keys(self) -> None:
        if self.batch_size < 1 or self.group_size < 1 or self.eval_tasks < 1:
            raise ValueError("batch_size, group_size and eval_tasks must be >= 1")
        if self.warm_start.episodes:
            raise ValueError(
                "envs.train has no scripted player for a warm start (warm_start.episodes must be 0); "
                "an env's own recipe has one where a scripted player exists"
            )
        parse_env_args(self.env_args)

    def check_data(self) -> None:
        """Resolve the env id (unknown, needing a download, bad arguments: one line)."""
        from envs.gym import register_envs

        register_envs()
        try:
            self.dataset_builder().source().check()
        except (KeyError, TypeError, RuntimeError) as error:  # KeyError's text is quoted
            raise ValueError(error.args[0] if error.args else type(error).__name__) from None

    def dataset_builder(self) -> EnvDatasetBuilder:
        return EnvDatasetBuilder(
            env=self.env,
            env_args=self.env_args,
            batch_size=self.batch_size,
            group_size=self.group_size,
            num_batches=max(1, self.max_steps),
            eval_tasks=self.eval_tasks,
            eval_seed=self.eval_seed,
            seed=self.seed,
            renderer_name=self.renderer_name,
            model_name_for_tokenizer=self.model_name,
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``[<env>] key=value ...`` and train; returns the exit status (2: bad command line or
    env, one line on stderr, nothing written)."""
    args = list(sys.argv[1:] if argv is None else argv)
    prog = "envs.train"
    if not args:
        print(
            f"usage: python -m {prog} <id | module:attr> [key=value ...] (--help lists the keys)",
            file=sys.stderr,
        )
        return 2
    if "=" not in args[0] and args[0] not in ("-h", "--help", "help"):
        args = [f"env={args[0]}", *args[1:]]
    env = next((a.partition("=")[2] for a in args if a.startswith("env=")), "")
    if env and not any(a.startswith("log_path=") for a in args):
        args.append(f"log_path=runs/train/{folder_name(env)}")
    return training.run_cli(EnvTrainConfig, args, prog=prog)


if __name__ == "__main__":
    raise SystemExit(main())
