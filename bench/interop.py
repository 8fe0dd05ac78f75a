"""Bench: other frameworks' envs through TurnGym's adapters, and TurnGym envs served to theirs.

    .venv/bin/python bench/interop.py [--examples 6] [--markdown FILE] [--markdown-multi FILE]
        [--textarena all|single|multi|none] [--quick]

``--quick`` checks the first few TextArena games only, with one drawn episode each, and fewer
checker examples elsewhere (a smoke test of the script).

- TextArena: every id (the ``-raw`` and ``-train`` wrapper variants left out: the adapter applies
  only the action wrappers anyway) is built through :mod:`envs.interop.textarena` and checked with
  ``check_conformance`` (groups of two envs, so the group-isolation check runs). A game is ``ok``
  when the report passes; ``needs ...`` (a download at run time, an online model, files the wheel
  lacks) are listed with their one-line reason. Multi-player games (:func:`players_of` > 1) go
  through the multi-seat form (``textarena_seated``: the checker plays seat 0, the other seats
  held by random stand-ins, groups of two games) into a table of their own;
  ``textarena_multiplayer_ok=<m>`` is printed on the line before the last.
- OpenEnv: a real OpenEnv server (OpenEnv's ``create_app`` over :mod:`envs.interop.openenv_demo`)
  on 127.0.0.1; ``openenv_ok`` is 1 when the checker passes through :mod:`envs.interop.openenv`
  and 16 sessions (4 groups of 4) run at once through the rollout engine, every group kept.
- Served: ``python -m envs.serve textarena:GuessTheNumber-v0``; ``openenv_served_ok`` is 1 when
  OpenEnv's own client plays an episode to its end and the checker passes back through the adapter.
- verifiers: the checker on each env of ``envs.interop.verifiers.ENVS`` (``verifiers_envs_ok``).
- ``unexpected_extension_breaks``: checker reports whose extension check failed, plus extension
  breaks the engine saw in the OpenEnv run (SmolLM2's renderer claims the extension property).
- ``trained_gain``: with ``--train`` (minutes of SmolLM2 training; run it under ``nice``), the
  held-out mean reward after RL minus the untrained policy's, from a run of
  ``python -m envs.interop.textarena_train`` (GuessTheNumber-v0; each stage printed); ``--run
  <folder>`` reads a finished run instead; otherwise ``nan`` (not measured).

``--textarena`` picks which TextArena games run (``none``: the other frameworks only); the
counts of the games not run are 0. The last line is ``textarena_envs_ok=<n> openenv_ok=<0|1> openenv_served_ok=<0|1>
verifiers_envs_ok=<m> unexpected_extension_breaks=<k> trained_gain=<g>`` (issue #37).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--examples", type=int, default=6, help="hypothesis-drawn episodes per game")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--markdown-multi", help="also write the multi-player games' table to this file")
    parser.add_argument(
        "--textarena",
        choices=("all", "single", "multi", "none"),
        default="all",
        help="which TextArena games to check (default all)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the first 6 single-player games and 2 multi-player ones, 1 episode each",
    )
    parser.add_argument(
        "--train", action="store_true", help="also train on one game and report trained_gain (minutes)"
    )
    parser.add_argument("--run", help="read trained_gain from this finished textarena_train run folder")
    args = parser.parse_args()
    if args.quick:
        args.examples = 1

    import anyio
    from textarena.envs.registration import ENV_REGISTRY

    from envs.checker import CheckConfig, check_conformance
    from envs.interop.textarena import TextArenaGroup, TextArenaUnavailable, players_of, textarena_source

    ids = sorted(k for k in ENV_REGISTRY if not k.endswith(("-raw", "-train")))
    if args.quick:
        single = ("GuessTheNumber", "Hangman", "Minesweeper", "Sudoku", "TowerOfHanoi")
        ids = [*[i for i in ids if i.startswith(single)][:6], "KuhnPoker-v0", "TicTacToe-v0"]
    rows: list[tuple[str, str, str]] = []
    multi_rows: list[tuple[str, int, str, str]] = []
    reports = []
    ok = multi_ok = 0
    for name in ids if args.textarena != "none" else []:
        start = time.monotonic()
        players = players_of(name)
        if players is not None and players > 1:
            if args.textarena in ("all", "multi"):
                report = check_conformance(
                    textarena_source(name, group_size=2), CheckConfig(examples=args.examples), target=name
                )
                reports.append(report)
                multi_ok += int(report.ok)
                multi_rows.append((name, players, *_status(report, time.monotonic() - start)))
            continue
        if args.textarena not in ("all", "single"):
            continue
        try:  # build and reset once: multi-player games and missing downloads say so in one line
            env = anyio.run(TextArenaGroup(name).make_envs)[0]
            anyio.run(env.initial_observation)
        except TextArenaUnavailable as error:
            reason = (
                str(error).split(": ", 1)[-1]
                if "not a single-player" not in str(error)
                else "not single-player"
            )
            rows.append((name, "unavailable", reason))
            continue
        except Exception as error:  # a game that crashes on reset is listed, not fatal
            rows.append(
                (
                    name,
                    "error",
                    f"{type(error).__name__}: {str(error).splitlines()[0][:100] if str(error) else ''}",
                )
            )
            continue
        report = check_conformance(
            textarena_source(name, group_size=2), CheckConfig(examples=args.examples), target=name
        )
        reports.append(report)
        ok += int(report.ok)
        rows.append((name, *_status(report, time.monotonic() - start)))
    multi = [n for n, _, d in rows if d == "not single-player"]
    lines = ["| TextArena id | status | detail |", "|---|---|---|"]
    lines += [f"| `{n}` | {s} | {d.replace('|', '/')} |" for n, s, d in rows if n not in multi]
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    lines = ["| TextArena id | players | status | detail |", "|---|---|---|---|"]
    lines += [f"| `{n}` | {p} | {s} | {d.replace('|', '/')} |" for n, p, s, d in multi_rows]
    multi_table = "\n".join(lines)
    print(multi_table)
    if args.markdown_multi:
        with open(args.markdown_multi, "w") as f:
            f.write(multi_table + "\n")
    print(
        f"{len(rows) - len(multi)} single-player and {len(multi_rows)} multi-player ids checked "
        f"({len(multi)} more not single-player)"
    )
    breaks = sum(_extension_failed(r) for r in reports)
    examples = 2 if args.quick else args.examples
    openenv_ok, engine_breaks = _openenv(examples)
    served_ok = _served(examples)
    verifiers_ok, verifiers_breaks = _verifiers(examples)
    breaks += engine_breaks + verifiers_breaks
    gain = float("nan")
    if args.train or args.run:
        gain = trained_gain(Path(args.run) if args.run else _train())
    print(f"textarena_multiplayer_ok={multi_ok}")
    print(
        f"textarena_envs_ok={ok} openenv_ok={openenv_ok} openenv_served_ok={served_ok} "
        f"verifiers_envs_ok={verifiers_ok} unexpected_extension_breaks={breaks} trained_gain={'nan' if gain != gain else f'{gain:+.3f}'}"
    )


def _status(report, seconds: float) -> tuple[str, str]:
    """(status, detail) of a TextArena game's checker report, for the tables."""
    from envs.checker import CheckName

    if report.ok:
        detail = f"{report.actions} actions, extension {report[CheckName.EXTENSION].outcome}"
        return "ok", f"{detail} ({seconds:.1f}s)"
    first = report.failures[0]
    return "fails checker", f"{first.check}: {first.detail.splitlines()[0][:120]}"


