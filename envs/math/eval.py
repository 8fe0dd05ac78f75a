"""Evaluate a checkpoint or a base model on a math test split: ``python -m envs.math.eval [key=value ...]``.

Offline by default: the local backend, the embedded SmolLM2-135M, 32 generated test problems
(levels 1-2), greedy decoding, the single-turn game. Reports accuracy (final answer correct),
format rate (answers with a ``\\boxed{}``), mean attempts, mean reward and grading timeouts, and
writes a results JSON (summary + one record per episode) to ``output``.

Examples::

    python -m envs.math.eval                                   # base model
    python -m envs.math.eval run=runs/math/default             # last checkpoint of a training run
    python -m envs.math.eval checkpoint=local://<id>/sampler_weights/000020 checkpoint_root=runs/x/checkpoints
    python -m envs.math.eval env.max_attempts=3 source=gsm8k path=data/gsm8k_test.jsonl n_test=200
    python -m envs.math.eval harness=inspect n_test=20           # the Inspect AI task, offline

``harness=inspect`` runs :func:`envs.math.inspect_task.gsm8k` (a GSM8K-style task read from a
local file, scored by our math grader, or by Inspect's numeric match with ``inspect_scorer=match``)
through the cookbook's Inspect AI bridge (``InspectEvaluatorBuilder``) against the same sampler;
the generated source is first written to a GSM8K-style file next to ``output``. Needs the optional
``inspect-ai`` package (``pip install -e ".[inspect]"``).

The game (``env.*``, :class:`~envs.math.config.MathEnvConfig`) and the data keys (``source``,
``path``, ``levels``...) mean the same as in ``python -m envs.math.train``; data files are
validated before the model loads.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import chz

import training
from backend.model import SMOLLM2
from envs.math.config import MathEnvConfig

__all__ = [
    "EpisodeRecord",
    "EvalConfig",
    "EvalSummary",
    "evaluate_policy",
    "main",
    "run_eval",
    "run_inspect_eval",
]


@chz.chz
class EvalConfig:
    """Configuration of one evaluation (fields are the command-line keys)."""

    model_name: str = SMOLLM2
    """Base model (also the tokenizer of the renderer)."""
    renderer_name: str | None = None
    """Renderer of the conversation (None: the model's recommended one)."""
    backend: str = "local"
    """``local`` (embedded, offline), ``tinker`` or ``auto``."""
    checkpoint: str | None = None
    """Sampler weights to evaluate (``local://...`` or ``tinker://...``); None: the base model."""
    checkpoint_root: str | None = None
    """Folder that ``local://`` paths are relative to (a run's ``checkpoints/``)."""
    run: str | None = None
    """A training run folder: evaluates its last sampler checkpoint (sets the two keys above)."""
    output: str | None = None
    """Results JSON path (default: ``<run>/math_eval.json`` or ``runs/math/eval.json``)."""

    harness: str = "env"
    """``env``: our MathEnv game (the ``env.*`` keys apply); ``inspect``: the Inspect AI task
    (single generation, no game)."""
    inspect_scorer: str = "grader"
    """``harness=inspect``: ``grader`` (our math grader on the ``\\boxed{}`` answer) or ``match``."""

    env: MathEnvConfig = chz.field(default_factory=MathEnvConfig)
    """The game (``env.max_attempts=3``, ``env.calculator=auto``...)."""
    source: str = "generated"
    """``generated``, ``gsm8k``, ``math`` or ``jsonl``."""
    path: str | None = None
    """Local data file (``{split}`` becomes ``test``)."""
    levels: str = "1,2"
    """Generator levels."""
    n_test: int = 32
    """Test problems (at most)."""
    samples_per_problem: int = 1
    """Episodes per problem."""
    seed: int = 0
    """Generator seed (the test split of the same seed as training)."""

    max_tokens: int = 48
    """Sampled tokens per assistant turn."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy)."""
    concurrency: int = 8
    """Episodes in flight at once."""
    grading_timeout_s: float = 2.0
    """Hard timeout of one symbolic grading."""
    progress: bool = True
    """Print a progress line to stderr every 8 episodes."""

    @chz.validate
    def _check(self) -> None:
        if self.n_test < 1 or self.samples_per_problem < 1 or self.concurrency < 1 or self.max_tokens < 1:
            raise ValueError("n_test, samples_per_problem, concurrency and max_tokens must be >= 1")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.harness not in ("env", "inspect"):
            raise ValueError(f"harness must be 'env' or 'inspect', got {self.harness!r}")
        if self.inspect_scorer not in ("grader", "match"):
            raise ValueError(f"inspect_scorer must be 'grader' or 'match', got {self.inspect_scorer!r}")
        from envs.math._keys import check_data_keys

        check_data_keys(self.source, self.levels)


@dataclass(frozen=True)
class EpisodeRecord:
    """One evaluated episode."""

    uid: str
    """Problem id."""
    question: str
    """The question."""
    reference: str
    """Reference answer."""
    extracted: str
    """The last extracted ``\\boxed{}`` answer (``<none>`` without one)."""
    correct: bool
    """Final answer correct."""
    format: float
    """Fraction of answers with a box."""
    attempts: int
    """Answers given (0 when the episode ended on a fault before any answer)."""
    reward: float
    """Total reward."""
    turns: int
    """Assistant turns (answers + calculator calls)."""
    stop: str
    """Why the episode ended."""
    last_reply: str
    """Decoded text of the last assistant turn."""


@dataclass(frozen=True)
class EvalSummary:
    """Aggregates of an evaluation."""

    n: int
    """Episodes."""
    accuracy: float
    """Fraction with a correct final answer."""
    format_rate: float
    """Mean fraction of answers with a ``\\boxed{}`` (a faulty turn counts as unformatted)."""
    mean_attempts: float
    """Mean answers per episode."""
    mean_reward: float
    """Mean total reward."""
    grading_timeouts: int
    """Gradings cut off by the timeout (scored wrong)."""
    seconds: float
    """Wall time."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What was evaluated (model, checkpoint, game, data)."""


async def evaluate_policy(
    policy: Any,
    envs: Sequence[Any],
    problems: Sequence[Any],
    *,
    concurrency: int = 8,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
) -> list[EpisodeRecord]:
    """Roll out ``policy`` (a cookbook ``TokenCompleter``) once in each of ``envs`` (MathEnvs,
    ``problems[i]`` for ``envs[i]``) with at most ``concurrency`` episodes in flight;
    ``on_episode`` is called with each finished episode's record."""
    import anyio
    from tinker_cookbook.rl.rollouts import do_single_rollout
    from tinker_cookbook.rl.types import STOP_METRIC_PREFIX

    from envs.core import METRIC_FAULT_PREFIX
    from envs.math.env import METRIC_CORRECT

    limiter = anyio.CapacityLimiter(concurrency)
    records: list[EpisodeRecord | None] = [None] * len(envs)

    async def one(i: int) -> None:
        async with limiter:
            env = envs[i]
            traj = await do_single_rollout(policy, env)
        metrics: dict[str, float] = {}
        logs: dict[str, Any] = {}
        for t in traj.transitions:
            metrics.update(t.metrics)
            logs.update(t.logs)
        stop = next((k[len(STOP_METRIC_PREFIX) :] for k in metrics if k.startswith(STOP_METRIC_PREFIX)), "")
        faulted = (
            any(k.startswith(METRIC_FAULT_PREFIX) for k in traj.transitions[-1].metrics)
            if traj.transitions
            else False
        )
        answered = env.attempts + int(faulted)  # a faulty turn counts as an unformatted answer
        last = traj.transitions[-1].ac.tokens if traj.transitions else []
        p = problems[i]
        records[i] = EpisodeRecord(
            uid=p.uid,
            question=p.question,
            reference=p.answer,
            extracted=str(logs.get("extracted", "<none>")),
            correct=bool(metrics.get(METRIC_CORRECT, 0.0)),
            format=env.formatted_attempts / answered if answered else 0.0,
            attempts=env.attempts,
            reward=float(sum(t.reward for t in traj.transitions)),
            turns=len(traj.transitions),
            stop=stop,
            last_reply=env.renderer.tokenizer.decode(last),
        )
        if on_episode is not None:
            on_episode(records[i])  # type: ignore[arg-type]

    async with anyio.create_task_group() as tg:
        for i in range(len(envs)):
            tg.start_soon(one, i)
    return [r for r in records if r is not None]


def summarize(
    records: Sequence[EpisodeRecord], seconds: float, timeouts: int, extra: dict[str, Any]
) -> EvalSummary:
    """Aggregate episode records."""
    n = len(records)

    def mean(xs: Sequence[float]) -> float:
        return sum(xs) / len(xs) if xs else 0.0

    return EvalSummary(
        n=n,
        accuracy=mean([float(r.correct) for r in records]),
        format_rate=mean([r.format for r in records]),
        mean_attempts=mean([float(r.attempts) for r in records]),
        mean_reward=mean([r.reward for r in records]),
        grading_timeouts=timeouts,
        seconds=seconds,
        extra=extra,
    )


def _resolve_checkpoint(config: EvalConfig) -> tuple[str | None, str | None]:
    if config.run is None:
        return config.checkpoint, config.checkpoint_root
    run = Path(config.run)
    records = run / "checkpoints.jsonl"
    if not records.is_file():
        raise FileNotFoundError(f"{run}: not a training run folder (no checkpoints.jsonl)")
    sampler = None
    for line in records.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        sampler = row.get("sampler_path") or sampler
    if sampler is None:
        raise ValueError(f"{records}: no sampler checkpoint recorded yet")
    return sampler, config.checkpoint_root or str(run / "checkpoints")


async def _sampling_client(config: EvalConfig, checkpoint: str | None, root: str | None) -> Any:
    from backend import make_service_client

    kwargs: dict[str, Any] = {"root": root} if config.backend != "tinker" and root else {}
    service: Any = make_service_client(config.backend, **kwargs)  # type: ignore[arg-type]
    if checkpoint is not None:
        return await service.create_sampling_client_async(model_path=checkpoint)
    return await service.create_sampling_client_async(base_model=config.model_name)


def _write_results(output: Path, summary: EvalSummary, records: Sequence[Any]) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_suffix(output.suffix + ".tmp")
    tmp.write_text(
        json.dumps({"summary": asdict(summary), "episodes": [asdict(r) for r in records]}, indent=1)
    )
    tmp.replace(output)


def _output(config: EvalConfig) -> Path:
    return Path(
        config.output or (Path(config.run) / "math_eval.json" if config.run else "runs/math/eval.json")
    )


async def run_inspect_eval(config: EvalConfig) -> tuple[EvalSummary, Path]:
    """``harness=inspect``: the Inspect GSM8K-style task through the cookbook's Inspect bridge on
    the configured sampler; writes the results JSON (the summary; per-sample logs are Inspect's, in
    ``<output dir>/inspect-logs``). ``summary.n`` is the number of scored samples."""
    try:
        from inspect_ai.log import read_eval_log
        from tinker_cookbook.eval.inspect_evaluators import InspectEvaluatorBuilder

        from envs.math.inspect_task import DATASET_NAME, gsm8k, write_gsm8k_jsonl
    except ImportError as exc:
        raise RuntimeError(
            f"harness=inspect needs the optional inspect-ai package ({exc}); pip install -e '.[inspect]'"
        ) from None
    from backend import resolve_backend
    from backend.offline import use_local_backend
    from envs.math.data import Split, load_split
    from renderers_ext import recommended_renderer_name

    checkpoint, root = _resolve_checkpoint(config)
    output = _output(config)
    if config.source in ("gsm8k", "jsonl") and config.path:
        data_path = config.path.replace("{split}", str(Split.TEST))
    else:  # write the configured test split as a GSM8K-style file, then read it like any other
        problems = load_split(
            config.source,
            Split.TEST,
            path=config.path,
            n=config.n_test,
            seed=config.seed,
            levels=config.levels,
        )
        data_path = str(write_gsm8k_jsonl(problems, output.with_name(output.stem + "_gsm8k_style.jsonl")))
    log_dir = output.parent / "inspect-logs"
    builder = InspectEvaluatorBuilder(
        tasks=[gsm8k(path=data_path, limit=config.n_test, scorer=config.inspect_scorer)],
        renderer_name=config.renderer_name or recommended_renderer_name(config.model_name),
        model_name=config.model_name,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        seed=config.seed,
        limit=config.n_test,
        log_dir=str(log_dir),
        max_connections=config.concurrency,
        log_level="warning",
    )
    local = resolve_backend(config.backend) == "local"  # type: ignore[arg-type]
    t0 = time.perf_counter()
    with use_local_backend(root) if local else contextlib.nullcontext():
        before = set(log_dir.glob("*.eval")) if log_dir.is_dir() else set()
        sampling_client = await _sampling_client(config, checkpoint, root)
        metrics = await builder()(sampling_client)
    logs = sorted(set(log_dir.glob("*.eval")) - before)
    scored = 0
    for log in logs:
        results = read_eval_log(str(log), header_only=True).results
        scored += results.completed_samples if results is not None else 0
    accuracy = float(metrics.get(f"{DATASET_NAME}/accuracy", 0.0))
    summary = EvalSummary(
        n=scored,
        accuracy=accuracy,
        format_rate=0.0,
        mean_attempts=1.0,
        mean_reward=accuracy,
        grading_timeouts=0,
        seconds=time.perf_counter() - t0,
        extra={
            "harness": "inspect",
            "metrics": metrics,
            "data": data_path,
            "inspect_logs": [str(x) for x in logs],
            "scorer": config.inspect_scorer,
            "model_name": config.model_name,
            "checkpoint": checkpoint,
        },
    )
    _write_results(output, summary, [])
    return summary, output


async def run_eval(config: EvalConfig) -> tuple[EvalSummary, list[EpisodeRecord], Path]:
    """Evaluate as configured; write the results JSON; return (summary, records, output path)."""
    from tinker_cookbook.completers import TinkerTokenCompleter

    from envs.math.data import Split, load_split
    from envs.math.env import MathEnv
    from envs.math.grading import Grader, GraderConfig
    from renderers_ext import load_renderer

    checkpoint, root = _resolve_checkpoint(config)
    game = config.env
    problems = load_split(
        config.source, Split.TEST, path=config.path, n=config.n_test, seed=config.seed, levels=config.levels
    )
    problems = [p for p in problems for _ in range(config.samples_per_problem)]
    output = _output(config)
    sampling_client = await _sampling_client(config, checkpoint, root)
    policy = TinkerTokenCompleter(
        sampling_client, max_tokens=config.max_tokens, temperature=config.temperature
    )
    renderer = load_renderer(config.renderer_name, config.model_name)

    t0 = time.perf_counter()
    with Grader(GraderConfig(timeout_s=config.grading_timeout_s)) as grader:
        envs = [MathEnv(renderer, p, game, grader=grader) for p in problems]
        done: list[EpisodeRecord] = []

        def report(record: EpisodeRecord) -> None:
            done.append(record)
            if config.progress and (len(done) % 8 == 0 or len(done) == len(envs)):
                correct = sum(r.correct for r in done)
                print(
                    f"[eval] {len(done)}/{len(envs)} episodes, {correct} correct", file=sys.stderr, flush=True
                )

        records = await evaluate_policy(
            policy, envs, problems, concurrency=config.concurrency, on_episode=report
        )
        timeouts = grader.stats.timed_out
    extra = {
        "model_name": config.model_name,
        "checkpoint": checkpoint,
        "game": chz.asdict(game),
        "source": config.source,
        "path": config.path,
        "levels": config.levels,
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
    }
    summary = summarize(records, time.perf_counter() - t0, timeouts, extra)
    _write_results(output, summary, records)
    return summary, records, output


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments, evaluate, print the summary line; returns the exit status."""
    import anyio

    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "help") for a in args):
        print("usage: python -m envs.math.eval [key=value ...]\n")
        print(chz.Blueprint(EvalConfig).get_help())
        return 0
    try:
        config = training.parse_config(EvalConfig, args)
    except training.ConfigError as e:
        print(f"envs.math.eval: error: {e}", file=sys.stderr)
        return 2
    from envs.math.data import check_source

    try:  # the data before the model loads
        check_source(config.source, config.path, n_train=0, n_test=config.n_test)
    except (ValueError, OSError) as e:
        print(f"envs.math.eval: error: {e}", file=sys.stderr)
        return 2
    try:
        if config.harness == "inspect":
            summary, output = anyio.run(run_inspect_eval, config)
        else:
            summary, _, output = anyio.run(run_eval, config)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        print(f"envs.math.eval: error: {e}", file=sys.stderr)
        return 1
    if config.harness == "inspect":
        print(
            f"inspect_samples={summary.n} accuracy={summary.accuracy:.3f} "
            f"metrics={json.dumps(summary.extra['metrics'])} seconds={summary.seconds:.1f}"
        )
        print(f"results: {output}")
        return 0
    print(
        f"n={summary.n} accuracy={summary.accuracy:.3f} format_rate={summary.format_rate:.3f} "
        f"mean_attempts={summary.mean_attempts:.2f} mean_reward={summary.mean_reward:.3f} "
        f"grading_timeouts={summary.grading_timeouts} seconds={summary.seconds:.1f}"
    )
    print(f"results: {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
