"""Train a Twenty Questions player: ``python -m envs.twenty_questions.train [key=value ...]``.

With no arguments (``make train``): the real game on the local backend with the embedded
SmolLM2-135M (offline). 8 candidate words are listed in the prompt and the player has 4 turns,
so guessing the candidates in turn wins at most half the games: winning more needs questions
that split the words still possible ("Is it crab, owl, chicken or broccoli?", which the KB
answerer reads as a disjunction). Questions are free; a right guess scores 1, anything else 0
(-0.1 for a turn that is neither a question nor a guess).

Two stages, each reported on its own (held-out win rate and question-turn fraction in the log,
in ``eval.jsonl`` and labelled on ``reward_curve.png``; ``train.log`` ends with both):

1. **Warm start** (``warm_start.*``): 11 ``cross_entropy`` steps (batches of 16) on 64 scripted
   games of the halving player with ``data.scripted_split_noise=0.3`` (each question names half of the
   words still possible, copied from the prompt, except 3 times in 10 a random number of them;
   it wins 57 of the 64 scripted games). Too few steps to learn it: the policy learns the moves (set
   questions, then ``Guess: <word>``) and part of the strategy. Its games, their order and the
   adapter's initial weights all come from ``warm_start.seed`` (1000), not from ``seed``: every
   seed starts RL from the same weights, so the seeds differ in RL only.
2. **RL**: importance-sampling policy gradient, LoRA rank 16, 8 words x 8 games per step at
   temperature 0.8, 24 tokens per turn, constant-reward groups skipped, 16 steps at lr 6e-4
   decaying linearly to 0 (``lr_schedule=linear``), each scaled by the fraction of informative
   groups (``lr_scale_by_signal``), in the compute dtype a quick probe finds faster on the
   machine (``local_compute_dtype=auto``). Held-out evaluation (64 distinct games, the same for
   every run and seed: the 61 held-out words, then 3 of them again with other candidate lists,
   drawn with ``data.test_seed``; greedy: ``eval_temperature=0``) after the warm start (step 0) and
   at the end (``eval_every=16``: the two figures the goals are read on; a mid-run evaluation costs about
   as much as an RL step), besides the untrained model's (the baseline every run reports).

Why this shape: trained to convergence on exact halving games the warm start alone wins 0.97
held-out and leaves RL nothing to add (and at higher rates from there RL random-walked down:
Adam moves the weights by about the learning rate on the one or two groups per step that are not
all wins, which ``lr_scale_by_signal`` damps); a fully noisy scripted player teaches splits RL
must unlearn. A short warm start on a mostly-halving player teaches the moves and leaves RL room.
Temperature 0.8 rather than 1: at 1 the warm-started player's sampled questions are often
malformed, so guessing early beat asking in its samples and one seed drifted to listing.

The main job's goals, on every seed: held-out win >= 0.85 after RL (listing the candidates caps
it at 0.5), RL's own gain >= +0.2 over the warm start (so the warm start stays short: a step or two more
and it alone wins too much to leave RL that room), questions on >= 0.5 of the turns before
the final guess, and the run's ``done:`` line <= 6 minutes on an idle 2-core machine. On one machine a seed reruns to the same samples, losses and held-out
games (every sampling request is seeded by its place in the run; the local backend's products
run in fixed blocks); CPUs whose bfloat16 kernels round differently draw other figures. The
figures measured per seed and machine, and the settings tried on the way to this default, are in
``envs/twenty_questions/NOTES.md``.

The smoke test is the old easy setting (4 candidates in 4 turns, where asking cannot help, so
questions cost 0.05 and the policy learns to enumerate; no warm start; 4 words x 8 games per step)::

    python -m envs.twenty_questions.train env.candidates=4 env.question_reward=-0.05 \
        warm_start.episodes=0 learning_rate=1e-3 lr_schedule=constant temperature=1 \
        max_tokens=16 data.batch_size=4 max_steps=20 eval_every=10

(:data:`SMOKE_TEST` holds these keys). It shows that the pipeline learns, not a stable finish
(its measured runs: ``NOTES.md``).

Every key of :class:`training.Config` works (``learning_rate=3e-4``, ``max_steps=40``,
``backend=tinker``, ``log_path=...``, ``max_steps_off_policy=1``, ``warm_start.episodes=0``...),
every field of the game as a nested key (``env.candidates=16``, ``env.max_questions=5``,
``env.wrong_guess_reward=-0.2``, ``env.prompt=...``; :class:`~envs.twenty_questions.config.TwentyQuestionsConfig`
holds the game's one set of defaults, the main job's), and the data keys (``data.batch_size``,
``data.group_size``, ``data.test_batch_size``, ``data.test_group_size``, ``data.test_seed``,
``data.scripted_split_noise``: the dataset builder's own names). ``--help`` lists
them. Artifacts go to ``log_path`` (printed at start); rerunning with the same ``log_path``
resumes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import chz

import training
from envs.twenty_questions.config import TwentyQuestionsConfig, TwentyQuestionsData

if TYPE_CHECKING:
    from envs.twenty_questions import TwentyQuestionsDatasetBuilder

WIN_METRIC = "twenty_questions/win"
SMOKE_TEST = (
    "env.candidates=4",
    "env.question_reward=-0.05",
    "warm_start.episodes=0",
    "learning_rate=1e-3",
    "lr_schedule=constant",
    "temperature=1",
    "max_tokens=16",
    "data.batch_size=4",
    "max_steps=20",
    "eval_every=10",
)
"""Keys of the smoke test: the easy setting (4 candidates in 4 turns, questions cost 0.05, no
warm start), which the policy learns by enumerating the candidates (module docstring)."""
QUESTIONS_METRIC = "twenty_questions/questions"
TURNS_METRIC = "twenty_questions/turns"
TURNS_BEFORE_FINAL_GUESS_METRIC = "twenty_questions/turns_before_final_guess"


@chz.chz
class TwentyQuestionsWarmStart(training.WarmStartConfig):
    """:class:`training.WarmStartConfig` with the main job's defaults (a subclass, so that setting
    one key, e.g. ``warm_start.steps=4``, keeps the others' defaults)."""

    episodes: int = 64
    steps: int = 11
    batch_size: int = 16


