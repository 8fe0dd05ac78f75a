"""The training-loop configuration: one chz class, cheap to import (no tinker, no torch).

An env's ``train.py`` subclasses :class:`Config`: it overrides loop defaults, adds the env's game
config as ONE nested chz field (``env: TwentyQuestionsConfig``, set from the command line as
``env.candidates=8``, the cookbook's way) and its data keys as another (``data:
TwentyQuestionsData``, ``data.batch_size=8``: the fields of its dataset builder under the same
names, passed to it as they are), implements :meth:`Config.dataset_builder`, and, when it reads
data files, :meth:`Config.check_data`. Keys of earlier versions keep working
(``training._cli.renamed_keys``: a top-level data key, or a subclass's ``renamed_keys()``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import chz

from backend.model import SMOLLM2, BackendName  # constants: backend.model and backend import no torch

if TYPE_CHECKING:
    from tinker_cookbook.rl.types import RLDatasetBuilder

LossFnName = Literal["importance_sampling", "ppo"]
"""Policy-gradient losses the loop knows (both exist on Tinker and on the local backend)."""
LRSchedule = Literal["constant", "linear"]
"""``constant``: ``learning_rate`` every step; ``linear``: decays linearly to 0 at ``max_steps``."""
ComputeDtype = Literal["auto", "float32", "bfloat16"]
"""Local compute dtype; ``auto`` lets a quick probe of the machine pick (cached per machine)."""
EvaluatorBuilder = Callable[[], Any]
"""The cookbook's ``EvaluatorBuilder``: a callable returning a ``SamplingClientEvaluator`` or a
``TrainingClientEvaluator`` (``tinker_cookbook.eval.evaluators``), e.g. an
``InspectEvaluatorBuilder``."""


ExecutorKind = Literal["inprocess", "process", "ray"]


@dataclass(frozen=True)
class ExecutorSpec:
    """A parsed ``rollout_executor`` value: ``inprocess``, ``process:N``, ``ray:local[:N]``,
    ``ray:auto[:N]``."""

    kind: ExecutorKind = "inprocess"
    workers: int = 1
    """Worker processes / Ray actors."""
    address: str | None = None
    """Ray only: ``local`` (start a cluster on this machine) or ``auto`` (join a running one)."""

    @classmethod
    def parse(cls, text: str) -> ExecutorSpec:
        """The spec of ``text``; ``ValueError`` with a one-line message when it is not one."""
        usage = "use inprocess, process:N, ray:local[:N] or ray:auto[:N]"
        parts = text.strip().split(":")
        try:
            if parts == ["inprocess"]:
                return cls()
            if parts[0] == "process" and len(parts) == 2:
                workers = int(parts[1])
                if workers >= 1:
                    return cls("process", workers)
            if parts[0] == "ray" and len(parts) in (2, 3) and parts[1] in ("local", "auto"):
                workers = int(parts[2]) if len(parts) == 3 else min(4, os.cpu_count() or 1)
                if workers >= 1:
                    return cls("ray", workers, parts[1])
        except ValueError:
            pass
        raise ValueError(f"bad rollout_executor {text!r}: {usage}")


class ConfigError(ValueError):
    """A configuration that cannot run: a bad key or value, bad data, an env that does not fit the
    policy (the message is one line; the command line exits 2 with it)."""


def one_line(exc: BaseException) -> str:
    """An error as one line (a chz error is often several paragraphs; unknown keys and bad values
    are named the way the command line reads them)."""
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    head = lines[0].rstrip(".")
    if head.startswith("Extraneous argument"):
        # "Extraneous argument 'foo' to Blueprint for X (from command line)"
        name = head.split("'")[1] if "'" in head else head
        return f"unknown key {name!r} (run with --help to list the keys)"
    cast = next((line for line in lines[1:] if line.startswith("Could not cast")), None)
    if head.startswith("Could not interpret argument") and cast:
        param = head.split("param ")[-1].strip("'.")
        return f"bad value for {param}: {cast}"
    return head


def check_data(config: Config) -> None:
    """Run :meth:`Config.check_data`; :class:`ConfigError` (one line) on bad data."""
    try:
        config.check_data()
    except (ValueError, OSError) as exc:
        raise ConfigError(one_line(exc)) from None


@chz.chz
class WarmStartConfig:
    """A supervised warm start before RL, off by default (``warm_start.episodes=0``).

    The env's dataset builder plays ``episodes`` scripted episodes (it must implement
    ``training.SupportsScriptedEpisodes``), the rollout engine runs them with the run's own
    rollout settings (renderer, ``compaction_period``, ``max_tokens``), and ``steps``
    ``cross_entropy`` steps train on the scripted tokens, through the run's training client.
    Runs once, on a fresh start (a resumed run does not redo it). With ``eval_every > 0`` the
    held-out split is evaluated right after it (``eval.jsonl`` step 0) and again after RL, and the
    run's summary reports both.
    """

    episodes: int = 0
    """Scripted episodes to play and train on (0: no warm start)."""
    steps: int = 16
    """``cross_entropy`` steps."""
    batch_size: int = 16
    """Scripted episodes per step, each with all of its sequences (the renderer's split of an
    episode, e.g. compaction windows or one sequence per turn, does not change how much of it a
    step trains on)."""
    learning_rate: float = 1e-3
    """Adam learning rate of the warm start (the other Adam settings are the run's)."""
    seed: int = 1000
    """Seed of everything before RL: the scripted episodes the builder draws, their order, and
    the adapter's initial weights. Kept apart from the run's ``seed``, so that runs with other
    seeds start RL from the same warm-started weights and differ in RL only (one supervised
    checkpoint, several RL seeds)."""

    @chz.validate
    def _check(self) -> None:
        _non_negative("warm_start.episodes", self.episodes)
        _positive("warm_start.steps", self.steps)
        _positive("warm_start.batch_size", self.batch_size)
        _positive("warm_start.learning_rate", self.learning_rate)


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")


def _non_negative(name: str, value: float) -> None:
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


@chz.chz
class Config:
    """Configuration of one RL run (fields are the command-line keys).

    The dataset (train and held-out splits) comes from :meth:`dataset_builder`, which an env's
    subclass implements; the batch size and group size are therefore env fields (its ``data``
    field, named like its dataset builder's).
    """

    # --- model and backend ---------------------------------------------------------------
    model_name: str = SMOLLM2
    """Base model to train (the local backend serves SmolLM2-135M-Instruct and a tiny random Llama)."""
    renderer_name: str | None = None
    """Renderer of the conversation, passed to the env's dataset builder with ``model_name``
    (None: the model's recommended one, ``renderers_ext.recommended_renderer_name``: the
    cookbook's ``model_info``, else the renderer matching the model's chat template;
    ``qwen3_instruct`` for SmolLM2)."""
    backend: BackendName = "auto"
    """Where training and sampling run: ``local``, ``tinker`` or ``auto``."""
    base_url: str | None = None
    """Tinker service URL override (tinker backend only)."""
    local_tokens_per_pass: int = 1024
    """Local backend: padded tokens per training forward/backward pass (peak memory is about
    ``tokens x vocabulary x 12`` bytes plus activations: ~1.5 GB at 1024 for SmolLM2)."""
    local_prefix_cache_tokens: int = 8192
    """Local backend: KV-cache tokens kept for prompt-prefix reuse per sampler."""
    local_compute_dtype: ComputeDtype = "auto"
    """Local backend: ``bfloat16`` samples with bfloat16 weights and trains under bfloat16
    autocast (LoRA weights and Adam stay float32): 1.6-2.3x faster on CPUs with AMX, slower on
    others, at the price of ~1e-2 sampler-vs-trainer logprob gaps (``optim/kl_*``); ``float32``
    keeps them at ~1e-5; ``auto`` (default) picks whichever a quick probe finds faster on this
    machine (cached per machine, logged in ``train.log``)."""
    lora_rank: int = 16
    """LoRA rank of the trained adapter."""
    seed: int = 0
    """Seed of the LoRA initialisation (unless a warm start runs: :meth:`adapter_seed`), the
    Python/NumPy/torch RNGs, the data order and of every
    sampling request (``SamplingParams.seed`` from the run seed and the request's place: step,
    group, env, attempt, turn): on the local backend the same seed gives the same sampled tokens
    and metrics on one machine, whatever the timing."""
    load_checkpoint_path: str | None = None
    """Start from these weights (fresh optimizer), e.g. an SFT warm start; ignored on resume."""

    # --- optimisation --------------------------------------------------------------------
    learning_rate: float = 1e-3
    """Peak Adam learning rate."""
    lr_schedule: LRSchedule = "constant"
    """Learning-rate schedule over ``max_steps``."""
    lr_scale_by_signal: bool = False
    """Scale each step's learning rate by the fraction of its groups whose rewards are not all
    equal. Adam normalises the gradient, so a step that trains on one informative group moves
    the weights as far as a step that trains on all of them; late in a run, when most groups are
    constant, those small-evidence steps random-walk the policy away from what it learned."""
    beta1: float = 0.9
    """Adam beta1."""
    beta2: float = 0.999
    """Adam beta2."""
    eps: float = 1e-8
    """Adam epsilon."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    grad_clip_norm: float = 1.0
    """Global gradient-norm clip (0 disables)."""
    loss_fn: LossFnName = "importance_sampling"
    """Policy-gradient loss."""
    ppo_clip: float = 0.2
    """PPO ratio clip epsilon (``loss_fn=ppo`` only)."""
    remove_constant_reward_groups: bool = True
    """Drop groups whose trajectories all got the same reward (they carry no gradient)."""
    advantage_normalize_std: bool = False
    """Divide each group's centred advantages by its reward std (``rollout.AdvantageConfig.normalize_std``)."""
    kl_penalty_coef: float = 0.0
    """KL penalty to the policy RL started from (the loaded checkpoint or the new adapter, after
    any warm start): each step adds ``coef * (mean_diff - diff)`` to every sampled token's
    advantage, ``diff = logp_policy - logp_reference`` (the cookbook's ``incorporate_kl_penalty``;
    metric ``kl_policy_base``). Lets a higher learning rate follow the reward without drifting from
    the reference where the reward cannot see. 0: off (the datums are untouched)."""
    advantage_discount: float | None = None
    """Per-turn discounting: turn ``t`` gets ``G_t - mean_group(G_0)`` with ``G_t`` the return from
    ``t`` discounted by this factor per turn (``rollout.AdvantageConfig.discount``; None: one
    scalar per episode, the cookbook's)."""

    # --- rollouts ------------------------------------------------------------------------
    compaction_period: int = 0
    """Strip earlier thinking from the history once every this many assistant turns (periodic
    compaction, ``renderers_ext.CompactingRenderer``): within a window the episode extends and
    trains as one sequence; each window start re-renders once. The env must support it
    (``rollout.SupportsCompaction``, as every ``envs.ChatEnv`` does), else the run fails with
    ``CompactionUnsupported``. 0: never (the renderer as it is)."""
    rollout_executor: str = "inprocess"
    """Where group rollouts run (``training._executors``, docs/executors.md): ``inprocess``;
    ``process:N`` (N spawned worker processes); ``ray:local[:N]`` (N Ray actors on a cluster
    started on this machine) or ``ray:auto[:N]`` (a running Ray cluster). Workers build the envs
    from pickled builders and sample from this step's saved weights; same seeds, same datums.
    ``inprocess`` also honours the cookbook's ``set_rollout_executor``."""
    warm_start: WarmStartConfig = chz.field(default_factory=WarmStartConfig)
    """Supervised warm start before RL (``warm_start.episodes=64 warm_start.steps=16``...; see
    :class:`WarmStartConfig`)."""

    # --- sampling ------------------------------------------------------------------------
    max_tokens: int = 64
    """Sampled tokens per assistant turn."""
    temperature: float = 1.0
    """Sampling temperature for training rollouts."""
    eval_temperature: float = 1.0
    """Sampling temperature for held-out evaluation."""
    max_steps_off_policy: int = 0
    """0: synchronous on-policy. k > 0: the rollouts of the next k batches are sampled while the
    current batch trains, with weights at most k steps old (async off-policy mode)."""
    compute_post_kl: bool = False
    """Also measure the KL between the pre- and post-update policies (one extra pass)."""

    # --- schedule and artifacts ----------------------------------------------------------
    max_steps: int = 20
    """Training steps (capped by the dataset length)."""
    time_budget_minutes: float = 0.0
    """Stop after the first step that ends past this many minutes of this invocation (then
    checkpoint and evaluate as at the end); 0: no budget."""
    log_path: str = "runs/train"
    """Folder of every artifact; rerunning with the same folder resumes."""
    eval_every: int = 10
    """Evaluate on the held-out split every this many steps, and after the last (0: never)."""
    save_every: int = 1
    """Save a resumable checkpoint every this many steps, and after the last (0: only the last)."""
    evaluator_builders: list[EvaluatorBuilder] = chz.field(default_factory=list)
    """The cookbook's evaluators (``SamplingClientEvaluator`` / ``TrainingClientEvaluator``
    builders): run before step ``s`` trains when ``s % eval_every == 0``, on the weights after
    ``s`` updates; their metrics join row ``s`` of ``metrics.jsonl`` under their own names, as in
    the cookbook's trainers. Set from Python (a builder is an object, not a command-line value)."""
    evaluator: str = ""
    """Evaluator builders by name, comma-separated ``module:attr`` (e.g.
    ``evaluator=envs.evals.builders:qa_inspect``): the command line's :attr:`evaluator_builders`,
    run with them. A builder taking ``model_name`` / ``renderer_name`` gets the run's."""
    infrequent_evaluator_builders: list[EvaluatorBuilder] = chz.field(default_factory=list)
    """Like :attr:`evaluator_builders`, every ``infrequent_eval_every`` steps (slow evaluations)."""
    infrequent_eval_every: int = 100
    """Period of :attr:`infrequent_evaluator_builders` (0: never)."""
    eval_batches: int | None = None
    """Held-out batches per evaluation (None: the whole held-out split); always the first ones,
    so every evaluation plays the same games."""
    transcripts_per_eval: int = 4
    """Episodes written as HTML transcripts per evaluation (``transcripts/eval_stepNNNN.html``)."""
    train_transcripts: int = 2
    """Training episodes written per step (``transcripts/train_stepNNNN.html``; 0: none)."""
    win_metric: str = "win"
    """Env metric that marks a won episode (summed over turns, > 0): the held-out "win" of
    ``eval/win_rate``. An env's config sets it to the metric its env reports (Twenty Questions
    ``twenty_questions/win``, math and code ``math/correct``); when an env never reports it, an
    episode with a positive total reward counts as won (``docs/training-protocol.md``)."""
    keep_last: int = 2
    """Local backend: resumable checkpoints kept on disk (older ones are deleted; 0 keeps all)."""
    progress: bool = True
    """Show a progress bar (rich)."""
    wandb_project: str | None = None
    """Also log every metrics and eval row to Weights & Biases (and the cookbook's other trackers
    when installed) through the cookbook's ``ml_log``, names unchanged; None: no tracker."""
    wandb_name: str | None = None
    """The tracker run's display name (None: the tracker picks one)."""
    resume: bool = True
    """Continue from the last checkpoint in ``log_path`` (False: refuse a non-empty folder)."""

    @chz.validate
    def _check(self) -> None:
        _positive("learning_rate", self.learning_rate)
        _positive("lora_rank", self.lora_rank)
        _positive("max_tokens", self.max_tokens)
        _positive("local_tokens_per_pass", self.local_tokens_per_pass)
        _non_negative("local_prefix_cache_tokens", self.local_prefix_cache_tokens)
        _non_negative("max_steps", self.max_steps)
        _non_negative("temperature", self.temperature)
        _non_negative("eval_every", self.eval_every)
        _non_negative("infrequent_eval_every", self.infrequent_eval_every)
        _non_negative("save_every", self.save_every)
        _non_negative("max_steps_off_policy", self.max_steps_off_policy)
        _non_negative("grad_clip_norm", self.grad_clip_norm)
        _non_negative("transcripts_per_eval", self.transcripts_per_eval)
        _non_negative("train_transcripts", self.train_transcripts)
        _non_negative("keep_last", self.keep_last)
        _non_negative("time_budget_minutes", self.time_budget_minutes)
        _non_negative("kl_penalty_coef", self.kl_penalty_coef)
        if self.eval_batches is not None and self.eval_batches < 1:
            raise ValueError(f"eval_batches must be >= 1 or None, got {self.eval_batches}")
        _non_negative("compaction_period", self.compaction_period)
        ExecutorSpec.parse(self.rollout_executor)
        if self.advantage_discount is not None and not 0.0 <= self.advantage_discount <= 1.0:
            raise ValueError(f"advantage_discount must be in [0, 1] or None, got {self.advantage_discount}")
        if not 0 < self.ppo_clip < 1:
            raise ValueError(f"ppo_clip must be in (0, 1), got {self.ppo_clip}")
        if not self.log_path:
            raise ValueError("log_path must not be empty")

    # --- hooks for env subclasses ----------------------------------------------------------
    def dataset_builder(self) -> RLDatasetBuilder:
        """The env's dataset builder (train split and held-out split). Subclasses implement it
        with lazy imports, so parsing the command line stays fast."""
        raise NotImplementedError(f"{type(self).__name__} must implement dataset_builder()")

    def check_data(self) -> None:
        """Validate the env's data (files exist, parse, every row usable) before the model loads and
        before anything is written; raise ``ValueError`` / ``OSError`` with a one-line message
        naming the file and the first bad line. Runs in the command line before the heavy
        imports, so it must stay cheap to import. Default: nothing to check."""

    def eval_figures(self, metrics: Mapping[str, Any]) -> dict[str, float]:
        """The env's own figures of a held-out evaluation, derived from its metrics (the keys of an
        ``eval.jsonl`` row without the ``eval/`` prefix, e.g. ``env/all/<env metric>``): logged in
        that row as ``eval/<name>`` and shown next to the win rate after each evaluation and in
        the run's summary. None by default; Twenty Questions adds its question-turn fraction."""
        return {}

    def adapter_seed(self) -> int:
        """Seed of the new adapter's initial weights: ``warm_start.seed`` when the config's warm
        start runs (the weights RL starts from then do not depend on :attr:`seed`), else
        :attr:`seed`."""
        return self.warm_start.seed if self.warm_start.episodes > 0 else self.seed

    def lr_at(self, step: int) -> float:
        """Learning rate of step ``step`` under :attr:`lr_schedule`."""
        if self.lr_schedule == "linear" and self.max_steps > 0:
            return self.learning_rate * max(0.0, 1.0 - step / self.max_steps)
        return self.learning_rate

    def loss_fn_config(self) -> dict[str, float] | None:
        """Extra loss configuration sent with ``forward_backward``."""
        if self.loss_fn == "ppo":
            return {"clip_low_threshold": 1.0 - self.ppo_clip, "clip_high_threshold": 1.0 + self.ppo_clip}
        return None

    def to_json(self) -> dict[str, Any]:
        """The config as plain JSON (with the concrete class name), for ``config.json``."""
        data = chz.asdict(self)
        return {"__class__": f"{type(self).__module__}.{type(self).__qualname__}", **data}
