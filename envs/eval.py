"""``python -m envs.eval <id | module:attr> [key=value ...]``: evaluate a policy on any env.

The env is an installed id (``python -m envs.list``: TurnGym's own and those of installed
packages) or ``module:attribute`` naming a builder, dataset or env factory (what
``python -m envs.check`` takes). The policy is one of:

- the embedded model (default, ``backend=local``, offline) or a Tinker service
  (``backend=tinker``): token-level, the run-time extension check applies and every break is
  recorded with its decoded diff;
- an OpenAI-compatible chat endpoint (``base_url=http://host:port/v1 model_name=<served name>``,
  the key in ``$OPENAI_API_KEY`` or the variable ``api_key_env`` names): **message-level**. The
  server samples text from the conversation as messages; the tokens of a turn are then our
  renderer's rendering of that text, not the server's own tokens, so token counts are ours and
  the extension check does not apply (it is off, and the results say so). Needs an env built on
  ``envs.ChatEnv`` (whose conversation exists as messages). One HTTP client serves every episode,
  its connection pool sized to ``max_concurrency``.

Episodes: ``n`` tasks (episode seeds ``seed .. seed+n-1``; a dataset's seed picks its batch and
builder), each played ``repeats`` times; a task's builder may make a group of envs (all played,
its group rewards added). At most ``max_concurrency`` groups are in flight.

The results folder (``output``, default ``runs/eval/<env>``) holds ``config.json``,
``episodes.jsonl`` (one JSON row per episode: reward, stop reason, fault, extension breaks,
metrics, and the transcript: per turn the new observation and the action as decoded token
pieces), ``summary.json`` (the aggregate metrics) and ``index.html`` (the results viewer,
:mod:`envs.viewer`). A killed run resumes when the same command runs again: finished tasks are
skipped (a folder that holds a different evaluation is refused). Progress shows on the terminal.

Examples::

    python -m envs.eval turngym/Math-v0 n=64
    python -m envs.eval turngym/TwentyQuestions-v0 n=16 repeats=4 temperature=0.7
    python -m envs.eval my_pkg.envs:EchoBuilder base_url=http://127.0.0.1:8000/v1 model_name=my-model
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chz

from backend.model import SMOLLM2
from training._logging import read_rows

__all__ = ["EVAL_FILES", "EnvEvalConfig", "EnvEvalSummary", "main", "run_env_eval"]

CONFIG_FILE = "config.json"
EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
EVAL_FILES = (CONFIG_FILE, EPISODES_FILE, SUMMARY_FILE)
"""The files of a results folder (besides the viewer page)."""
_RESUME_IGNORES = ("output", "max_concurrency", "progress", "api_key_env", "timeout_s")
"""Config keys that may change between a killed run and its resumption."""


def parse_env_args(text: str) -> dict[str, Any]:
    """The ``env_args`` key (a JSON object of keyword arguments for an id's source) of the CLIs
    that take an env id (``envs.eval``, ``envs.train``); a one-line ``ValueError`` otherwise."""
    try:
        args = json.loads(text)
    except ValueError:
        raise ValueError(f"env_args is not JSON: {text!r}") from None
    if not isinstance(args, dict):
        raise ValueError(f"env_args must be a JSON object, got {text!r}")
    return args


def folder_name(env: str) -> str:
    """An env id as one folder name (the default run folder of ``envs.eval`` and ``envs.train``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", env)


@chz.chz
class EnvEvalConfig:
    """One evaluation (fields are the command-line keys; the env may also come first, bare)."""

    env: str
    """Installed env id (``turngym/Math-v0``) or ``module:attribute``."""
    env_args: str = "{}"
    """JSON object of keyword arguments for the id's source (e.g. ``{"candidates": 8}``)."""
    n: int = 64
    """Tasks (episode seeds)."""
    repeats: int = 1
    """Plays of each task."""
    seed: int = 0
    """First episode seed."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy)."""
    max_tokens: int = 64
    """Sampled tokens per turn."""
    max_concurrency: int = 16
    """Groups in flight at once (and, with ``base_url``, the HTTP connection pool)."""
    backend: str = "local"
    """``local`` (the embedded model), ``tinker`` or ``auto``; ignored with ``base_url``."""
    model_name: str = SMOLLM2
    """Model (local/tinker), or the served model name (``base_url``)."""
    checkpoint: str | None = None
    """Sampler weights to evaluate (``local://...`` / ``tinker://...``); None: the base model."""
    checkpoint_root: str | None = None
    """Folder that ``local://`` paths are relative to (a run's ``checkpoints/``)."""
    base_url: str | None = None
    """OpenAI-compatible endpoint root (``http://host:port/v1``): message-level, see the module doc."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the endpoint's key (unset: no auth header)."""
    timeout_s: float = 120.0
    """HTTP timeout of one endpoint request."""
    output: str | None = None
    """Results folder (default ``runs/eval/<env>``)."""
    progress: bool = True
    """Show a progress bar on the terminal."""

    @chz.validate
    def _check(self) -> None:
        if self.n < 1 or self.repeats < 1 or self.max_concurrency < 1 or self.max_tokens < 1:
            raise ValueError("n, repeats, max_concurrency and max_tokens must be >= 1")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.backend not in ("local", "tinker", "auto"):
            raise ValueError(f"backend must be local, tinker or auto, got {self.backend!r}")
        parse_env_args(self.env_args)
        if self.base_url is not None and not re.match(r"https?://", self.base_url):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")

    def _env_args(self) -> dict[str, Any]:
        return parse_env_args(self.env_args)

    @property
    def message_level(self) -> bool:
        """The policy is an OpenAI-compatible endpoint (tokens are ours, no extension check)."""
        return self.base_url is not None

    def folder(self) -> Path:
        """The results folder."""
        return Path(self.output or Path("runs/eval") / folder_name(self.env))

    def fingerprint(self) -> dict[str, Any]:
        """The keys that define the evaluation (a resumed run must match them)."""
        return {k: v for k, v in chz.asdict(self).items() if k not in _RESUME_IGNORES}


@dataclass(frozen=True)
class EnvEvalSummary:
    """Aggregates of an evaluation (written to ``summary.json``)."""

    metrics: dict[str, Any]
    """``episodes``, ``reward/mean``, ``reward/stderr``, ``errors``, ``stop/<reason>`` and
    ``fault/<kind>`` counts, ``traj/ext_breaks_unexpected`` (the engine's name, as in
    ``rollout.summarize``), ``turns/mean``, ``env/<metric>`` means..."""
    folder: Path
    """The results folder."""
    resumed: int
    """Episodes found finished in the folder and skipped."""


# --------------------------------------------------------------------------- policy
class _Policy:
    """Makes the token-level policy of each env: one sampler, or one endpoint client."""

    def __init__(self, config: EnvEvalConfig):
        self.config = config
        self.completer: Any = None
        self.sampler: Any = None

    async def open(self) -> None:
        config = self.config
        if config.message_level:
            from completers.openai_compat import OpenAICompatibleMessageCompleter

            assert config.base_url is not None
            self.completer = OpenAICompatibleMessageCompleter(
                config.model_name,
                config.base_url,
                api_key_env=config.api_key_env,
                max_tokens=config.max_tokens,
                temperature=config.temperature,
                timeout_s=config.timeout_s,
                max_connections=config.max_concurrency,
            )
            return
        from tinker_cookbook.completers import TinkerTokenCompleter
        from transformers.utils import logging as hf_logging

        from backend import make_service_client

        hf_logging.disable_progress_bar()  # the local sampler's "Loading weights" bar
        kwargs: dict[str, Any] = {}
        if config.backend != "tinker" and config.checkpoint_root:
            kwargs["root"] = config.checkpoint_root
        service: Any = make_service_client(config.backend, **kwargs)  # type: ignore[arg-type]
        if config.checkpoint:
            client = await service.create_sampling_client_async(model_path=config.checkpoint)
        else:
            client = await service.create_sampling_client_async(base_model=config.model_name)
        self.sampler = TinkerTokenCompleter(client, max_tokens=config.max_tokens, temperature=config.temperature)

    def for_env(self, env: Any) -> Any:
        if self.sampler is not None:
            return self.sampler
        from envs.core import ChatEnv
        from envs.player import PlayerPolicy

        if not isinstance(env, ChatEnv):
            raise TypeError(
                f"base_url plays message-level and needs an envs.ChatEnv; {type(env).__name__} is token-level "
                "only (evaluate it with backend=local or backend=tinker)"
            )
        return PlayerPolicy(env, self.completer)

    async def close(self) -> None:
        if self.completer is not None:
            await self.completer.aclose()


# --------------------------------------------------------------------------- records
def _tokenizer_of(env: Any, fallback: Any) -> Any:
    renderer = getattr(env, "renderer", None)
    return getattr(renderer, "tokenizer", None) or fallback()


def episode_record(
    key: dict[str, int], tokenizer: Any, traj: Any, stats: Any, group_reward: float, group_metrics: dict[str, Any]
) -> dict[str, Any]:
    """One episode as a JSON-ready row (:func:`training._episodes.episode_row`), with the engine's
    own account of its breaks, stop reason and sampled tokens, and the env's fault (the last
    ``turngym/fault/*`` metric)."""
    from envs.core import METRIC_FAULT_PREFIX
    from training._episodes import episode_row

    row = episode_row(
        key,
        tokenizer,
        traj,
        group_reward=group_reward,
        group_metrics=group_metrics,
        unexpected_breaks={b.turn for b in stats.breaks if not b.expected},
        stop_reason=stats.stop_reason,
        sampled_tokens=stats.sampled_tokens,
        seconds=stats.elapsed_s,
    )
    faults = [
        name[len(METRIC_FAULT_PREFIX) :]
        for t in traj.transitions
        for name, value in t.metrics.items()
        if name.startswith(METRIC_FAULT_PREFIX) and value
    ]
    row["fault"] = faults[-1] if faults else ""
    return row


def error_record(key: dict[str, int], error: BaseException) -> dict[str, Any]:
    """An episode that raised (counted in ``errors``, not in the reward mean)."""
    return {
        **key,
        "reward": None,
        "stop": "error",
        "fault": "error",
        "error": f"{type(error).__name__}: {error}"[:500],
        "breaks": 0,
        "expected_breaks": 0,
        "turns": 0,
        "sampled_tokens": 0,
        "seconds": 0.0,
        "metrics": {},
        "transcript": [],
    }


def summarize_records(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The aggregate metrics of episode rows (see :class:`EnvEvalSummary`)."""
    ok = [r for r in records if r.get("reward") is not None]
    rewards = [float(r["reward"]) for r in ok]
    n = len(rewards)
    mean = sum(rewards) / n if n else 0.0
    var = sum((x - mean) ** 2 for x in rewards) / (n - 1) if n > 1 else 0.0
    out: dict[str, Any] = {
        "episodes": len(records),
        "errors": len(records) - n,
        "reward/mean": mean,
        "reward/stderr": math.sqrt(var / n) if n else 0.0,
        "reward/min": min(rewards, default=0.0),
        "reward/max": max(rewards, default=0.0),
        "turns/mean": sum(r["turns"] for r in ok) / n if n else 0.0,
        "sampled_tokens/mean": sum(r["sampled_tokens"] for r in ok) / n if n else 0.0,
        "traj/ext_breaks_unexpected": sum(r["breaks"] for r in records),
        "episodes_with_break": sum(1 for r in records if r["breaks"]),
    }
    for r in records:
        out[f"stop/{r['stop']}"] = out.get(f"stop/{r['stop']}", 0) + 1
        if r["fault"]:
            out[f"fault/{r['fault']}"] = out.get(f"fault/{r['fault']}", 0) + 1
    names = sorted({k for r in ok for k in r["metrics"]})
    for name in names:
        values = [r["metrics"][name] for r in ok if isinstance(r["metrics"].get(name), int | float)]
        if values:
            out[f"env/{name}"] = sum(values) / len(values)
    return out


# --------------------------------------------------------------------------- files
def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _prepare_folder(config: EnvEvalConfig) -> tuple[Path, list[dict[str, Any]]]:
    """Create the folder or check it holds this evaluation; return it and its finished rows
    (a torn last line is cut off)."""
    folder = config.folder()
    folder.mkdir(parents=True, exist_ok=True)
    saved = folder / CONFIG_FILE
    if saved.is_file():
        before = json.loads(saved.read_text(encoding="utf-8")).get("fingerprint", {})
        now = json.loads(json.dumps(config.fingerprint(), default=str))
        changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
        if changed:
            raise ValueError(
                f"{folder} holds another evaluation (differs in {', '.join(changed)}); pass another output="
            )
    rows = read_rows(folder / EPISODES_FILE)
    path = folder / EPISODES_FILE
    if path.is_file():  # drop a torn tail so new rows start on a fresh line
        good = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        if path.stat().st_size != len(good.encode("utf-8")):
            path.write_text(good, encoding="utf-8")
    _write_json(
        saved,
        {
            "fingerprint": config.fingerprint(),
            "config": chz.asdict(config),
            "policy": "message-level endpoint" if config.message_level else "token-level sampler",
            "extension_check": "not applicable: the endpoint's text is re-rendered by our renderer"
            if config.message_level
            else "full",
        },
    )
    return folder, rows


# --------------------------------------------------------------------------- run
async def _play_task(
    source: Any, policy: _Policy, engine: Any, task: int, repeat: int, config: EnvEvalConfig, fallback: Any
) -> list[dict[str, Any]]:
    """Play task ``task`` once: every env of its group, concurrently; rows in slot order."""
    import anyio
    from tinker_cookbook.rl.types import Env

    from envs.gym import resolve_builder
    from rollout import run_episode

    key = {"task": task, "repeat": repeat, "seed": config.seed + task}
    try:
        made = await resolve_builder(source, config.seed + task)
        builder = None if isinstance(made, Env) else made
        envs: list[Any] = [made] if builder is None else list(await builder.make_envs())
    except Exception as error:
        return [error_record({**key, "slot": 0}, error)]
    rows: list[dict[str, Any]] = []
    try:
        results: list[Any] = [None] * len(envs)

        async def episode(slot: int) -> None:  # a group's envs play at once (they may talk to each other)
            try:
                results[slot] = await run_episode(policy.for_env(envs[slot]), envs[slot], engine)
            except Exception as error:
                results[slot] = error

        async with anyio.create_task_group() as tg:
            for slot in range(len(envs)):
                tg.start_soon(episode, slot)
        done = [r for r in results if not isinstance(r, BaseException)]
        group: list[tuple[float, dict[str, Any]]] = [(0.0, {})] * len(results)
        if builder is not None and len(done) == len(results):
            try:
                group = list(await builder.compute_group_rewards([t for t, _ in done], envs))
            except Exception as error:
                return [error_record({**key, "slot": s}, error) for s in range(len(envs))]
        for slot, (result, env) in enumerate(zip(results, envs, strict=True)):
            if isinstance(result, BaseException):
                rows.append(error_record({**key, "slot": slot}, result))
                continue
            traj, stats = result
            reward, metrics = group[slot]
            rows.append(
                episode_record({**key, "slot": slot}, _tokenizer_of(env, fallback), traj, stats, reward, metrics)
            )
    finally:
        if builder is not None:
            with contextlib.suppress(Exception):
                await builder.cleanup()
    return rows


async def run_env_eval(config: EnvEvalConfig) -> EnvEvalSummary:
    """Evaluate as configured (resuming a killed run in the same folder); write the results."""
    import anyio
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from backend.model import register_tokenizers
    from envs.check import load_target
    from envs.gym import ENV_IDS, env_source
    from rollout import EngineConfig, ExtensionCheck, RolloutLimits, Strategy
    from training._episodes import append_rows

    register_tokenizers()
    args = config._env_args()
    if ":" not in config.env and config.env in ENV_IDS:
        source = env_source(config.env, **args)
    elif args:
        raise ValueError("env_args applies to an installed env id only")
    else:
        source = load_target(config.env)
    folder, rows = _prepare_folder(config)
    finished = {(r["task"], r["repeat"]) for r in rows}
    todo = [(t, r) for t in range(config.n) for r in range(config.repeats) if (t, r) not in finished]
    engine = EngineConfig(
        limits=RolloutLimits(max_turn_tokens=config.max_tokens),
        strategy=Strategy.fail_fast(),
        max_concurrent_samples=None,
        extension_check=ExtensionCheck.OFF if config.message_level else ExtensionCheck.FULL,
    )

    def fallback() -> Any:
        from tinker_cookbook.tokenizer_utils import get_tokenizer

        return get_tokenizer(config.model_name)

    if config.message_level:
        print(
            "[eval] message-level endpoint: the server samples text; the tokens are our renderer's rendering "
            "of it (not the server's), and the extension check does not apply",
            file=sys.stderr,
        )
    policy = _Policy(config)
    t0 = time.monotonic()
    all_rows = list(rows)
    if todo:
        await policy.open()
    limiter = anyio.CapacityLimiter(config.max_concurrency)
    total = config.n * config.repeats
    try:
        with Progress(
            TextColumn("[bold]eval[/] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[line]}"),
            TimeElapsedColumn(),
            disable=not config.progress,
            transient=False,
        ) as progress:
            bar = progress.add_task(config.env, total=total, completed=len(finished), line="")

            async def one(task: int, repeat: int) -> None:
                async with limiter:
                    new = await _play_task(source, policy, engine, task, repeat, config, fallback)
                append_rows(folder / EPISODES_FILE, new)
                all_rows.extend(new)
                m = summarize_records(all_rows)
                progress.update(
                    bar,
                    advance=1,
                    line=f"reward {m['reward/mean']:.3f} errors {m['errors']} breaks {m['traj/ext_breaks_unexpected']}",
                )

            async with anyio.create_task_group() as tg:
                for task, repeat in todo:
                    tg.start_soon(one, task, repeat)
    finally:
        await policy.close()
    all_rows.sort(key=lambda r: (r["task"], r["repeat"], r["slot"]))
    metrics = summarize_records(all_rows)
    metrics["seconds"] = time.monotonic() - t0
    metrics["resumed_episodes"] = len(rows)
    _write_json(folder / SUMMARY_FILE, metrics)
    _write_viewer(folder)
    return EnvEvalSummary(metrics=metrics, folder=folder, resumed=len(rows))


def _write_viewer(folder: Path) -> None:
    """The results page, when the viewer is available (it never fails an evaluation)."""
    try:
        from envs.viewer import write_page
    except ImportError:
        return
    write_page(folder)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``[<env>] key=value ...``, evaluate, print the summary; returns the exit status
    (0 done, 2 bad command line or env, 1 every episode failed)."""
    import anyio

    import training

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or any(a in ("-h", "--help", "help") for a in args):
        print("usage: python -m envs.eval <id | module:attr> [key=value ...]\n")
        print(chz.Blueprint(EnvEvalConfig).get_help())
        return 0 if args else 2
    if "=" not in args[0]:
        args = [f"env={args[0]}", *args[1:]]
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        config = training.parse_config(EnvEvalConfig, args)
    except training.ConfigError as error:
        print(f"envs.eval: error: {error}", file=sys.stderr)
        return 2
    from envs.check import TargetError

    try:
        summary = anyio.run(run_env_eval, config)
    except (TargetError, KeyError, ValueError, TypeError) as error:
        print(f"envs.eval: error: {error}", file=sys.stderr)
        return 2
    m = summary.metrics
    print(
        f"episodes={m['episodes']} reward={m['reward/mean']:.3f}±{m['reward/stderr']:.3f} errors={m['errors']} "
        f"ext_breaks_unexpected={m['traj/ext_breaks_unexpected']} turns={m['turns/mean']:.2f} seconds={m['seconds']:.1f}"
        + (f" (resumed {summary.resumed})" if summary.resumed else "")
    )
    print(f"results: {summary.folder}")
    if m["episodes"] and m["errors"] == m["episodes"]:
        first = next((r for r in read_rows(summary.folder / EPISODES_FILE) if r.get("error")), {})
        print(f"envs.eval: error: every episode failed, e.g. {first.get('error', '?')}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
