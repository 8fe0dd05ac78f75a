"""The RL loop: sample a batch of groups, build datums, train, refresh the sampler, log, save.

One step ``s`` (the policy has had ``s`` updates when it starts):

1. evaluate on the held-out split when ``s % eval_every == 0`` (``eval.jsonl``, transcripts);
2. take the rollouts of batch ``s``, sampled with weights of step ``s - j``, ``0 <= j <=
   max_steps_off_policy`` (``j = 0``: on-policy; with ``k > 0`` the next ``k`` batches are
   sampled in the background while this one trains);
3. drop constant-reward groups, assemble datums with group-centred advantages (cookbook data
   processing), add the KL penalty to the reference policy when ``kl_penalty_coef > 0``
   (``training._kl``), enqueue ``forward_backward`` and ``optim_step`` back to back, then await both;
4. KL between sampler and trainer logprobs (``optim/kl_sample_train_v1/v2``), new sampler;
5. append the row of step ``s`` to ``metrics.jsonl``, redraw the curve, and save a checkpoint
   (``batch = s + 1``) when due.

Resuming truncates ``metrics.jsonl`` to the rows before the checkpoint's ``batch`` (and
``eval.jsonl`` to the rows up to it) before running, so a run killed anywhere has every step
exactly once.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import tinker
from tinker_cookbook.rl.metrics import compute_kl_sample_train, compute_post_kl
from tinker_cookbook.rl.types import RLDataset, RLDatasetBuilder, TrajectoryGroup

from backend.model import register_tokenizers
from rollout import AdvantageConfig, EngineConfig, SupportsCompaction, informative_groups
from training import _checkpoint as ckpt
from training._config import Config, ConfigError, check_data
from training._episodes import EVAL_EPISODES_FILE, write_eval_episodes
from training._evaluators import build_evaluators, named_builders, run_evaluators
from training._executors import RolloutExecutor, WorkerSampler, open_executor, saved_sampler
from training._kl import apply_kl_penalty, reference_client
from training._logging import (
    CONFIG_FILE,
    EVAL_FILE,
    METRICS_FILE,
    JsonlLog,
    read_json,
    read_rows,
    write_json_atomic,
)
from training._metrics import group_metrics
from training._plot import PLOT_FILE, plot_reward_curve
from training._progress import ProgressDisplay
from training._rollouts import (
    SampledBatch,
    batch_seed,
    rollout_config,
    sample_batch,
    to_datums,
    without_mask,
)
from training._trackers import Trackers
from training._transcripts import write_transcripts
from training._warm_start import check_scripted_episodes, scripted_warm_start

logger = logging.getLogger(__name__)

TRANSCRIPTS_DIR = "transcripts"
LOG_FILE = "train.log"
WARM_START_FILE = "warm_start.json"
STAGE_KEY = "stage"
"""Key of every ``eval.jsonl`` row naming the stage the evaluation closes: :data:`STAGE_UNTRAINED`
(the policy before any training, step 0), :data:`STAGE_WARM_START` (after the warm start, step
0) or :data:`STAGE_RL` (after ``step`` RL steps). A learning claim compares them."""
STAGE_UNTRAINED = "untrained"
STAGE_WARM_START = "warm_start"
STAGE_RL = "rl"
STAGE_TITLES = {
    STAGE_UNTRAINED: "the policy before any training",
    STAGE_WARM_START: "after the warm start",
    STAGE_RL: "after {step} RL steps",
}


class RunFolderError(RuntimeError):
    """The run folder cannot be used as asked (e.g. not empty and ``resume=False``)."""


@dataclass(frozen=True)
class TrainSummary:
    """What a call to :func:`train` did."""

    log_path: Path
    """The run folder."""
    start_step: int
    """First step this call ran (> 0 when it resumed)."""
    end_step: int
    """Steps completed in total."""
    final_eval: dict[str, Any] = field(default_factory=dict)
    """The last ``eval.jsonl`` row (empty when evaluation is off)."""
    seconds: float = 0.0
    """Wall-clock time of this call."""
    warm_start: dict[str, Any] = field(default_factory=dict)
    """The run's warm-start metrics (``warm_start.json``; empty when it had none)."""
    warm_start_eval: dict[str, Any] = field(default_factory=dict)
    """The held-out evaluation right after the warm start (``eval.jsonl`` step 0, stage
    ``warm_start``; empty when the run had no warm start or no evaluation)."""
    untrained_eval: dict[str, Any] = field(default_factory=dict)
    """The held-out evaluation of the policy before any training (``eval.jsonl`` step 0, stage
    ``untrained``; run before the warm start when there is one; empty when evaluation is off)."""
    steps_without_datum: int = 0
    """Steps of the run (all of ``metrics.jsonl``) that trained on no datum."""
    steps_logged: int = 0
    """Steps in ``metrics.jsonl``."""

    figures: tuple[str, ...] = ()
    """The env's own held-out figures (:meth:`training.Config.eval_figures`) shown next to the win
    rate in :meth:`describe`."""

    @property
    def learned_nothing(self) -> bool:
        """Most steps trained on no datum: the policy (almost) never changed."""
        return self.steps_logged > 0 and self.steps_without_datum * 2 > self.steps_logged

    def describe(self) -> str:
        """A short human-readable report: the warm start and RL, each with its held-out result."""
        lines = [f"done: steps {self.start_step}..{self.end_step} in {self.seconds / 60:.1f} min"]
        if self.learned_nothing:
            lines.append(
                f"warning: {self.steps_without_datum} of {self.steps_logged} steps trained on no datum "
                f"(every group had one reward): this run learned next to nothing. {NO_SIGNAL_ADVICE}"
            )
        if self.warm_start:
            ws = self.warm_start
            lines.append(
                f"warm start: {int(ws.get('warm_start/episodes', 0))} scripted episodes, "
                f"{int(ws.get('warm_start/steps', 0))} steps, loss/token "
                f"{ws.get('warm_start/loss_first', 0.0):.3f} -> {ws.get('warm_start/loss_last', 0.0):.3f}"
            )
        if self.untrained_eval:
            lines.append(f"held-out before any training: {_eval_line(self.untrained_eval, self.figures)}")
        if self.warm_start_eval:
            lines.append(f"held-out after the warm start: {_eval_line(self.warm_start_eval, self.figures)}")
        if self.final_eval and int(self.final_eval.get("step", 0)) > 0:
            lines.append(
                f"held-out after {self.final_eval.get('step')} RL steps: {_eval_line(self.final_eval, self.figures)}"
            )
        lines.append(f"artifacts: {self.log_path}")
        return "\n".join(lines)


