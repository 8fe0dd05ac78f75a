"""Train a Twenty Questions player: ``python -m envs.twenty_questions.train [key=value ...]``.

With no arguments: the easy setting on the local backend with the embedded SmolLM2-135M
(offline): 4 candidate words listed in the prompt, 4 turns, the deterministic KB answerer,
LoRA rank 16 on every linear layer, lr 1e-3 (AdamW, grad clip 1.0), 4 words x 8 games per step
at temperature 1, 16 tokens per turn, constant-reward groups skipped, 25 steps, bfloat16 compute
(``local_compute_dtype``: training passes 1.6-2.3x faster than float32 here). Held-out
evaluation (64 games: 16 held-out words x 4, the same games every time) before training, after
steps 10 and 20 and at the end.

Rewards: 1 for the right guess; -0.1 (``format_penalty``) for a turn that is neither a question
nor a guess; -0.05 (``question_reward``) for a question. Why charge for asking: with 4
candidates in 4 turns, guessing them in turn always wins, so a question cannot help here, and
without the cost a run can settle on "ask anything" (a question scores 0, a ramble -0.1, and the
untrained model asks far more often than it guesses), where wins, and so learning, become rare.
Learning to ask is the separate setting of ``bench/twenty_questions_learning.py`` (8 candidates,
4 turns, no cost). A turn cut at 16 tokens is played as written (``play_truncated``: its first
guess or question counts, and it is closed with the end-of-turn token, so the episode still
trains as one sequence; 16 tokens cut ~90% of the untrained model's turns, often after a correct
``Guess: <word>``).

Measured (2 cores, 2026-12-03; held-out win rate after steps 0 / 10 / 20 / 25):
- this default, from a fresh clone (``make train``, idle machine): 0 / 0.56 / 0.83 / 0.88 in
  13.9 min (15.3 min with the set-up); an earlier fresh clone: 0.02 / 0.36 / 0.83 / 0.84 in
  18.6 min (tests ran beside it for a while); at 20 steps: 0 / 0.72 / 0.83 in 10.9 min;
- float32, no question cost, 20 steps: 0 / 0.36 / 0.81 in 15.1 min; another draw (bfloat16)
  asked on every turn with no win by step 4 (stopped);
- plus ``truncation_penalty=0.05``: 0 / 0.94 / 0.89 / 0.83 in 9.9 min (turns get short, so
  steps are cheap); with ``lr_scale_by_signal=true`` too: 0 / 0.64 / 0.78 / 0.80 in 11.8 min;
  with ``lr_schedule=linear`` instead: 0 / 0.09 / 0.58 (stopped at step 20): that draw first
  learned short questions (-0.05 beats a cut ramble at -0.15) and found guessing late, with the
  rate already decayed. So the default charges neither.
The learned policy enumerates the candidates (``Guess: <word>``). Runs differ although the seed is
fixed (the sampler draws unseeded), so treat a single run's curve as one draw.

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
    max_steps: int = 25
    local_compute_dtype: training.ComputeDtype = "bfloat16"
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
    question_reward: float = -0.05
    """Reward of a question (see the module docstring: asking cannot help when ``candidates <=
    max_questions``, and a small cost keeps the policy off the "ask anything" plateau)."""
    max_guesses: int | None = None
    """Wrong guesses allowed before the game is lost (None: any number)."""
    format_penalty: float = 0.1
    """Subtracted for a turn that is neither one question nor one guess (see the module docstring)."""
    fault_penalty: float = 0.1
    """Subtracted for an unparseable turn (which ends the game), and a truncated one unless played."""
    play_truncated: bool = True
    """Play a turn cut by ``max_tokens`` as written instead of ending the game (module docstring)."""
    truncation_penalty: float = 0.0
    """Subtracted for a played truncated turn (a cost of not finishing the turn; see the module
    docstring for why the default does not charge it)."""

    def dataset_builder(self) -> TwentyQuestionsDatasetBuilder:
        """Train split and held-out split of Twenty Questions with the KB answerer."""
        from envs.twenty_questions import TwentyQuestionsConfig, TwentyQuestionsDatasetBuilder

        game = TwentyQuestionsConfig(
            max_questions=self.max_questions,
            candidates=self.candidates,
            win_reward=self.win_reward,
            efficiency_bonus=self.efficiency_bonus,
            wrong_guess_reward=self.wrong_guess_reward,
            question_reward=self.question_reward,
            max_guesses=self.max_guesses,
            format_penalty=self.format_penalty,
            fault_penalty=self.fault_penalty,
            play_truncated=self.play_truncated,
            truncation_penalty=self.truncation_penalty,
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