def _train() -> Path:
    """A default ``envs.interop.textarena_train`` run in a fresh folder; returns the folder."""
    import tempfile

    import training
    from envs.interop.textarena_train import TextArenaTrainConfig

    folder = Path(tempfile.mkdtemp(prefix="interop_train_"))
    training.train(training.parse_config(TextArenaTrainConfig, [f"log_path={folder}", "progress=False"]))
    return folder


def trained_gain(folder: Path) -> float:
    """Held-out mean reward after RL minus the untrained policy's (each stage printed)."""
    rows = [json.loads(line) for line in (folder / "eval.jsonl").read_text().splitlines() if line.strip()]
    by_stage = {r.get("stage"): r for r in rows}  # the last row of each stage
    for stage in ("untrained", "warm_start", "rl"):
        if stage in by_stage:
            row = by_stage[stage]
            print(f"trained: {stage} (step {row['step']}): held-out reward {row['eval/reward/mean']:.3f}")
    if "untrained" not in by_stage or "rl" not in by_stage:
        raise SystemExit(f"{folder}: no untrained and rl evaluations in eval.jsonl")
    return float(by_stage["rl"]["eval/reward/mean"]) - float(by_stage["untrained"]["eval/reward/mean"])


def _extension_failed(report) -> int:
    from envs.checker import CheckName, Outcome

    return int(report[CheckName.EXTENSION].outcome == Outcome.FAIL)


