"""Train a Twenty Questions player: ``python -m envs.twenty_questions.train [key=value ...]``.

With no arguments: the easy setting on the local backend with the embedded SmolLM2-135M
(offline): 4 candidate words listed in the prompt, 4 turns, the deterministic KB answerer,
LoRA rank 16 on every linear layer, lr 1e-3 (AdamW, grad clip 1.0), 4 words x 8 games per step
at temperature 1, 16 tokens per turn, constant-reward groups skipped, 20 steps. Held-out
evaluation (64 games: 16 held-out words x 4, the same games every time) before training, after
step 10 and at the end. Measured (these defaults, untrained start): held-out win rate 0/64
before, 64/64 after 10 steps and after 20; training win rate 0.03 -> 0.63 (step 6) -> 0.81
(step 7) -> ~0.9-1.0. That run took 40 min on 2 cores shared with other jobs (load average
12-16: 34 min of steps, 17 sampling + 17 training, 4 min of evaluation); on 2 free cores expect
about 15 min.

Rewards: 1 for the right guess; a truncated or unparseable turn ends the game with -0.1
(``fault_penalty``); a turn that is neither a question nor a guess costs nothing by default
(``format_penalty=0``). Why not -0.1 as well: this env ends the game on a truncated turn (16
tokens truncate ~90% of the untrained model's turns), so with a format penalty an immediate
truncation (-0.1, game over) beats playing on (-0.1 per turn): the policy collapsed to 100%
truncations by step 2 with no win to learn from. Without it, truncating is never better than
answering, and the wins drive learning.

Every key of :class:`training.Config` works (``learning_rate=3e-4``, ``max_steps=40``,
``backend=tinker``, ``log_path=...``, ``max_steps_off_policy=1``...), plus the game's keys below
(``candidates=8``, ``max_questions=6``, ``wrong_guess_reward=-0.2``...). ``--help`` lists them.
Artifacts go to ``log_path`` (printed at start); rerunning with the same ``log_path`` resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import chz

import training

if TYPE_CHECKING:
    from envs.twenty_questions import TwentyQuestionsDatasetBuilder

WIN_METRIC = "twenty_questions/win"


@chz.chz
class TwentyQuestionsTrainConfig(training.Config):
    """:class:`training.Config` with Twenty Questions defaults and the game's own keys."""

    # --- loop defaults for this env (the easy, ~15-minute local setting) --------------------
    log_path: str = "runs/twenty_questions/default"
    max_tokens: int = 16
    max_steps: int = 20
    eval_every: int = 10
    eval_batches: int | None = 1
    win_metric: str = WIN_METRIC

    # --- the game -------------------------------------------------------------------------
    candidates: int = 4
    """Candidate words listed in the prompt (0: the player is not told)."""
    max_questions: int = 4
    """Player turns per game (questions, guesses and format violations all count)."""
    batch_size: int = 4
    """Secret words (groups) per training step."""
    group_size: int = 8
    """Games per secret word (the GRPO group)."""
    eval_words: int = 16
    """Held-out words per evaluation batch (the first ones of the held-out split)."""
    eval_group_size: int = 4
    """Games per held-out word."""
    win_reward: float = 1.0
    """Reward of a right guess."""
    efficiency_bonus: float = 0.0
    """Extra reward for winning early (scaled by the turns left)."""
    wrong_guess_reward: float = 0.0
    """Reward of a wrong guess."""
    max_guesses: int | None = None
    """Wrong guesses allowed before the game is lost (None: any number)."""
    format_penalty: float = 0.0
    """Subtracted for a turn that is neither one question nor one guess (see the module docstring)."""
    fault_penalty: float = 0.1
    """Subtracted for a truncated/unparseable turn (which ends the game)."""

    def dataset_builder(self) -> TwentyQuestionsDatasetBuilder:
        """Train split and held-out split of Twenty Questions with the KB answerer."""
        from envs.twenty_questions import TwentyQuestionsConfig, TwentyQuestionsDatasetBuilder

        game = TwentyQuestionsConfig(
            max_questions=self.max_questions,
            candidates=self.candidates,
            win_reward=self.win_reward,
            efficiency_bonus=self.efficiency_bonus,
            wrong_guess_reward=self.wrong_guess_reward,
            max_guesses=self.max_guesses,
            format_penalty=self.format_penalty,
            fault_penalty=self.fault_penalty,
        )
        return TwentyQuestionsDatasetBuilder(
            batch_size=self.batch_size,
            group_size=self.group_size,
            model_name_for_tokenizer=self.model_name,
            renderer_name=self.renderer_name,
            env=game,
            seed=self.seed,
            num_batches=max(1, self.max_steps),
            test_group_size=self.eval_group_size,
            test_batch_size=self.eval_words,
        )


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(TwentyQuestionsTrainConfig, argv, prog="envs.twenty_questions.train")


if __name__ == "__main__":
    raise SystemExit(main())
