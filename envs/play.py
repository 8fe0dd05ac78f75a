"""``python -m envs.play <id | module:attr>``: play an env yourself, in the terminal.

You are the policy: the env's messages are shown (the decoded tokens it appended, chat template
included), you type the assistant's reply, and it is sent as one turn exactly as a model that
stopped cleanly would have produced it (tokenised with the env's tokenizer, end-of-turn appended;
see :class:`envs.gym.TextEnv`). Each turn shows its reward and the env's metrics and logs; the
episode ends with its stop reason and return, then the next episode starts.

Typing: a line ending in ``\\`` continues on the next line (a multi-line reply); ``/quit`` or
end of input stops; ``/new`` abandons the episode and starts the next. ``--seed`` picks the first
episode (the next ones count up), ``--episodes`` how many to play, ``--env-args`` the id's keyword
arguments as JSON, ``--show-logs`` the env's per-turn logs (diagnostics; they may give the game
away).

The cookbook's ``rl.play_w_env.play_env`` plays one token-level env through a hand-typed
``TokenCompleter``; this goes through :class:`envs.gym.TextEnv` instead, so any installed id or
``module:attr`` plays by name, only the new text of each turn is shown, and group rewards and
stop reasons are reported as a rollout would.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["main", "play"]

QUIT, NEW = "/quit", "/new"


def _read_reply(ask: Callable[[str], str]) -> str | None:
    """One reply (``\\``-continued lines joined by newlines); None at end of input or ``/quit``."""
    lines: list[str] = []
    prompt = "you> "
    while True:
        try:
            line = ask(prompt)
        except EOFError:
            return None
        if not lines and line.strip() == QUIT:
            return None
        if line.endswith("\\"):
            lines.append(line[:-1])
            prompt = "...> "
            continue
        lines.append(line)
        return "\n".join(lines)


def play(
    env: Any,
    *,
    seed: int = 0,
    episodes: int = 1,
    show_logs: bool = False,
    ask: Callable[[str], str] | None = None,
    console: Any = None,
) -> list[float]:
    """Play ``episodes`` episodes of the text env ``env`` (a :class:`envs.gym.TextEnv`) with replies
    read by ``ask`` (default :func:`input`); return the episodes' returns. The env's logs (diagnostics that may give the
    game away, e.g. a secret word) are shown only with ``show_logs``."""
    from rich.console import Console
    from rich.markup import escape

    out = console or Console(highlight=False)
    ask = ask or input
    returns: list[float] = []
    for episode in range(episodes):
        text, _info = env.reset(seed=seed + episode)
        out.rule(f"episode {episode + 1} (seed {seed + episode})")
        out.print(f"[dim]{escape(text)}[/dim]")
        total, turn = 0.0, 0
        while True:
            reply = _read_reply(ask)
            if reply is None:
                out.print(f"[bold]quit[/bold] after {turn} turns, return so far {total:.3g}")
                return returns
            if reply.strip() == NEW:
                out.print("[bold]episode abandoned[/bold]")
                break
            _obs, reward, terminated, truncated, info = env.step(reply)
            turn += 1
            total += float(reward)
            meta = {k: v for k, v in info.get("metrics", {}).items() if not k.startswith("stop/")}
            line = f"turn {turn}: reward {float(reward):.3g}"
            if meta:
                line += " · " + ", ".join(f"{k}={v:.3g}" for k, v in meta.items())
            if show_logs and info.get("logs"):
                line += " · " + ", ".join(f"{k}={v}" for k, v in info["logs"].items())
            out.print(f"[cyan]{escape(line)}[/cyan]")
            if terminated or truncated:
                total = float(info.get("episode_return", total)) + float(info.get("group_reward", 0.0) or 0.0)
                out.print(
                    f"[bold]episode over[/bold]: stop {info.get('stop_reason') or '?'}, "
                    f"return {total:.3g}, {turn} turns"
                )
                returns.append(total)
                break
            out.print(f"[dim]{escape(info.get('new_text', ''))}[/dim]")
    return returns


def _make(target: str, env_args: dict[str, Any]) -> Any:
    import gymnasium as gym

    from envs.gym import ENV_IDS, TextEnv, TokenEnv

    if ":" not in target and target in ENV_IDS:
        return TextEnv(gym.make(target, **env_args))
    if env_args:
        raise ValueError("--env-args applies to an installed env id only")
    from envs.check import load_target

    return TextEnv(TokenEnv(load_target(target)))


def main(argv: Sequence[str] | None = None) -> int:
    """Play from the command line; returns the exit status (2 on a bad target).

    A multi-seat game's name (``envs.play_seat.GAMES``, e.g. ``tictactoe``) takes a seat against
    a scripted player or a model instead (:mod:`envs.play_seat`)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and not args_list[0].startswith("-"):
        from envs.play_seat import GAMES
        from envs.play_seat import main as play_seat

        if args_list[0] in GAMES:
            return play_seat(args_list)
    parser = argparse.ArgumentParser(prog="python -m envs.play", description="Play an env yourself in the terminal.")
    parser.add_argument("target", help="an installed env id (python -m envs.list) or module:attribute")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first episode")
    parser.add_argument("--episodes", type=int, default=1, help="episodes to play")
    parser.add_argument("--env-args", default="{}", help="JSON keyword arguments for the id's source")
    parser.add_argument("--show-logs", action="store_true", help="show the env's per-turn logs (may spoil the game)")
    args = parser.parse_args(args_list)
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from backend.model import register_tokenizers
    from envs.check import TargetError

    register_tokenizers()
    try:
        env_args = json.loads(args.env_args)
        if not isinstance(env_args, dict):
            raise ValueError(f"--env-args must be a JSON object, got {args.env_args!r}")
        env = _make(args.target, env_args)
    except (TargetError, ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        returns = play(env, seed=args.seed, episodes=args.episodes, show_logs=args.show_logs)
    except KeyboardInterrupt:
        return 130
    finally:
        env.close()
    if returns:
        print(f"returns: {', '.join(f'{r:.3g}' for r in returns)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
