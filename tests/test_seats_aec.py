"""The PettingZoo AEC view of a multi-seat game passes PettingZoo's own ``api_test``."""

from __future__ import annotations

from pettingzoo.test import api_test

from envs.seats.aec import SeatsAECEnv
from envs.tictactoe.env import TicTacToeGame


def test_tictactoe_passes_pettingzoos_api_test() -> None:
    api_test(SeatsAECEnv(lambda rng: TicTacToeGame()), num_cycles=50)


def test_a_scripted_game_through_the_aec_api() -> None:
    env = SeatsAECEnv(lambda rng: TicTacToeGame())
    env.reset(seed=0)
    moves = iter(["5", "1", "3", "7", "4", "6", "9", "2", "8"])
    returns = dict.fromkeys(env.possible_agents, 0.0)
    for agent in env.agent_iter():
        _, reward, terminated, truncated, _ = env.last()
        returns[agent] += reward
        if terminated or truncated:
            env.step(None)
            continue
        assert "Free cells" in env.observe_text(agent)
        env.step(next(moves))
    assert returns == {"x": 0.0, "o": 0.0}  # 5 1 3 7 4 6 9 2 8: a draw
