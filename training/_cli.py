"""Command line in the cookbook's ``key=value`` style, failing fast with one clear line.

Parsing only needs chz and the config class, so an unknown key or a bad value is reported in
well under a second; the env's data is validated next (:meth:`Config.check_data`, before the
model loads and before anything is written); the loop (tinker, torch, the model) is imported
after that. Nested keys (``env.candidates=8``) set fields of an env's game config.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TypeVar

import chz

from training._config import Config, ConfigError, check_data, one_line

C = TypeVar("C")


def parse_config(config_cls: type[C], argv: Sequence[str]) -> C:
    """Build ``config_cls`` (a :class:`Config`, or any chz class) from ``key=value`` arguments;
    :class:`ConfigError` (one line) on any problem."""
    try:
        return chz.Blueprint(config_cls).make_from_argv(list(argv))
    except Exception as exc:  # chz raises several unrelated types; all mean "bad command line"
        raise ConfigError(one_line(exc)) from None


def _help(config_cls: type[Config]) -> str:
    return chz.Blueprint(config_cls).get_help()


def run_cli(config_cls: type[Config], argv: Sequence[str] | None = None, *, prog: str | None = None) -> int:
    """Entry point of an env's ``train.py``: parse, train, return the exit status.

    Exit status: 0 done, 2 bad command line, bad data or an env that does not fit the policy
    (one line on stderr, nothing written for the first two), 130 interrupted, 1 failure.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    prog = prog or config_cls.__module__
    if any(a in ("-h", "--help", "help") for a in args):
        print(f"usage: python -m {prog} [key=value ...]\n")
        print(_help(config_cls))
        return 0
    try:
        config = parse_config(config_cls, args)
        check_data(config)
    except ConfigError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    from training._loop import train  # heavy imports happen here, after the config and data are valid

    try:
        summary = train(config)
    except ConfigError as exc:  # found once the config meets the env, before the model loads
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; rerun with log_path={config.log_path} to resume", file=sys.stderr)
        return 130
    print(summary.describe())
    return 0