def _figures_line(row: dict[str, Any], figures: Sequence[str]) -> str:
    """``name=value`` of each of the env's figures present in an ``eval.jsonl`` row."""
    return " ".join(
        f"{name}={row[f'eval/{name}']:.3f}" for name in figures if isinstance(row.get(f"eval/{name}"), float)
    )


def _eval_line(row: dict[str, Any], figures: Sequence[str] = ()) -> str:
    win = row.get("eval/win_rate")
    rew = row.get("eval/reward/mean")
    if isinstance(win, float) and isinstance(rew, float):
        extra = _figures_line(row, figures)
        return f"win_rate={win:.3f} reward={rew:.3f}" + (f" {extra}" if extra else "")
    return str(row)


METRIC_NO_DATUM = "train/no_datum"
"""1.0 on a step that trained on no datum (every group was dropped as constant, or none sampled)."""
NO_SIGNAL_ADVICE = (
    "To get a signal: warm start the policy on a few solved episodes, keep constant groups "
    "(remove_constant_reward_groups=False, with a reward that varies within groups), or shape "
    "the reward (partial credit, format rewards); see docs/training.md"
)
"""What to do when steps train on no datum (in the warning and the end-of-run line)."""

WarmStart = Callable[[Any, Config], Awaitable[dict[str, float]]]
"""``async (training_client, config) -> metrics``: runs once on a fresh start (not on resume),
before the first sampler is made; e.g. an SFT warm start with ``cross_entropy``."""


@dataclass
class _Pending:
    """A batch being sampled in the background."""

    done: anyio.Event = field(default_factory=anyio.Event)
    result: SampledBatch | None = None
    error: BaseException | None = None

    async def wait(self) -> SampledBatch:
        await self.done.wait()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def sampled_mean_nll(datums: Sequence[Any]) -> float:
    """Mean negative log-likelihood, under the sampler, of the sampled (masked-in) tokens of RL
    datums: ``train_mean_nll`` in ``metrics.jsonl``, the name a cookbook SL run uses for its
    training loss. For RL it is the policy's surprise at its own samples (falls as it sharpens)."""
    total = count = 0.0
    for datum in datums:
        logprobs = datum.loss_fn_inputs["logprobs"].to_torch()
        mask = (
            datum.loss_fn_inputs["mask"].to_torch().float()
            if "mask" in datum.loss_fn_inputs
            else (logprobs != 0).float()
        )
        total += float(-(logprobs * mask).sum())
        count += float(mask.sum())
    return total / count if count else 0.0


