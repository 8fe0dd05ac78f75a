"""Twenty Questions with two trainable seats (envs.twenty_questions.seated): the asker and the
answerer each form a role group, a right guess pays both, the answerer is paid for agreeing with
the knowledge base and charged for not, and a pinned asker leaves only the answerer to train."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import anyio
import tinker
from tinker_cookbook.completers import StopCondition, TokenCompleter, TokensWithLogprobs

from backend.model import SMOLLM2
from envs.seats import Seat
from envs.twenty_questions.answerers import Answer, KBAnswerer
from envs.twenty_questions.seated import (
    METRIC_JUDGED,
    METRIC_TRUE,
    METRIC_WIN,
    ScriptedAsker,
    SeatedConfig,
    seated_builder,
)
from renderers_ext import load_renderer

R = load_renderer("qwen3_instruct", SMOLLM2)
CONFIG = SeatedConfig()


@dataclass
class RolePlayer(TokenCompleter):
    """Plays whichever seat it is shown: as the asker one question, then the candidates in turn;
    as the answerer the KB's answer (``lie``: always the opposite of a yes/no the KB gives)."""

    lie: bool = False

    async def __call__(
        self, model_input: tinker.ModelInput, stop: StopCondition, **_: Any
    ) -> TokensWithLogprobs:
        text = str(R.tokenizer.decode(model_input.to_ints()))
        secret = re.search(r"The secret word is (\w+)\.", text)
        if secret:
            question = text.rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
            truth = KBAnswerer().answer(secret.group(1), question).answer
            if self.lie and truth is not Answer.UNKNOWN:
                truth = Answer.NO if truth is Answer.YES else Answer.YES
            reply = {Answer.YES: "Yes.", Answer.NO: "No.", Answer.UNKNOWN: "Maybe."}[truth]
        else:
            words = text.split("these words: ", 1)[1].split(".", 1)[0].split(", ")
            turns = text.count("<|im_start|>assistant") - 1  # the open one is this turn's
            reply = "Is it an animal?" if turns == 0 else f"Guess: {words[turns - 1]}"
        tokens = list(R.tokenizer.encode(reply, add_special_tokens=False))
        assert isinstance(stop[0], int)
        tokens.append(stop[0])
        return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[-0.5] * len(tokens))


def _by_role(outcomes: list[Any]) -> dict[str, Any]:
    return {o.tags[-1]: o for o in outcomes}


def test_both_seats_train_and_share_the_win_and_the_answerer_is_paid_for_the_truth() -> None:
    for lie in (False, True):
        b = seated_builder(R, games=16, seed=3)
        groups = _by_role(anyio.run(b.rollout_seated, RolePlayer(lie)))
        assert set(groups) == {"as_asker", "as_answerer"}
        asker, answerer = groups["as_asker"].group, groups["as_answerer"].group
        assert asker is not None and answerer is not None
        assert len(asker.trajectories_G) == len(answerer.trajectories_G) == 16
        assert all(s.breaks == () for o in groups.values() for s in o.stats)  # every seat's prefix intact
        wins = [m[METRIC_WIN] for m in asker.metrics_G]
        assert 0 < sum(wins) < 16  # guessing the candidates in turn wins some games
        for ra, rb, win, m in zip(
            asker.final_rewards_G, answerer.final_rewards_G, wins, answerer.metrics_G, strict=True
        ):
            assert ra == CONFIG.win_reward * win
            judged, true = m[METRIC_JUDGED], m[METRIC_TRUE]
            assert judged == 1.0  # "Is it an animal?" is in the KB
            assert true == (0.0 if lie else 1.0)
            assert rb - ra == CONFIG.truth_reward * (2 * true - judged)


def test_a_pinned_asker_leaves_the_answerer_to_train() -> None:
    b = seated_builder(R, asker=Seat.pinned("scripted", ScriptedAsker()), games=6)
    groups = _by_role(anyio.run(b.rollout_seated, RolePlayer()))
    assert set(groups) == {"as_answerer"}
    group = groups["as_answerer"].group
    assert group is not None and len(group.trajectories_G) == 6
    # two KB questions answered truthfully per game
    assert all(m[METRIC_TRUE] == m[METRIC_JUDGED] == 2.0 for m in group.metrics_G)
