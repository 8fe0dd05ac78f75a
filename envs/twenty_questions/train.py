"""Train a Twenty Questions player: ``python -m envs.twenty_questions.train [key=value ...]``.

With no arguments: the game's default setting (:class:`~envs.twenty_questions.config.TwentyQuestionsConfig`:
4 candidate words listed in the prompt, 4 turns, a -0.05 cost per question, truncated turns
played as written; its docstring says why) with the deterministic KB answerer, on the local
backend with the embedded SmolLM2-135M (offline): LoRA rank 16 on every linear layer, lr 1e-3
(AdamW, grad clip 1.0), 4 words x 8 games per step at temperature 1, 16 tokens per turn,
constant-reward groups skipped, 25 steps, the compute dtype a quick probe finds faster on the
machine (``local_compute_dtype=auto``: bfloat16 where it pays, e.g. with AMX, float32 elsewhere).
Held-out evaluation (64 games: 16 held-out words x 4, the same games every time) before training,
after steps 10 and 20 and at the end.

Learning to ask is the separate setting of ``bench/twenty_questions_learning.py`` (8 candidates,
4 turns, no cost).

Measured (2 cores, 2026-12-03; held-out win rate after steps 0 / 10 / 20 / 25):
- this default, from a fresh clone (``make train``, idle machine): 0 / 0.56 / 0.83 / 0.88 in
  13.9 min (15.3 min with the set-up); an earlier fresh clone: 0.02 / 0.36 / 0.83 / 0.84 in
  18.6 min (tests ran beside it for a while); at 20 steps: 0 / 0.72 / 0.83 in 10.9 min;
- float32, no question cost, 20 steps: 0 / 0.36 / 0.81 in 15.1 min; another draw (bfloat16)
  asked on every turn with no win by step 4 (stopped);
- plus ``env.truncation_penalty=0.05``: 0 / 0.94 / 0.89 / 0.83 in 9.9 min (turns get short, so
  steps are cheap); with ``lr_scale_by_signal=true`` too: 0 / 0.64 / 0.78 / 0.80 in 11.8 min;
  with ``lr_schedule=linear`` instead: 0 / 0.09 / 0.58 (stopped at step 20): that draw first
  learned short questions (-0.05 beats a cut ramble at -0.15) and found guessing late, with the
  rate already decayed. So the default charges neither.
The learned policy enumerates the candidates (``Guess: <word>``). Runs differ although the seed is
fixed (the sampler draws unseeded), so treat a single run's curve as one draw.

Every key of :class:`training.Config` works (``learning_rate=3e-4``, ``max_steps=40``,
``backend=tinker``, ``model_name=...``, ``log_path=...``, ``max_steps_off_policy=1``...), every
field of the game as a nested key (``env.candidates=8``, ``env.max_questions=6``,
``env.wrong_guess_reward=-0.2``, ``env.prompt=...``), and the data keys below (``batch_size``,
``group_size``, ``eval_words``, ``eval_group_size``). ``--help`` lists them. Artifacts go to
``log_path`` (printed at start); rerunning with the same ``log_path`` resumes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import chz

import training
from envs.twenty_questions.config import TwentyQuestionsConfig

if TYPE_CHECKING:
    from envs.twenty_questions import TwentyQuestionsDatasetBuilder

WIN_METRIC = "twenty_questions/win"
QUESTIONS_METRIC = "twenty_questions/questions"
TURNS_METRIC = "twenty_questions/turns"


@chz.chz
class TwentyQuestionsTrainConfig(training.Config):
    """:class:`training.Config` with Twenty Questions loop defaults, the game (``env.*``) and its data keys."""

    # --- loop defaults for this env (the ~15-minute local run) -------------------------------
    log_path: str = "runs/twenty_questions/default"
    max_tokens: int = 16
    max_steps: int = 25
    eval_every: int = 10
    eval_batches: int | None = 1
    win_metric: str = WIN_METRIC

    # --- the game: rules, rewards, difficulty (its own defaults, nested keys env.<field>) -----
    env: TwentyQuestionsConfig = chz.field(default_factory=TwentyQuestionsConfig)
    """The game (``env.candidates=8``, ``env.max_questions=6``...)."""

    # --- data -----------------------------------------------------------------------------
    batch_size: int = 4
    """Secret words (groups) per training step."""
    group_size: int = 8
    """Games per secret word (the GRPO group)."""
    eval_words: int = 16
    """Held-out words per evaluation batch (the first ones of the held-out split)."""
    eval_group_size: int = 4
    """Games per held-out word."""

    scripted_split_noise: float = 0.0
    """Warm start (``warm_start.episodes > 0``): probability that a scripted question splits the
    words still possible at random instead of in half."""

    def eval_figures(self, metrics: Mapping[str, Any]) -> dict[str, float]:
        """``question_turn_fraction``: the share of the player's held-out turns that were questions."""
        questions = metrics.get(f"env/all/{QUESTIONS_METRIC}")
        turns = metrics.get(f"env/all/{TURNS_METRIC}")
        if not isinstance(questions, int | float) or not isinstance(turns, int | float) or turns <= 0:
            return {}
        return {"question_turn_fraction": float(questions) / float(turns)}

    def dataset_builder(self) -> TwentyQuestionsDatasetBuilder:
        """Train split and held-out split of Twenty Questions with the KB answerer."""
        from envs.twenty_questions import TwentyQuestionsDatasetBuilder

        return TwentyQuestionsDatasetBuilder(
            batch_size=self.batch_size,
            group_size=self.group_size,
            model_name_for_tokenizer=self.model_name,
            renderer_name=self.renderer_name,
            env=self.env,
            seed=self.seed,
            num_batches=max(1, self.max_steps),
            test_group_size=self.eval_group_size,
            test_batch_size=self.eval_words,
            scripted_split_noise=self.scripted_split_noise,
        )


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(TwentyQuestionsTrainConfig, argv, prog="envs.twenty_questions.train")


if __name__ == "__main__":
    raise SystemExit(main())
