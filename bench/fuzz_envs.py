"""Fuzz every included env with hypothesis-drawn actions; ends with ``actions=<n> crashes=<m>``.

Actions: random tokens, empty, invalid UTF-8, max length (stepped with ``stop_reason="length"``),
the stop token alone, well-formed replies, and for tool envs calls to their tools (well-formed,
wrong and malformed; see ``envs.testing.env_actions``), stepped through fresh episodes until each
env has taken ``--actions`` of them (default 10,000). A crash is a step that raised or hung.

When the code-execution env (``turngym/MathPython-v0``) is fuzzed, its sandbox also faces the
escape attempts of ``envs.code.escapes`` (every strong isolation available here, audit hook on
and off; see ``bench/code_sandbox.py``) while the event loop's lag is sampled: the lines
``event_loop_lag_p99_ms=<x>`` (``baseline_lag_p99_ms`` is an idle loop's, the machine's own
noise), ``event_loop_blocked_p99_ms=<y>`` (goal <= 10: the lateness the loop's thread did not
spend waiting for a CPU) and ``escapes=<n>`` (goal 0) come before the last one,
which then reads ``actions=<n> crashes=<m> escapes=<k>``.

    python bench/fuzz_envs.py                  # every registered turngym/ id, 10k actions each
    python bench/fuzz_envs.py --actions 500 --env turngym/Math-v0
    python bench/fuzz_envs.py --actions 0 --env turngym/MathPython-v0   # the escape section alone
    python bench/fuzz_envs.py --quick          # every env, 20 actions each, no escape attempts
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import envs.judge.testing  # noqa: F401  (registers the scripted test judges)
from envs.checker import CheckConfig, fuzz_env
from envs.gym import ENV_IDS, env_source

OFFLINE = {"turngym/Judge-v0": {"completer": "scripted:score:7"}}
"""Per id, the keyword arguments that make an env instant and offline (Judge-v0: a scripted judge
instead of the embedded model's)."""


CODE_ENV = "turngym/MathPython-v0"
"""The env whose sandbox also faces the escape attempts."""


def main(argv: list[str] | None = None) -> int:
    """Fuzz the chosen envs; print one line per env and the total line. Exit 1 on a crash."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--actions", type=int, default=10_000, help="actions per env (default 10000)")
    parser.add_argument("--env", action="append", help="a turngym/ id (repeatable; default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-escapes", action="store_true", help="skip the code sandbox's escape attempts")
    parser.add_argument("--escape-timeout", type=float, default=2.0, help="time limit of an escape run, s")
    parser.add_argument(
        "--chunk",
        type=int,
        default=0,
        help="fuzz in chunks of this many actions (seeds seed, seed+1...), "
        "with a progress line each (default: one run)",
    )
    parser.add_argument("--max-action-tokens", type=int, default=256)
    parser.add_argument(
        "--block-threshold",
        type=float,
        default=30.0,
        help="seconds a step may block the loop (high: a loaded machine starves the process)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="20 actions per env, no escape attempts (a smoke run)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.actions, args.no_escapes = 20, True
    ids = args.env or list(ENV_IDS)
    unknown = [i for i in ids if i not in ENV_IDS]
    if unknown:
        print(f"error: unknown id(s) {', '.join(unknown)}; known: {', '.join(ENV_IDS)}", file=sys.stderr)
        return 2
    config = CheckConfig(max_action_tokens=args.max_action_tokens, block_threshold_s=args.block_threshold)
    total_actions = total_crashes = 0
    for env_id in ids:
        if args.actions <= 0:
            break
        # in chunks (seeds seed, seed+1...), each with a progress line, when --chunk is given
        chunks = [args.actions] if args.chunk <= 0 else _split(args.actions, args.chunk)
        actions = crashes = episodes = truncated = tool_calls = 0
        seconds = 0.0
        failures: dict[str, str] = {}
        for k, n in enumerate(chunks):
            stats = fuzz_env(
                env_source(env_id, **OFFLINE.get(env_id, {})), n, seed=args.seed + k, config=config, target=env_id
            )
            actions, crashes, episodes = (
                actions + stats.actions,
                crashes + stats.crashes,
                episodes + stats.episodes,
            )
            truncated += stats.stats.get("faults", {}).get("truncated", 0)
            tool_calls += stats.stats.get("tool_calls", 0)
            seconds += stats.seconds
            failures = {**stats.failures, **failures}
            if len(chunks) > 1:
                print(
                    f"{env_id}: chunk {k + 1}/{len(chunks)} {stats.line} (so far actions={actions})",
                    flush=True,
                )
        total_actions += actions
        total_crashes += crashes
        other = "; ".join(f"{k}: {v[:160]}" for k, v in failures.items()) or "no failures"
        print(
            f"{env_id}: actions={actions} crashes={crashes} episodes={episodes} truncated={truncated} "
            f"tool_calls={tool_calls} in {seconds:.0f}s ({other})",
            flush=True,
        )
    escapes = None
    if CODE_ENV in ids and not args.no_escapes:
        import anyio
        from code_sandbox import escape_section, idle_lag

        idle = anyio.run(idle_lag)
        print(
            f"baseline_lag_p99_ms={idle.p99():.2f} blocked={idle.blocked_p99():.2f} (idle loop: the machine's noise)"
        )
        escapes, lag = anyio.run(escape_section, args.escape_timeout, 2)
        if lag is not None:
            print(f"event_loop_lag_p99_ms={lag.p99():.2f}")
            print(f"event_loop_blocked_p99_ms={lag.blocked_p99():.2f} (lateness minus run-queue wait)")
        print(f"escapes={escapes}")
    tail = "" if escapes is None else f" escapes={escapes}"
    print(f"actions={total_actions} crashes={total_crashes}{tail}")
    return 1 if total_crashes or escapes else 0


def _split(total: int, chunk: int) -> list[int]:
    return [min(chunk, total - start) for start in range(0, total, chunk)]


if __name__ == "__main__":
    sys.exit(main())
