"""The CI-sized fuzz: a few hundred hypothesis-drawn actions against every included env
(``bench/fuzz_envs.py`` runs 10,000 per env)."""

from __future__ import annotations

import broken_envs as broken
import pytest

import envs.judge.testing  # noqa: F401  (registers the scripted test judges)
from envs.checker import CheckConfig, fuzz_env
from envs.gym import ENV_IDS, env_source

OFFLINE = {"turngym/Judge-v0": {"completer": "scripted:score:7"}}
"""Per id, the keyword arguments that make an env instant and offline (Judge-v0: a scripted judge
instead of the embedded model's)."""


CI_ACTIONS = 150
LENIENT = CheckConfig(block_threshold_s=60.0)  # not what this tests; CI machines are shared


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_fuzz_finds_no_crash(env_id: str) -> None:
    stats = fuzz_env(env_source(env_id, **OFFLINE.get(env_id, {})), CI_ACTIONS, seed=1, config=LENIENT, target=env_id)
    assert stats.actions >= CI_ACTIONS
    assert stats.crashes == 0 and not stats.failures, stats.failures
    assert stats.line == f"actions={stats.actions} crashes=0"


def test_fuzz_counts_every_crash_and_keeps_going() -> None:
    stats = fuzz_env(broken.RaisingGroup(), 60, config=LENIENT)
    assert stats.actions >= 60
    assert 0 < stats.crashes < stats.actions
    assert "IndexError" in stats.failures["step_never_raises"]


def test_fuzz_reaches_truncation_and_play_truncated() -> None:
    """Max-length actions are stepped with ``stop_reason="length"``: ``Fault.TRUNCATED`` is
    reported, and with ``play_truncated`` the game plays the cut turn."""
    source = env_source("turngym/TwentyQuestions-v0", play_truncated=True)
    stats = fuzz_env(source, CI_ACTIONS, seed=1, config=LENIENT)
    assert stats.crashes == 0 and not stats.failures, stats.failures
    assert stats.stats["action_kinds"]["max_length"] > 0
    assert stats.stats["faults"]["truncated"] > 0
    assert stats.stats["faults_played_on"]["truncated"] > 0


def test_fuzz_draws_tool_calls_for_a_tool_env() -> None:
    stats = fuzz_env(env_source("turngym/MathCalculator-v0"), CI_ACTIONS, seed=1, config=LENIENT)
    assert stats.crashes == 0 and not stats.failures, stats.failures
    assert stats.stats["tool_calls"] > 0 and stats.stats["malformed_tool_calls"] > 0
    assert stats.stats["faults"]["malformed_tool_call"] > 0