def _openenv(examples: int) -> tuple[int, int]:
    """(openenv_ok, extension failures and breaks) against a real OpenEnv server."""
    import anyio

    from completers import ScriptedTokenCompleter
    from envs.checker import CheckConfig, check_conformance
    from envs.interop.openenv import OpenEnvGroup, openenv_source, running_server
    from renderers_ext import render_action
    from rollout import EngineConfig, RolloutEngine

    with running_server(["-m", "envs.interop.openenv_demo"]) as url:
        report = check_conformance(
            openenv_source(f"openenv:{url}", group_size=2), CheckConfig(examples=examples)
        )
        print(f"openenv checker: {'ok' if report.ok else report.failures[0].detail.splitlines()[0]}")
        builders = [OpenEnvGroup(url, seed=seed, group_size=4) for seed in range(4)]
        renderer = builders[0].renderer()
        guesses = [
            render_action(renderer, {"role": "assistant", "content": str(n)}) for n in (8, 4, 12, 2, 6, 10)
        ]
        policy = ScriptedTokenCompleter(guesses, cycle=True, delay=0.05)

        async def run():
            with anyio.fail_after(300):
                return await RolloutEngine(policy, EngineConfig()).run_batch(builders)

        result = anyio.run(run)
    kept = sum(o.ok for o in result.outcomes)
    breaks = sum(len(s.breaks) for o in result.outcomes for s in o.stats)
    print(f"openenv engine: {kept}/4 groups kept, {policy.max_in_flight} sessions at once, {breaks} breaks")
    ok = int(report.ok and kept == 4 and policy.max_in_flight >= 16)
    return ok, breaks + _extension_failed(report)


def _served(examples: int) -> int:
    """openenv_served_ok: a TurnGym env served by envs.serve, played by OpenEnv's own client."""
    from openenv.core.generic_client import GenericEnvClient

    from envs.checker import CheckConfig, check_conformance
    from envs.interop.openenv import openenv_source, running_server

    with running_server(["-m", "envs.serve", "textarena:GuessTheNumber-v0"]) as url:
        with GenericEnvClient(base_url=url).sync() as client:
            step = client.reset(seed=1)
            turns = 0
            while not step.done and turns < 30:
                step = client.step({"message": f"[{turns + 1}]"})
                turns += 1
        report = check_conformance(
            openenv_source(f"openenv:{url}", group_size=2), CheckConfig(examples=examples)
        )
    print(
        f"served: OpenEnv client episode done={step.done} reward={step.reward} after {turns} steps; checker ok={report.ok}"
    )
    return int(bool(step.done) and isinstance(step.reward, int | float) and report.ok)


def _verifiers(examples: int) -> tuple[int, int]:
    """(verifiers envs passing the checker, extension failures)."""
    from envs.checker import CheckConfig, check_conformance
    from envs.interop.verifiers import ENVS, verifiers_source

    ok = breaks = 0
    for name in ENVS:
        report = check_conformance(
            verifiers_source(name, group_size=2), CheckConfig(examples=examples), target=name
        )
        print(f"verifiers:{name}: {'ok' if report.ok else report.failures[0].detail.splitlines()[0]}")
        ok += int(report.ok)
        breaks += _extension_failed(report)
    return ok, breaks


if __name__ == "__main__":
    main()
