"""Command line in the cookbook's ``key=value`` style, failing fast with one clear line.

Parsing only needs chz and the config class, so an unknown key or a bad value is reported in
well under a second; the env's data is validated next (:meth:`Config.check_data`, before the
model loads and before anything is written); the loop (tinker, torch, the model) is imported
after that. Nested keys (``env.candidates=8``) set fields of an env's game config.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import chz

from training._config import Config, ConfigError, check_data, one_line

C = TypeVar("C")


def renamed_keys(config_cls: type) -> dict[str, str]:
    """Old command-line keys of ``config_cls`` and the key each is now: the config's own
    ``renamed_keys()`` plus, when it has a ``data`` field, every field of ``data`` that is not a
    top-level key (``batch_size`` -> ``data.batch_size``: the data keys were top-level keys)."""
    renamed: dict[str, str] = {}
    own = getattr(config_cls, "renamed_keys", None)
    if callable(own):
        renamed.update(cast("dict[str, str]", own()))
    if chz.is_chz(config_cls):
        fields = chz.chz_fields(config_cls)
        data = fields.get("data")
        if data is not None and chz.is_chz(data.final_type):
            for name in chz.chz_fields(data.final_type):
                if name not in fields:
                    renamed.setdefault(name, f"data.{name}")
    return renamed


def upgrade_argv(config_cls: type, argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``argv`` with every renamed key (:func:`renamed_keys`) replaced by its new name, and one
    note per replaced key (``eval_words=... is now data.test_batch_size=...``)."""
    renamed = renamed_keys(config_cls)
    out: list[str] = []
    notes: list[str] = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key in renamed:
            out.append(f"{renamed[key]}={value}")
            notes.append(f"note: key {key!r} is now {renamed[key]!r} (the old name still works)")
        else:
            out.append(arg)
    return out, notes


def parse_config(config_cls: type[C], argv: Sequence[str]) -> C:
    """Build ``config_cls`` (a :class:`Config`, or any chz class) from ``key=value`` arguments
    (a renamed key is read under its new name: :func:`upgrade_argv`); :class:`ConfigError` (one
    line) on any problem."""
    args, _ = upgrade_argv(config_cls, argv)
    try:
        return chz.Blueprint(config_cls).make_from_argv(args)
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
        print(f"{prog}: error: {exc}", file=sys.stderr)  # one line, even with renamed keys
        return 2
    for note in upgrade_argv(config_cls, args)[1]:
        print(f"{prog}: {note}", file=sys.stderr)
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


def run_pipeline_cli(
    prog: str,
    config_cls: type[C],
    run: Callable[[C], dict[str, Any]],
    report: Callable[[dict[str, Any]], Sequence[str]],
    argv: Sequence[str] | None = None,
) -> int:
    """Entry point of a pipeline command (one chz config, one run, a summary dict), such as
    ``python -m envs.judge.rlhf``: ``--help`` prints the config's keys; a bad key is one line on
    stderr and exit 2; a run that stops on bad input (``FileNotFoundError``, ``ValueError``,
    ``RuntimeError``) one line and exit 1; else ``report(summary)``'s lines, the run folder
    (``config.log_path``) and exit 0."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "help") for a in args):
        print(f"usage: python -m {prog} [key=value ...]\n")
        print(chz.Blueprint(config_cls).get_help())
        return 0
    try:
        config = chz.Blueprint(config_cls).make_from_argv(args)
    except Exception as exc:  # chz raises several types; all mean "bad command line"
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    try:
        summary = run(config)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    for line in report(summary):
        print(line)
    print(f"artifacts: {getattr(config, 'log_path', '')}")
    return 0