def _sampler_counts(client: Any) -> tuple[int, int] | None:
    """(prefilled, reused) prompt tokens so far of a local sampler (None on other backends)."""
    stats = getattr(client, "stats", None)
    if stats is None or not hasattr(stats, "prefilled_tokens"):
        return None
    return int(stats.prefilled_tokens), int(stats.reused_tokens)


def _sampler_delta(before: tuple[int, int] | None, client: Any) -> dict[str, float]:
    """``sampler/prefill_tokens`` (prompt tokens run through the model) and
    ``sampler/reused_tokens`` (prompt tokens whose KV came from the prefix cache) since ``before``."""
    after = _sampler_counts(client)
    if before is None or after is None:
        return {}
    return {
        "sampler/prefill_tokens": float(after[0] - before[0]),
        "sampler/reused_tokens": float(after[1] - before[1]),
    }


async def _check_compaction(dataset: RLDataset, index: int, period: int) -> None:
    """Refuse, before any sampling, a ``compaction_period`` the envs cannot honour (makes the envs
    of the first group of batch ``index``; nothing is sampled or stepped)."""
    builders = dataset.get_batch(index)
    if not builders:
        return
    try:
        envs = list(await builders[0].make_envs())
    finally:
        await builders[0].cleanup()
    unable = next((env for env in envs if not isinstance(env, SupportsCompaction)), None)
    if unable is not None:
        raise ConfigError(
            f"compaction_period={period} but {type(unable).__name__} cannot compact "
            "(no set_compaction_period; see rollout.SupportsCompaction): use compaction_period=0"
        )


def _make_service_client(config: Config, log_path: Path) -> Any:
    from backend import make_service_client, resolve_backend

    if resolve_backend(config.backend) == "local":
        from transformers.utils import logging as hf_logging

        register_tokenizers()  # the cookbook's evaluators look tokenizers up by model name

        hf_logging.disable_progress_bar()  # "Loading weights" bars of every sampler snapshot
        return make_service_client(
            "local",
            root=log_path / ckpt.CHECKPOINT_DIR,
            max_tokens_per_pass=config.local_tokens_per_pass,
            prefix_cache_tokens=config.local_prefix_cache_tokens,
            compute_dtype=config.local_compute_dtype,
            seed=config.seed,
        )
    kwargs = {"base_url": config.base_url} if config.base_url else {}
    return make_service_client("tinker", **kwargs)


def _same_tokenizer(a: Any, b: Any) -> bool:
    """Whether two tokenizers map text to the same ids (same vocabulary, special tokens included)."""
    if a is b:
        return True
    vocab_a, vocab_b = getattr(a, "get_vocab", None), getattr(b, "get_vocab", None)
    if vocab_a is not None and vocab_b is not None:
        return vocab_a() == vocab_b()
    probe = "Hello, world! 12345 <|im_start|>user\nÜnïcødé ✓<|im_end|>"
    return list(a.encode(probe)) == list(b.encode(probe))


def _tokenizer_name(tokenizer: Any) -> str:
    size = len(tokenizer) if hasattr(tokenizer, "__len__") else "?"
    return f"{getattr(tokenizer, 'name_or_path', type(tokenizer).__name__)!r} ({size} tokens)"


async def check_env_tokenizer(dataset: RLDataset, index: int, policy_tokenizer: Any) -> str:
    """Refuse an env whose tokenizer is not the policy's, before any sampling.

    Makes the envs of the first group of batch ``index`` (nothing is sampled or stepped; the
    group's ``cleanup`` runs after) and compares the tokenizer of their renderer with ``policy_tokenizer``. Returns what was checked
    (for the log); an env with no ``renderer`` cannot be checked and says so.

    Raises:
        ConfigError: one line: the env's tokenizer differs, or the env's renderer or tokenizer
            cannot be made for its model.
    """
    from renderers_ext import TokenizerNotFoundError, UnknownRendererError

    builders = dataset.get_batch(index)
    if not builders:
        return "env tokenizer not checked: empty batch"
    try:
        envs = await builders[0].make_envs()
    except (UnknownRendererError, TokenizerNotFoundError) as exc:
        raise ConfigError(str(exc)) from None
    finally:
        with anyio.CancelScope(shield=True):
            await builders[0].cleanup()  # the envs made here are never played
    renderer = getattr(envs[0], "renderer", None) if envs else None
    tokenizer = getattr(renderer, "tokenizer", None)
    if tokenizer is None:
        return (
            f"env tokenizer not checked: {type(envs[0]).__name__ if envs else 'no env'} exposes no renderer"
        )
    if not _same_tokenizer(tokenizer, policy_tokenizer):
        raise ConfigError(
            f"the env's tokenizer {_tokenizer_name(tokenizer)} is not the policy's {_tokenizer_name(policy_tokenizer)}: "
            "build the env for the policy's model (model_name_for_tokenizer=<model_name>)"
        )
    name = getattr(renderer, "_renderer_name", None) or type(renderer).__name__
    return f"env renderer {name} on the policy's tokenizer {_tokenizer_name(tokenizer)}"


