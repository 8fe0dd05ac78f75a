"""``python -m envs.check module:Builder`` — the env conformance checker from the command line.

The target is an installed env id (``turngym/Math-v0``, or one an installed package declares in
the ``turngym.envs`` entry-point group; ``python -m envs.list`` lists them) or ``module:attribute`` (the attribute may be
dotted) naming one of:

- an ``EnvGroupBuilder`` instance, or a builder class constructible with no arguments,
- an ``RLDataset`` instance,
- an ``RLDatasetBuilder`` (instance, or chz class with defaults): its training dataset is used,
- an env factory: a callable taking nothing, a ``seed`` int or an ``rng`` ``random.Random``, that
  returns an ``EnvGroupBuilder`` or an ``Env``.

Prints a table (check, result, detail), or JSON with ``--json``; exits 0 when every check passes,
1 when one fails or could not run, 2 on bad input (one line on stderr). A check that cannot run
fails unless ``--allow-skip NAME`` names it; ``--renderer NAME`` (on ``--model NAME``'s tokenizer,
the embedded SmolLM2 by default) supplies the renderer of an env that keeps it elsewhere than
``.renderer`` (e.g. some of the cookbook's envs).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["TargetError", "load_target", "main"]


class TargetError(ValueError):
    """The target cannot be resolved into an env source (the message is one line)."""


def _instantiate(cls: type, what: str) -> Any:
    try:
        return cls()
    except Exception as error:
        raise TargetError(
            f"cannot construct {cls.__qualname__}() with no arguments ({type(error).__name__}: {error}); "
            f"point at a {what} instance or an env factory instead"
        ) from None


def load_target(spec: str) -> Any:
    """Import ``module:attribute`` (or take an installed env id, ``turngym/Math-v0`` or one a
    package declares, see ``python -m envs.list``, or another framework's env: ``textarena:<GameId>``,
    ``openenv:<server url>``, ``verifiers:<name>``) and turn it into
    an env source for :func:`check_conformance`."""
    # another framework's env, through its adapter
    if spec.startswith(("textarena:", "openenv:", "verifiers:")):
        from envs.gym import env_source

        return env_source(spec)
    if ":" not in spec and "/" in spec:
        from envs.gym import ENV_IDS, env_source

        if spec not in ENV_IDS:
            raise TargetError(f"unknown id {spec!r}; installed: {', '.join(ENV_IDS)}")
        return env_source(spec)
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise TargetError(f"expected module:attribute (e.g. envs.math:MathBuilder), got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise TargetError(f"cannot import module {module_name!r}: {error}") from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"module {module_name!r} has no attribute {attr!r}") from None

    from tinker_cookbook.rl.types import Env, EnvGroupBuilder, RLDataset, RLDatasetBuilder

    if inspect.isclass(obj):
        if issubclass(obj, Env):
            raise TargetError(
                f"{attr} is an Env class; point at its EnvGroupBuilder or a factory returning one (envs are single-use)"
            )
        if issubclass(obj, EnvGroupBuilder):
            return _instantiate(obj, "builder")
        if issubclass(obj, RLDatasetBuilder):
            obj = _instantiate(obj, "dataset builder")
        elif issubclass(obj, RLDataset):
            return _instantiate(obj, "dataset")
    if isinstance(obj, RLDatasetBuilder):
        return _dataset_of(obj)
    if isinstance(obj, EnvGroupBuilder | RLDataset) or callable(obj):
        return obj
    raise TargetError(
        f"{attr} is a {type(obj).__name__}; expected an EnvGroupBuilder, an RLDataset(Builder) or an env factory"
    )


def _dataset_of(builder: Any) -> Any:
    import anyio

    async def build() -> Any:
        train, _test = await builder()
        return train

    try:
        return anyio.run(build)
    except Exception as error:
        raise TargetError(
            f"building the datasets of {type(builder).__qualname__} raised {type(error).__name__}: {error}"
        ) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m envs.check",
        description="Check that a token-level env (builder, dataset or factory) conforms to the Env contract.",
    )
    parser.add_argument(
        "target",
        help="module:attribute naming an EnvGroupBuilder, RLDataset(Builder) or env factory; or an installed env id",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON (for CI)")
    parser.add_argument("--examples", type=int, default=40, help="hypothesis-drawn episodes (default 40)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the scripted episodes and of hypothesis")
    parser.add_argument(
        "--block-threshold", type=float, default=0.5, help="seconds a step may block the loop"
    )
    parser.add_argument(
        "--max-steps", type=int, default=64, help="turn budget assumed when the env declares none"
    )
    parser.add_argument(
        "--max-episode-steps",
        type=int,
        default=200,
        help="the checker's own bound on an episode, whatever budget the env declares",
    )
    parser.add_argument("--max-action-tokens", type=int, default=256, help="length of max-length actions")
    parser.add_argument(
        "--renderer",
        metavar="NAME",
        help="renderer name (e.g. qwen3_instruct) for an env whose renderer is not at .renderer",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="model whose tokenizer --renderer uses (default: the embedded SmolLM2; alone: its recommended renderer)",
    )
    parser.add_argument(
        "--allow-skip",
        metavar="CHECK",
        action="append",
        default=[],
        help="a check allowed not to run (repeatable), e.g. extension_property",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the checker CLI; returns the exit code."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = _parser().parse_args(argv)
    for name in ("examples", "max_steps", "max_episode_steps", "max_action_tokens"):
        if getattr(args, name) < 0:
            print(f"error: --{name.replace('_', '-')} must be >= 0", file=sys.stderr)
            return 2
    from envs.checker import CheckConfig, CheckName, check_conformance

    names = [str(c) for c in CheckName]
    unknown = [c for c in args.allow_skip if c not in names]
    if unknown:
        print(f"error: unknown check {unknown[0]!r} for --allow-skip; checks: {', '.join(names)}", file=sys.stderr)
        return 2
    renderer = None
    if args.renderer or args.model:
        from envs.checker import make_renderer

        try:
            renderer = make_renderer(args.renderer, args.model)
        except Exception as error:
            print(f"error: cannot make renderer {args.renderer!r}: {type(error).__name__}: {error}", file=sys.stderr)
            return 2
    try:
        source = load_target(args.target)
    except TargetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    config = CheckConfig(
        examples=args.examples,
        seed=args.seed,
        block_threshold_s=args.block_threshold,
        max_steps=args.max_steps,
        max_episode_steps=args.max_episode_steps,
        max_action_tokens=args.max_action_tokens,
        renderer=renderer,
        allow_skip=frozenset(CheckName(c) for c in args.allow_skip),
    )
    report = check_conformance(source, config, target=args.target)
    if args.json:
        print(report.to_json())
    else:
        from rich.console import Console

        Console().print(report.rich_table())
        print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