@chz.chz
class TwentyQuestionsTrainConfig(training.Config):
    """:class:`training.Config` with Twenty Questions loop defaults, the game (``env.*``) and its data keys."""

    # --- loop defaults for this env (the main job: warm start, then RL; module docstring) ----
    log_path: str = "runs/twenty_questions/default"
    max_tokens: int = 24
    temperature: float = 0.8
    """Sampling temperature of RL's rollouts. At 1 the warm-started player's sampled questions are
    often malformed (wrong words, repeats), so guessing early beats asking in its samples and RL
    drifted to one question then listing (capped at 0.75; ``NOTES.md`` beside this module)."""
    max_steps: int = 16
    learning_rate: float = 6e-4
    lr_schedule: training.LRSchedule = "linear"
    lr_scale_by_signal: bool = True
    eval_every: int = 16
    """Held-out evaluations after the warm start and at the end only (the goals' two figures; a
    mid-run one cost about an RL step)."""
    eval_temperature: float = 0.0
    eval_batches: int | None = 1
    win_metric: str = WIN_METRIC
    warm_start: TwentyQuestionsWarmStart = chz.field(default_factory=TwentyQuestionsWarmStart)
    """The warm start on scripted games (``warm_start.episodes=0``: none; module docstring)."""

    # --- the game: rules, rewards, difficulty (its own defaults, nested keys env.<field>) -----
    env: TwentyQuestionsConfig = chz.field(default_factory=TwentyQuestionsConfig)
    """The game (``env.candidates=8``, ``env.max_questions=6``...)."""

    # --- data: the dataset builder's keys (nested keys data.<field>) -----------------------
    data: TwentyQuestionsData = chz.field(default_factory=TwentyQuestionsData)
    """Words, games per word and held-out games (``data.batch_size=4``, ``data.test_batch_size=16``...)."""

    @classmethod
    def renamed_keys(cls) -> dict[str, str]:
        """Keys of earlier versions (their names differed from the builder's)."""
        return {
            "eval_words": "data.test_batch_size",
            "eval_seed": "data.test_seed",
            "eval_group_size": "data.test_group_size",
        }

    def eval_figures(self, metrics: Mapping[str, Any]) -> dict[str, float]:
        """The share of the player's held-out turns that were questions, two ways.

        ``question_turn_fraction``: questions / all turns (the final guess included);
        ``question_fraction_before_guess``: questions / the turns before each game's final guess
        (the figure the main job's goal is stated in: a player that asks two halving questions
        and then guesses scores 1.0 there and 0.5-0.67 on the first).
        """
        questions = metrics.get(f"env/all/{QUESTIONS_METRIC}")
        turns = metrics.get(f"env/all/{TURNS_METRIC}")
        if not isinstance(questions, int | float) or not isinstance(turns, int | float) or turns <= 0:
            return {}
        figures = {"question_turn_fraction": float(questions) / float(turns)}
        before = metrics.get(f"env/all/{TURNS_BEFORE_FINAL_GUESS_METRIC}")
        if isinstance(before, int | float) and before > 0:
            figures["question_fraction_before_guess"] = float(questions) / float(before)
        return figures

    def dataset_builder(self) -> TwentyQuestionsDatasetBuilder:
        """Train split and held-out split of Twenty Questions with the KB answerer."""
        from envs.twenty_questions import TwentyQuestionsDatasetBuilder

        return TwentyQuestionsDatasetBuilder(
            **chz.asdict(self.data),
            env=self.env,
            model_name_for_tokenizer=self.model_name,
            renderer_name=self.renderer_name,
            seed=self.seed,
            num_batches=max(1, self.max_steps),  # the training words cycle: as many batches as steps
        )


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(TwentyQuestionsTrainConfig, argv, prog="envs.twenty_questions.train")


if __name__ == "__main__":
    raise SystemExit(main())