def _setup_file_logging(log_path: Path) -> logging.Handler:
    handler = logging.FileHandler(log_path / LOG_FILE, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    for noisy in ("httpx", "httpcore", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handler


def train(
    config: Config,
    *,
    dataset_builder: RLDatasetBuilder | None = None,
    warm_start: WarmStart | None = None,
) -> TrainSummary:
    """Run (or resume) training as configured; blocking. See :func:`train_async`."""
    return anyio.run(lambda: train_async(config, dataset_builder=dataset_builder, warm_start=warm_start))


async def train_async(
    config: Config,
    *,
    dataset_builder: RLDatasetBuilder | None = None,
    warm_start: WarmStart | None = None,
) -> TrainSummary:
    """Run (or resume) training as configured.

    Args:
        config: the run's configuration.
        dataset_builder: overrides ``config.dataset_builder()``.
        warm_start: optional hook run once on a fresh start (see :data:`WarmStart`).
    """
    t0 = time.monotonic()
    check_data(config)  # before anything is written (the command line checked it already: cheap to repeat)
    dataset_builder = dataset_builder or config.dataset_builder()
    if warm_start is None and config.warm_start.episodes > 0:
        check_scripted_episodes(dataset_builder)  # one line, before the model loads and anything is written
    log_path = Path(config.log_path).expanduser().resolve()
    log_path.mkdir(parents=True, exist_ok=True)
    handler = _setup_file_logging(log_path)
    run: _Run | None = None
    try:
        run = _Run(config, log_path, dataset_builder, warm_start, t0)
        return await run.run()
    finally:
        gc.unfreeze()
        if run is not None:
            if run.executor is not None:
                run.executor.close()
            run.trackers.close()
        logging.getLogger().removeHandler(handler)
        handler.close()


class _Run:
    """State of one invocation of the loop (kept in one place so the steps read linearly)."""

    def __init__(
        self,
        config: Config,
        log_path: Path,
        dataset_builder: RLDatasetBuilder,
        warm_start: WarmStart | None,
        t0: float,
    ) -> None:
        self.config = config
        self.log_path = log_path
        self.builder = dataset_builder
        self.warm_start = warm_start
        self.t0 = t0
        self.metrics_log = JsonlLog(log_path / METRICS_FILE)
        self.eval_log = JsonlLog(log_path / EVAL_FILE)
        self.training_client: Any = None
        self.sampling_client: Any = None
        self.sampler_step = 0
        self.kl_reference: Any = None
        """Sampling client of the KL penalty's reference policy (None: ``kl_penalty_coef == 0``)."""
        self.service: Any = None
        self.executor: RolloutExecutor | None = None
        """Where group rollouts run (``config.rollout_executor``; None: in this process)."""
        self.worker_sampler: WorkerSampler | None = None
        """How the executor's workers reach :attr:`sampling_client`."""
        self.tokenizer: Any = None
        self.display: ProgressDisplay | None = None
        self.saved_batch = -1
        named = named_builders(
            config.evaluator, model_name=config.model_name, renderer_name=config.renderer_name
        )
        self.evaluators = build_evaluators([*config.evaluator_builders, *named], "evaluator_builders")
        self.infrequent_evaluators = build_evaluators(
            config.infrequent_evaluator_builders, "infrequent_evaluator_builders"
        )
        self.warned_no_datum = False
        self.warm_start_planned = False
        self.trackers = Trackers(None, None, log_path, None)  # opened in run(), once the folder is checked

    # ------------------------------------------------------------------ set-up
    def _resume_point(self) -> ckpt.CheckpointRecord | None:
        config, log_path = self.config, self.log_path
        record = ckpt.last_checkpoint(log_path)
        if not config.resume and (record is not None or self.metrics_log.rows()):
            raise RunFolderError(f"{log_path} already holds a run; pass resume=True or another log_path")
        start = record.batch if record is not None else 0
        dropped = self.metrics_log.truncate(start)
        dropped_eval = self.eval_log.truncate(start + 1)
        if dropped or dropped_eval:
            logger.info(
                "resume at step %d: dropped %d metrics rows and %d eval rows", start, dropped, dropped_eval
            )
        return record

    async def _make_training_client(self, service: Any, record: ckpt.CheckpointRecord | None) -> None:
        config = self.config
        if record is not None:
            self.training_client = await service.create_training_client_from_state_with_optimizer_async(
                record.state_path
            )
            ckpt.load_rng(self.log_path, record)
        elif config.load_checkpoint_path:
            self.training_client = await service.create_training_client_from_state_async(
                config.load_checkpoint_path
            )
        else:
            self.training_client = await service.create_lora_training_client_async(
                config.model_name, rank=config.lora_rank, seed=config.adapter_seed()
            )

    async def _refresh_sampler(self, step: int) -> None:
        if self.executor is not None:  # workers need weights they can load: saved ones
            keep = self.config.max_steps_off_policy + 2
            self.sampling_client, self.worker_sampler = await saved_sampler(
                self.training_client, self.service, step, keep=keep
            )
        else:
            self.sampling_client = await self.training_client.save_weights_and_get_sampling_client_async()
        self.sampler_step = step

    # ------------------------------------------------------------------ run
    async def run(self) -> TrainSummary:
        config, log_path = self.config, self.log_path
        record = self._resume_point()
        start = record.batch if record is not None else 0
        if record is None:
            ckpt.seed_everything(config.seed)
        builder = self.builder
        warm_start = self.warm_start
        if warm_start is None and config.warm_start.episodes > 0 and record is None:
            warm_start = scripted_warm_start(builder, config, self._rollout_config())
        write_json_atomic(log_path / CONFIG_FILE, config.to_json())
        self.trackers = Trackers(config.wandb_project, config.wandb_name, log_path, config)

        register_tokenizers()  # envs of the embedded models resolve their tokenizers offline
        service = _make_service_client(config, log_path)
        self.service = service
        await self._make_training_client(service, record)
        self.tokenizer = self.training_client.get_tokenizer()
        train_ds, test_ds = await builder()
        end = min(config.max_steps, len(train_ds))
        if start < end:
            logger.info(await check_env_tokenizer(train_ds, start, self.tokenizer))
        if config.compaction_period and start < end:
            await _check_compaction(train_ds, start, config.compaction_period)
        print(
            f"[training] {'resuming at step ' + str(start) if record else 'new run'}: {end} steps; artifacts in "
            f"{log_path} (config.json, metrics.jsonl, eval.jsonl, {PLOT_FILE}, {TRANSCRIPTS_DIR}/, "
            f"{ckpt.CHECKPOINTS_FILE}, {LOG_FILE})",
            flush=True,
        )
        warm_starts = record is None and warm_start is not None
        self.warm_start_planned = warm_starts
        self.executor = open_executor(config.rollout_executor)
        await self._refresh_sampler(start)
        # What is loaded now (model, tokenizer, imported code: hundreds of thousands of objects) lives
        # for the whole run: frozen, the collector's full passes stop walking it, and they stop
        # stalling the event loop for a large part of a second each (unfrozen when the run ends).
        gc.collect()
        gc.freeze()

        with ProgressDisplay(end, start, enabled=config.progress) as display:
            self.display = display
            if warm_starts and warm_start is not None:
                if config.eval_every:  # the policy before any training: the baseline of every claim
                    await self._evaluate(0, test_ds, stage=STAGE_UNTRAINED)
                display.phase("warm start")
                warm = await warm_start(self.training_client, config)
                logger.info("warm start: %s", warm)
                write_json_atomic(log_path / WARM_START_FILE, warm)
                await self._refresh_sampler(start)
            if config.kl_penalty_coef > 0 and start < end:
                self.kl_reference = await reference_client(self.training_client, service, log_path)
            async with anyio.create_task_group() as tg:
                pending: dict[int, _Pending] = {}
                for step in range(start, end):
                    if config.eval_every and step % config.eval_every == 0:
                        await self._evaluate(step, test_ds)
                    last = min(step + config.max_steps_off_policy, end - 1)
                    for s in range(step, last + 1):
                        if s not in pending:
                            pending[s] = self._launch(tg, train_ds, s)
                    evaluated = await self._run_evaluators(step)
                    t_wait = time.monotonic()
                    display.phase(f"sample {step}")
                    batch = await pending.pop(step).wait()
                    await self._train_step(
                        step, batch, wait_seconds=time.monotonic() - t_wait, end=end, extra=evaluated
                    )
                    minutes = (time.monotonic() - self.t0) / 60
                    if (
                        config.time_budget_minutes
                        and minutes >= config.time_budget_minutes
                        and step + 1 < end
                    ):
                        display.note(
                            f"time budget of {config.time_budget_minutes} min spent after step {step}"
                        )
                        end = step + 1
                        if self.saved_batch != end:
                            await self._save(end, final=True)
                        tg.cancel_scope.cancel()  # drop batches sampled ahead (off-policy mode)
                        break
            if config.eval_every and test_ds is not None:
                await self._evaluate(end, test_ds)
        if record is not None and start >= end and not record.sampler_path:
            await self._save(end, final=True)  # a run stopped before its final save: its sampler weights
        self.display = None
        rows = self.eval_log.rows()
        warm = read_json(log_path / WARM_START_FILE)
        untrained = next((r for r in rows if r.get(STAGE_KEY, STAGE_UNTRAINED) == STAGE_UNTRAINED), {})
        untrained = untrained if int(untrained.get("step", -1)) == 0 else {}
        after_warm = next((r for r in rows if r.get(STAGE_KEY) == STAGE_WARM_START), {}) if warm else {}
        if warm and not after_warm:  # a run folder written before eval rows had a stage
            after_warm = next((r for r in rows if int(r["step"]) == 0 and STAGE_KEY not in r), {})
            untrained = {}
        figures = self._figure_names(rows)
        if untrained:
            logger.info("held-out before any training: %s", _eval_line(untrained, figures))
        if after_warm:
            logger.info("held-out after the warm start: %s", _eval_line(after_warm, figures))
        steps = self.metrics_log.rows()
        return TrainSummary(
            log_path=log_path,
            start_step=start,
            end_step=end,
            final_eval=rows[-1] if rows else {},
            seconds=time.monotonic() - self.t0,
            warm_start=warm,
            warm_start_eval=after_warm,
            untrained_eval=untrained,
            steps_without_datum=sum(1 for r in steps if r.get(METRIC_NO_DATUM)),
            steps_logged=len(steps),
            figures=figures,
        )

    def _figure_names(self, rows: list[dict[str, Any]]) -> tuple[str, ...]:
        """Names of the env's own held-out figures in the last of the evaluation rows ``rows``."""
        return (
            tuple(self.config.eval_figures({k.removeprefix("eval/"): v for k, v in rows[-1].items()}))
            if rows
            else ()
        )

    def _rollout_config(self) -> EngineConfig:
        return rollout_config(self.config.max_tokens, compaction_period=self.config.compaction_period)

    def _launch(self, tg: Any, dataset: RLDataset, step: int) -> _Pending:
        pending = _Pending()
        builders = list(dataset.get_batch(step))
        client, version, worker_sampler = self.sampling_client, self.sampler_step, self.worker_sampler

        async def work() -> None:
            try:
                before = _sampler_counts(client)
                pending.result = await sample_batch(
                    builders,
                    client,
                    max_tokens=self.config.max_tokens,
                    temperature=self.config.temperature,
                    sampler_step=version,
                    compaction_period=self.config.compaction_period,
                    seed=batch_seed(self.config.seed, "train", step),
                    executor=self.executor,
                    worker_sampler=worker_sampler,
                )
                if self.config.max_steps_off_policy == 0:  # alone on its sampler: exact counts
                    pending.result.sampler_metrics.update(_sampler_delta(before, client))
            except Exception as exc:  # handed to the waiter, which re-raises it
                pending.error = exc
            finally:
                pending.done.set()

        tg.start_soon(work)
        return pending

    # ------------------------------------------------------------------ one step
    async def _train_step(
        self, step: int, batch: SampledBatch, *, wait_seconds: float, end: int, extra: dict[str, Any]
    ) -> None:
        config = self.config
        t_step = time.monotonic()
        metrics: dict[str, Any] = self._batch_metrics(batch)
        metrics.update(extra)
        metrics["sampling/staleness"] = float(step - batch.sampler_step)
        metrics["time/sample"] = batch.seconds
        metrics["time/wait_sample"] = wait_seconds
        metrics["tokens/per_second"] = metrics["tokens/sampled"] / batch.seconds if batch.seconds > 0 else 0.0

        write_transcripts(
            self.log_path / TRANSCRIPTS_DIR / f"train_step{step:04d}.html",
            self.tokenizer,
            batch.groups,
            config.train_transcripts,
            title=f"training episodes of step {step} (sampled after {batch.sampler_step} updates)",
            win_metric=config.win_metric,
        )
        groups: list[TrajectoryGroup] = batch.groups
        informative = informative_groups(groups)
        if config.remove_constant_reward_groups:
            groups = informative
        metrics["groups/trained"] = float(len(groups))
        advantages = AdvantageConfig(
            normalize_std=config.advantage_normalize_std, discount=config.advantage_discount
        )
        datums, assembly = to_datums(groups, advantages) if groups else ([], {})
        metrics["datums"] = float(len(datums))  # the datum count (assembly's datums/count is the same)
        metrics.update({f"assembly/{k}": v for k, v in assembly.items() if k != "datums/count"})
        metrics[METRIC_NO_DATUM] = float(not datums)
        metrics["progress"] = (
            step + 1
        ) / end  # the names the cookbook's runs (and the docs' sweep script) use
        if datums:
            metrics["train_mean_nll"] = sampled_mean_nll(datums)
            metrics.update(await apply_kl_penalty(datums, self.kl_reference, config.kl_penalty_coef))
        else:
            self._warn_no_datum(step, batch.groups)
        lr = config.lr_at(step)
        if config.lr_scale_by_signal and batch.groups:
            lr *= len(informative) / len(batch.groups)
        metrics["optim/lr"] = lr
        t_train = time.monotonic()
        if datums:
            assert self.display is not None
            self.display.phase(f"train {step}")
            metrics.update(await self._optimize(datums, lr))
        metrics["time/train"] = time.monotonic() - t_train
        t_sync = time.monotonic()
        await self._refresh_sampler(step + 1)
        if datums and config.compute_post_kl:
            metrics.update(await compute_post_kl(datums, self.sampling_client))
        metrics["time/sampler_update"] = time.monotonic() - t_sync
        metrics["time/step"] = time.monotonic() - t_step + wait_seconds
        metrics["time/elapsed"] = time.monotonic() - self.t0
        self.trackers.log(step, self.metrics_log.append(step, metrics))
        self._plot()
        assert self.display is not None
        self.display.step_done(step, metrics)
        done = step + 1
        if done == end or (config.save_every and done % config.save_every == 0):
            await self._save(done, final=done == end)

    def _warn_no_datum(self, step: int, groups: Sequence[TrajectoryGroup]) -> None:
        """A warning (log, and above the progress bar the first time) for a step with no datum."""
        rewards = sorted({round(r, 4) for g in groups for r in g.get_total_rewards()})
        why = (
            f"every one of the {len(groups)} groups gave all its episodes one reward "
            f"(rewards seen: {', '.join(map(str, rewards[:4]))}{', …' if len(rewards) > 4 else ''})"
            if groups
            else "no group was sampled"
        )
        message = f"step {step} trained on no datum: {why}; the policy did not change"
        logger.warning(message)
        if not self.warned_no_datum and self.display is not None:
            self.display.note(f"warning: {message} ({NO_SIGNAL_ADVICE})")
        self.warned_no_datum = True

    def _batch_metrics(self, batch: SampledBatch) -> dict[str, Any]:
        """Env-level metrics of a sampled batch plus the engine's accounting (``rollout/``)."""
        tags = [b.logging_tags() for b in batch.builders]
        metrics: dict[str, Any] = group_metrics(batch.groups, win_metric=self.config.win_metric, tags=tags)
        metrics.update({f"rollout/{k}": v for k, v in batch.metrics.items()})
        metrics["groups/failed"] = float(batch.failed)
        metrics.update(batch.sampler_metrics)
        return metrics

    async def _optimize(self, datums: list[tinker.Datum], lr: float) -> dict[str, float]:
        config = self.config
        adam = tinker.AdamParams(
            learning_rate=lr,
            beta1=config.beta1,
            beta2=config.beta2,
            eps=config.eps,
            weight_decay=config.weight_decay,
            grad_clip_norm=config.grad_clip_norm,
        )
        # Enqueue both before awaiting either, so they run back to back on the trainer.
        fb_future = await self.training_client.forward_backward_async(
            [without_mask(d) for d in datums], loss_fn=config.loss_fn, loss_fn_config=config.loss_fn_config()
        )
        optim_future = await self.training_client.optim_step_async(adam)
        fb = await fb_future.result_async()
        optim = await optim_future.result_async()
        out: dict[str, float] = {}
        training_logprobs = [o["logprobs"].to_torch() for o in fb.loss_fn_outputs]
        if any(d.loss_fn_inputs["mask"].to_torch().sum() > 0 for d in datums):
            out.update(compute_kl_sample_train(datums, training_logprobs))
        out.update({f"train/{k}": float(v) for k, v in (fb.metrics or {}).items()})
        out.update(
            {
                f"optim/{k}" if not k.startswith("optim/") else k: float(v)
                for k, v in (optim.metrics or {}).items()
            }
        )
        return out

    async def _save(self, done: int, *, final: bool) -> None:
        t = time.monotonic()
        await ckpt.save_checkpoint(self.training_client, self.log_path, batch=done, with_sampler=final)
        self.saved_batch = done
        root = self.log_path / ckpt.CHECKPOINT_DIR
        ckpt.prune_local(self.log_path, root, self.config.keep_last)
        logger.info("checkpoint after step %d saved in %.1fs", done - 1, time.monotonic() - t)

    # ------------------------------------------------------------------ eval and artifacts
    async def _run_evaluators(self, step: int) -> dict[str, Any]:
        """The cookbook evaluators due before step ``step`` trains (weights after ``step`` updates)."""
        config = self.config
        due = [
            *(self.evaluators if config.eval_every and step % config.eval_every == 0 else []),
            *(
                self.infrequent_evaluators
                if config.infrequent_eval_every and step % config.infrequent_eval_every == 0
                else []
            ),
        ]
        if not due:
            return {}
        assert self.display is not None
        self.display.phase(f"evaluators {step}")
        t = time.monotonic()
        metrics = await run_evaluators(due, self.training_client, self.sampling_client)
        metrics["time/evaluators"] = time.monotonic() - t
        return metrics

    def _stage(self, step: int) -> str:
        """The stage an evaluation at ``step`` closes (see :data:`STAGE_KEY`)."""
        if step > 0:
            return STAGE_RL
        return STAGE_WARM_START if (self.log_path / WARM_START_FILE).is_file() else STAGE_UNTRAINED

    async def _evaluate(self, step: int, test_ds: RLDataset | None, stage: str | None = None) -> None:
        stage = stage or self._stage(step)
        done = {(int(r["step"]), r.get(STAGE_KEY, self._stage(int(r["step"])))) for r in self.eval_log.rows()}
        if test_ds is None or (step, stage) in done:
            return
        assert self.display is not None
        self.display.phase(f"eval {step}")
        t = time.monotonic()
        n_batches = min(len(test_ds), self.config.eval_batches or len(test_ds))
        builders = [b for i in range(n_batches) for b in test_ds.get_batch(i)]
        before = _sampler_counts(self.sampling_client)
        batch = await sample_batch(
            builders,
            self.sampling_client,
            max_tokens=self.config.max_tokens,
            temperature=self.config.eval_temperature,
            sampler_step=self.sampler_step,
            compaction_period=self.config.compaction_period,
            seed=batch_seed(self.config.seed, "eval", step),
            executor=self.executor,
            worker_sampler=self.worker_sampler,
        )
        batch.sampler_metrics.update(_sampler_delta(before, self.sampling_client))
        metrics = self._batch_metrics(batch)
        figures = self.config.eval_figures(metrics)
        metrics.update(figures)
        metrics["time"] = time.monotonic() - t
        row = self.eval_log.append(step, {STAGE_KEY: stage, **{f"eval/{k}": v for k, v in metrics.items()}})
        self.trackers.log(step, row)
        untrained_before_warm_start = stage == STAGE_UNTRAINED and self.warm_start_planned
        write_transcripts(
            self.log_path
            / TRANSCRIPTS_DIR
            / f"eval_step{step:04d}{'_untrained' if untrained_before_warm_start else ''}.html",
            self.tokenizer,
            batch.groups,
            self.config.transcripts_per_eval,
            title=f"held-out episodes ({STAGE_TITLES[stage].format(step=step)})",
            win_metric=self.config.win_metric,
        )
        write_eval_episodes(self.log_path / EVAL_EPISODES_FILE, step, self.tokenizer, batch.groups)
        self._plot()
        self.display.eval_done(step, row, _figures_line(row, tuple(figures)))

    def _plot(self) -> None:
        try:
            plot_reward_curve(
                self.log_path / PLOT_FILE,
                read_rows(self.log_path / METRICS_FILE),
                read_rows(self.log_path / EVAL_FILE),
                title=f"{os.path.basename(self.log_path)} · {self.config.model_name}",
                warm_start=(self.log_path / WARM_START_FILE).is_file(),
            )
        except Exception:  # a plotting problem must never stop training
            logger.exception("could not draw the reward curve")
