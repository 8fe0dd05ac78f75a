"""``python -m envs.play``: a person plays an env in the terminal (driven through tmux send-keys)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envs.play import _read_reply, main

ROOT = Path(__file__).resolve().parents[1]


def test_reply_lines_continue_after_a_backslash() -> None:
    lines = iter(["first\\", "second\\", "third", "next"])
    assert _read_reply(lambda _p: next(lines)) == "first\nsecond\nthird"
    assert _read_reply(lambda _p: "/quit") is None

    def eof(_p: str) -> str:
        raise EOFError

    assert _read_reply(eof) is None


def test_piped_game_wins_and_reports_the_return(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    replies = iter(["hello", "stop"])
    monkeypatch.setattr("builtins.input", lambda _p="": next(replies))
    assert main(["tests.broken_envs:EchoGroup"]) == 0
    out = capsys.readouterr().out
    assert "You said: hello" in out  # the env's answer to the first reply
    assert "episode over: stop completed, return 1.1, 2 turns" in out
    assert out.rstrip().endswith("returns: 1.1")


def test_bad_target_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nope/Missing-v0"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown id 'nope/Missing-v0'")


def _secret(seed: int) -> str:
    import gymnasium as gym

    from envs.gym import TextEnv

    env = TextEnv(gym.make("turngym/TwentyQuestions-v0"))
    env.reset(seed=seed)
    _obs, _r, _t, _tr, info = env.step("Is it alive?")
    env.close()
    return str(info["logs"]["secret"])


@pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux on PATH (apt-get install -y tmux)")
def test_twenty_questions_played_under_tmux(tmp_path: Path) -> None:
    secret = _secret(3)
    socket = f"turngym-play-{os.getpid()}"
    tmux = ["tmux", "-L", socket]
    command = (
        f"cd {shlex.quote(str(ROOT))} && PYTHONPATH={shlex.quote(str(ROOT))} HF_HUB_OFFLINE=1 "
        f"{shlex.quote(sys.executable)} -m envs.play turngym/TwentyQuestions-v0 --seed 3"
    )
    subprocess.run([*tmux, "new-session", "-d", "-s", "play", "-x", "160", "-y", "60", command], check=True)
    subprocess.run([*tmux, "set-option", "-t", "play", "remain-on-exit", "on"], check=True)

    def screen() -> str:
        out = subprocess.run([*tmux, "capture-pane", "-p", "-J", "-S", "-", "-t", "play"], capture_output=True, text=True)
        return out.stdout

    def wait_for(pattern: str, count: int = 1) -> str:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            text = screen()
            if len(re.findall(pattern, text)) >= count:
                return text
            time.sleep(0.2)
        raise AssertionError(f"{pattern!r} x{count} never showed; screen:\n{screen()}")

    try:
        text = wait_for(r"you> ")
        assert "Let's play twenty questions" in text and secret in text  # the candidates are listed
        subprocess.run([*tmux, "send-keys", "-t", "play", "Is it alive?", "Enter"], check=True)
        text = wait_for(r"you> ", 2)
        assert re.search(r"turn 1: reward 0", text)
        assert re.search(r"\n(Yes|No)\.", text)  # the answerer's reply is shown
        assert f"secret={secret}" not in text  # logs stay hidden: they would give the game away
        subprocess.run([*tmux, "send-keys", "-t", "play", f"Guess: {secret}", "Enter"], check=True)
        text = wait_for(r"returns: ")
        match = re.search(r"episode over: stop (\w+), return ([-\d.]+), 2 turns", text)
        assert match is not None, text
        assert match.group(1) == "completed" and float(match.group(2)) > 0
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
