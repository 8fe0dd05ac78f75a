"""Bench: which TextArena single-player games run offline and pass the conformance checker.

    .venv/bin/python bench/interop.py [--examples 6] [--markdown docs/interop_textarena.md] [--quick]

``--quick`` checks the first few games only, with one drawn episode each (a smoke test of the script).

Every TextArena id (the ``-raw`` and ``-train`` wrapper variants left out: the adapter applies
only the action wrappers anyway) is built through :mod:`envs.interop.textarena` and checked with
``check_conformance`` (groups of two envs, so the group-isolation check runs). A game is
``ok`` when the report passes; ``not single-player`` and ``needs ...`` (a download at run time,
an online model, files the wheel lacks) are listed with their one-line reason.

The last line is ``textarena_envs_ok=<n>`` (issue #37 wants n >= 20); the other fields of the
issue's goal line (OpenEnv, verifiers, training gain) are not measured by this bench yet.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--examples", type=int, default=6, help="hypothesis-drawn episodes per game")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--quick", action="store_true", help="the first 6 single-player games, 1 episode each")
    args = parser.parse_args()
    if args.quick:
        args.examples = 1

    import anyio
    from textarena.envs.registration import ENV_REGISTRY

    from envs.checker import CheckConfig, CheckName, check_conformance
    from envs.interop.textarena import TextArenaGroup, TextArenaUnavailable, textarena_source

    ids = sorted(k for k in ENV_REGISTRY if not k.endswith(("-raw", "-train")))
    if args.quick:
        ids = [i for i in ids if i.startswith(("GuessTheNumber", "Hangman", "Minesweeper", "Sudoku", "TowerOfHanoi"))][:6]
    rows: list[tuple[str, str, str]] = []
    ok = 0
    for name in ids:
        start = time.monotonic()
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
        if report.ok:
            ok += 1
            detail = f"{report.actions} actions, extension {report[CheckName.EXTENSION].outcome}"
            rows.append((name, "ok", f"{detail} ({time.monotonic() - start:.1f}s)"))
        else:
            first = report.failures[0]
            rows.append((name, "fails checker", f"{first.check}: {first.detail.splitlines()[0][:120]}"))
    multi = [n for n, _, d in rows if d == "not single-player"]
    lines = ["| TextArena id | status | detail |", "|---|---|---|"]
    lines += [f"| `{n}` | {s} | {d.replace('|', '/')} |" for n, s, d in rows if n not in multi]
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    print(f"{len(multi)} multi-player ids left out of the table; {len(rows)} ids in all")
    print(f"textarena_envs_ok={ok}")


if __name__ == "__main__":
    main()
