"""Preference learning offline, end to end: SL warm start -> pairwise-judged samples -> the cookbook's DPO.

``python -m envs.judge.preference [key=value ...]`` runs RLHF's preference pipeline on the
embedded model, offline:

1. **SL**: the training loop's supervised warm start (:func:`training.supervised_warm_start`) on
   a chat JSONL (default: the shipped ``data/sft_chats.jsonl``); the result is saved as the
   ``sl`` checkpoint, the starting point and the DPO reference.
2. **Preferences**: the SL policy answers every prompt (default ``data/preference_prompts.jsonl``)
   ``group_size`` times per group, each answer sampled with its own seed (:func:`answer_seed`);
   the pairwise judge env (:class:`~envs.judge.PairwiseGroupBuilder`, a tournament of pairwise
   verdicts) gives each answer its win rate; the best and worst answers of a group (then the
   second best and second worst, ...) become labelled pairs when their win rates differ. The
   default judge is ``rules`` (:mod:`envs.judge.rules`): it prefers the answer that gives one of
   the prompt's reference answers, then a finished one, then the shorter one, so the labels are
   deterministic and share a property (short, direct answers) that DPO can learn on some prompts
   and show on others (the embedded model as judge is close to a coin toss here: ``NOTES.md``).
   The pairs are written in the format the cookbook's DPO builders read (``ComparisonBuilderFromJsonl``: ``{"comparison": {"prompt_conversation", "completion_A",
   "completion_B"}, "label"}``): ``pairs/train.jsonl`` and, from held-out prompts,
   ``pairs/test.jsonl``.
3. **DPO**: ``tinker_cookbook.preference.train_dpo.main``, unchanged, inside
   :func:`backend.use_local_backend`, from the SL checkpoint; :class:`HeldOutDPOEvaluator`
   (a cookbook ``SamplingClientEvaluator``) reports the DPO loss and the chosen-minus-rejected
   log-ratio margin on the held-out pairs during training and on the final weights.

It ends with ``dpo_loss_first=<held-out loss at the reference> dpo_loss_last=<held-out loss
after DPO> dpo_margin_gain=<held-out margin gain>`` and writes ``summary.json``. Every stage
writes under ``log_path`` and is skipped when its output exists, so a rerun resumes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import chz
from tinker_cookbook.eval.evaluators import SamplingClientEvaluator

if TYPE_CHECKING:
    import tinker

    from envs.judge.tasks import JudgeTask

__all__ = [
    "HeldOutDPOEvaluator",
    "PreferenceConfig",
    "judged_pairs",
    "main",
    "run_pipeline",
    "sft_datums",
]

logger = logging.getLogger(__name__)

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
DATA_DIR = Path(__file__).parent / "data"
SFT_FILE = DATA_DIR / "sft_chats.jsonl"
"""Shipped chat examples (the cookbook's conversation format: one ``{"messages": [...]}`` per line)."""
PROMPTS_FILE = DATA_DIR / "preference_prompts.jsonl"
"""Shipped single-turn prompts for the preference step (judge task format)."""


@chz.chz
class PreferenceConfig:
    """Configuration of the pipeline (fields are the command-line keys)."""

    log_path: str = "runs/preference"
    """Folder of every artifact (``sl/``, ``pairs/``, ``dpo/``, ``summary.json``)."""
    model_name: str = SMOLLM2
    """Base model of the policy."""
    renderer_name: str = "qwen3_instruct"
    """Renderer of the conversations."""
    backend: str = "local"
    """``local`` (embedded, offline) or ``tinker`` (the service ``base_url`` points at)."""
    base_url: str | None = None
    """Tinker service URL (``backend=tinker``)."""
    compute_dtype: str = "float32"
    """Local backend compute dtype (``float32`` or ``bfloat16``)."""
    lora_rank: int = 16
    """LoRA rank of the policy."""
    seed: int = 0
    """Seed of the LoRA initialisation, the prompt split and the pair order."""

    # --- 1. SL ------------------------------------------------------------------------------
    sft_path: str = ""
    """Chat JSONL of the SL step (empty: the shipped ``sft_chats.jsonl``)."""
    sft_train_on_what: str = "all_assistant_messages"
    """Messages the SL step trains on (the cookbook's ``TrainOnWhat``: ``all_assistant_messages``,
    ``last_assistant_message``, ...)."""
    sft_steps: int = 12
    """Supervised warm-start steps."""
    sft_batch_size: int = 8
    """Conversations per warm-start step."""
    sft_learning_rate: float = 3e-4
    """Warm-start learning rate."""

    # --- 2. preferences ---------------------------------------------------------------------
    dataset: str = ""
    """Where the pairs come from: empty, the SL policy's answers ranked by the judge (below); or
    a comparisons JSONL in the cookbook's format (e.g. the shipped ``data/comparisons.jsonl``),
    or a name of the tinker docs (``hhh``, ``helpsteer3``, ``ultrafeedback``: the cookbook's
    builders, which need the Hugging Face hub), split by prompt (``n_test_prompts`` held out;
    :func:`envs.judge.comparisons.split_comparisons`)."""
    dataset_max_pairs: int | None = None
    """Cap on the comparisons read from ``dataset``."""
    prompts_path: str = ""
    """Prompt JSONL (judge-task format; empty: the shipped ``preference_prompts.jsonl``)."""
    n_test_prompts: int = 16
    """Prompts held out: their pairs are the held-out set."""
    groups_per_prompt: int = 2
    """Judged groups per prompt (more pairs)."""
    group_size: int = 4
    """Answers per group (the tournament)."""
    pairs_per_group: int = 2
    """Pairs taken from a group: best vs worst, second best vs second worst, ..."""
    max_tokens: int = 32
    """Tokens per answer."""
    temperature: float = 1.0
    """Sampling temperature of the policy's answers."""
    judge: str = "rules"
    """Judge spec: ``rules`` (the programmatic judge of :mod:`envs.judge.rules`: the answer that
    gives a reference answer, then a finished one, then the shorter one), ``local:<model>``,
    ``tinker:<model>``, ``openai:<model>``, ..."""
    judge_samples: int = 1
    """Judge replies per verdict, averaged (raise it for a sampled model judge, e.g. 4 for
    ``local:<SmolLM2>``)."""
    judge_temperature: float = 1.0
    """Judge sampling temperature."""
    judge_max_tokens: int = 3
    """Tokens of a judge reply after the ``Preferred: `` prefill."""
    pattern: str = "both_orders"
    """Tournament pattern: ``both_orders`` (every pair in both orders: G(G-1) verdicts, exact
    ranks), ``round_robin`` (each answer meets its ``rounds`` next neighbours as A and as B:
    position bias cancels at linear cost, for a slow judge) or ``all_pairs``."""
    rounds: int = 1
    """Neighbours each answer meets under ``round_robin``."""

    # --- 3. DPO -----------------------------------------------------------------------------
    dpo_beta: float = 0.1
    """DPO beta."""
    dpo_learning_rate: float = 2e-4
    """DPO learning rate (linear decay, the cookbook's default schedule); the best of a sweep on
    SmolLM2 and the shipped comparisons (``docs/measurements.md``), not a service rate."""
    dpo_batch_size: int = 8
    """Pairs per DPO step."""
    dpo_epochs: int = 1
    """Passes over the training pairs."""
    dpo_max_steps: int | None = None
    """Cap on DPO steps."""
    dpo_eval_every: int = 6
    """Held-out evaluation period of the DPO run (the final weights are always evaluated)."""

    @chz.validate
    def _check(self) -> None:
        if self.backend not in ("local", "tinker"):
            raise ValueError(f"backend must be 'local' or 'tinker', got {self.backend!r}")
        for name in (
            "sft_batch_size",
            "group_size",
            "pairs_per_group",
            "groups_per_prompt",
            "dpo_batch_size",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (pairs), got {self.group_size}")
        if self.n_test_prompts < 1:
            raise ValueError(f"n_test_prompts must be >= 1 (the held-out pairs), got {self.n_test_prompts}")
        if self.dpo_epochs < 1 or self.dpo_beta <= 0:
            raise ValueError("dpo_epochs must be >= 1 and dpo_beta > 0")


# --------------------------------------------------------------------------------------------
# 1. SL
# --------------------------------------------------------------------------------------------
def sft_datums(
    path: str | Path, renderer: Any, train_on_what: str = "all_assistant_messages"
) -> list[tinker.Datum]:
    """Next-token datums of a chat JSONL file, weighted on the messages ``train_on_what`` names
    (a cookbook ``TrainOnWhat`` value; default: every assistant reply, so a multi-turn chat trains
    all of its replies, not only the last one as the renderer's default would)."""
    from tinker_cookbook.renderers import TrainOnWhat

    from training import sft_datum

    try:
        what = TrainOnWhat(train_on_what)
    except ValueError:
        choices = ", ".join(w.value for w in TrainOnWhat)
        raise ValueError(f"train_on_what must be one of {choices}; got {train_on_what!r}") from None

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"chat file not found: {path}")
    datums = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            messages = json.loads(line)["messages"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ValueError(f"{path}:{number}: expected an object with 'messages'") from None
        model_input, weights = renderer.build_supervised_example(messages, train_on_what=what)
        datums.append(sft_datum(model_input.to_ints(), [float(w) for w in weights.tolist()]))
    if not datums:
        raise ValueError(f"{path} holds no conversations")
    return datums


async def _sl_step(config: Any, service: Any, renderer: Any, out: Path) -> dict[str, Any]:
    """Warm start (``config``: a :class:`PreferenceConfig` or anything with its ``sft_*`` keys), save; returns ``{"state_path", "sampler_path", **metrics}`` (cached in ``sl.json``)."""
    import training

    record = out / "sl.json"
    if record.is_file():
        return json.loads(record.read_text())
    datums = sft_datums(config.sft_path or SFT_FILE, renderer, config.sft_train_on_what)
    client = await service.create_lora_training_client_async(
        config.model_name,
        rank=config.lora_rank,
        seed=config.seed,
        user_metadata={"renderer_name": config.renderer_name},
    )
    hook = training.supervised_warm_start(
        datums,
        steps=config.sft_steps,
        batch_size=config.sft_batch_size,
        learning_rate=config.sft_learning_rate,
        seed=config.seed,
    )
    metrics = await hook(client, training.Config(learning_rate=config.sft_learning_rate))
    state = await (await client.save_state_async("sl")).result_async()
    sampler = await (await client.save_weights_for_sampler_async("sl")).result_async()
    result = {"state_path": state.path, "sampler_path": sampler.path, **metrics}
    out.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(result, indent=2))
    return result


# --------------------------------------------------------------------------------------------
# 2. Preferences from the pairwise judge
# --------------------------------------------------------------------------------------------
def _pairs_from_group(
    task: JudgeTask,
    responses: Sequence[list[Any] | None],
    rewards: Sequence[float],
    k: int,
    rng: random.Random,
) -> list[dict[str, Any]]:
    ranked = sorted(
        (i for i in range(len(responses)) if responses[i]), key=lambda i: rewards[i], reverse=True
    )
    pairs = []
    for j in range(min(k, len(ranked) // 2)):
        best, worst = ranked[j], ranked[len(ranked) - 1 - j]
        if rewards[best] <= rewards[worst]:
            break
        chosen, rejected = responses[best], responses[worst]
        a_first = rng.random() < 0.5
        pairs.append(
            {
                "comparison": {
                    "prompt_conversation": list(task.messages),
                    "completion_A": chosen if a_first else rejected,
                    "completion_B": rejected if a_first else chosen,
                },
                "label": "A" if a_first else "B",
                "win_rates": [rewards[best], rewards[worst]],
                "task": task.id,
            }
        )
    return pairs


def answer_seed(seed: int, task_id: str, group: int, slot: int) -> int:
    """The sampling seed of one answer: its place, mixed (``backend.seeding.mix_seed``)."""
    from backend.seeding import mix_seed

    return mix_seed(seed, task_id, group, slot)


async def judged_pairs(
    tasks: Sequence[JudgeTask],
    sampling_client: Any,
    config: PreferenceConfig,
    *,
    seed: int,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The policy (``sampling_client``) answers each task ``group_size`` times per group; the
    pairwise judge env ranks each group; returns labelled pairs (cookbook format) and counters.

    Every answer is sampled with its own seed (:func:`answer_seed` of ``seed``, the task, the group
    and the slot), so with a deterministic judge the pairs are the same on every run."""
    import anyio
    from tinker_cookbook.rl.rollouts import do_single_rollout

    from envs.judge import JudgeConfig, PairingScheme, PairwiseGroupBuilder, load_rubrics
    from training import SeededTokenCompleter

    judge = JudgeConfig(
        config.judge,
        max_tokens=config.judge_max_tokens,
        temperature=config.judge_temperature,
        samples=config.judge_samples,
        reply_prefix="Preferred: ",
        timeout_s=300.0,
        max_attempts=2,
    )
    rubrics = load_rubrics(DATA_DIR / "rubrics.json")
    rng = random.Random(seed)
    results: list[tuple[JudgeTask, int, list[Any], list[float]]] = []
    counters = {"groups": 0.0, "answers": 0.0, "forfeits": 0.0, "tied_groups": 0.0}

    async def one_group(task: JudgeTask, group: int) -> None:
        builder = PairwiseGroupBuilder(
            task=task,
            judge=judge,
            group_size=config.group_size,
            pattern=PairingScheme(config.pattern),
            rounds=config.rounds,
            rubric=rubrics.get(task.rubric),
            model_name_for_tokenizer=config.model_name,
            renderer_name=config.renderer_name,
        )
        envs = list(await builder.make_envs())
        trajectories = [None] * len(envs)

        async def play(i: int) -> None:
            policy = SeededTokenCompleter(
                sampling_client,
                max_tokens=config.max_tokens,
                temperature=config.temperature,
                seed=answer_seed(seed, task.id, group, i),
            )
            trajectories[i] = await do_single_rollout(policy, envs[i])  # type: ignore[call-overload]

        async with anyio.create_task_group() as tg:
            for i in range(len(envs)):
                tg.start_soon(play, i)
        rewards = [r for r, _ in await builder.compute_group_rewards(trajectories, envs)]  # type: ignore[arg-type]
        results.append((task, group, [env.response_messages for env in envs], rewards))

    async with anyio.create_task_group() as tg:
        for task in tasks:
            for group in range(config.groups_per_prompt):
                tg.start_soon(one_group, task, group)
    pairs: list[dict[str, Any]] = []
    for task, _group, responses, rewards in sorted(results, key=lambda r: (r[0].id, r[1])):
        counters["groups"] += 1
        counters["answers"] += len(responses)
        counters["forfeits"] += sum(r is None for r in responses)
        counters["tied_groups"] += float(max(rewards) == min(rewards))
        pairs.extend(_pairs_from_group(task, responses, rewards, config.pairs_per_group, rng))
    rng.shuffle(pairs)
    counters["pairs"] = float(len(pairs))
    return pairs, counters


async def _preference_step(
    config: PreferenceConfig, service: Any, sampler_path: str, out: Path
) -> tuple[Path, Path, dict[str, Any]]:
    from envs.judge import load_tasks

    train_file, test_file, record = out / "train.jsonl", out / "test.jsonl", out / "stats.json"
    if record.is_file():
        return train_file, test_file, json.loads(record.read_text())
    tasks = [t for t in load_tasks(config.prompts_path or PROMPTS_FILE) if t.turns == 1]
    random.Random(config.seed).shuffle(tasks)
    if not 0 < config.n_test_prompts < len(tasks):
        raise ValueError(f"n_test_prompts must be in [1, {len(tasks) - 1}] for {len(tasks)} prompts")
    train_tasks, test_tasks = tasks[: -config.n_test_prompts], tasks[-config.n_test_prompts :]
    sampling_client = await service.create_sampling_client_async(model_path=sampler_path)
    t0 = time.monotonic()
    train_pairs, train_stats = await judged_pairs(train_tasks, sampling_client, config, seed=config.seed)
    test_pairs, test_stats = await judged_pairs(test_tasks, sampling_client, config, seed=config.seed + 1)
    if not train_pairs or not test_pairs:
        raise RuntimeError(
            f"the judge separated no answers ({len(train_pairs)} train / {len(test_pairs)} held-out pairs); "
            "try more groups_per_prompt or judge_samples"
        )
    out.mkdir(parents=True, exist_ok=True)
    for path, pairs in ((train_file, train_pairs), (test_file, test_pairs)):
        path.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    stats = {
        **{f"train/{k}": v for k, v in train_stats.items()},
        **{f"test/{k}": v for k, v in test_stats.items()},
        "seconds": time.monotonic() - t0,
    }
    record.write_text(json.dumps(stats, indent=2))
    return train_file, test_file, stats


# --------------------------------------------------------------------------------------------
# 3. DPO with a held-out evaluator
# --------------------------------------------------------------------------------------------
def _pair_datums(config: PreferenceConfig, pairs_file: Path) -> list[tinker.Datum]:
    """Interleaved chosen/rejected datums of a pairs file, as the cookbook's DPO builder makes them."""
    from tinker_cookbook.preference.dpo_datasets import DPODatasetBuilderFromComparisons
    from tinker_cookbook.preference.preference_datasets import ComparisonBuilderFromJsonl

    n = sum(1 for line in pairs_file.read_text().splitlines() if line.strip())
    builder = DPODatasetBuilderFromComparisons(
        common_config=_common_config(config, batch_size=n),
        comparison_builder=ComparisonBuilderFromJsonl(train_path=str(pairs_file)),
    )
    train, _ = builder()
    return list(train.get_batch(0))


def _common_config(config: PreferenceConfig, batch_size: int) -> Any:
    from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig

    return ChatDatasetBuilderCommonConfig(
        model_name_for_tokenizer=config.model_name,
        renderer_name=config.renderer_name,
        max_length=1024,
        batch_size=batch_size,
    )


class HeldOutDPOEvaluator(SamplingClientEvaluator):
    """A cookbook ``SamplingClientEvaluator`` scoring held-out preference pairs: the DPO loss and the chosen-minus-rejected log-ratio margin of the sampled
    policy against a reference sampler (the cookbook's ``compute_dpo_loss``).

    Metrics (prefix ``heldout/``): ``dpo_loss``, ``accuracy``, ``margin`` (beta-scaled, the
    cookbook's name) and ``log_ratio_margin`` (unscaled: mean of (policy - reference) log-ratio of
    the chosen answer minus that of the rejected one).
    """

    def __init__(
        self, datums: Sequence[tinker.Datum], reference: Any, beta: float, prefix: str = "heldout"
    ) -> None:
        if not datums or len(datums) % 2:
            raise ValueError(f"need interleaved chosen/rejected datums, got {len(datums)}")
        self.datums = list(datums)
        self.reference = reference
        self.beta = beta
        self.prefix = prefix
        self._reference_logprobs: list[float] | None = None

    async def _sums(self, sampling_client: Any) -> list[float]:
        import torch

        async def one(datum: tinker.Datum) -> float:
            targets = datum.loss_fn_inputs["target_tokens"].to_torch()
            weights = datum.loss_fn_inputs["weights"].to_torch().float()
            full = datum.model_input.append_int(int(targets[-1]))
            logprobs = await sampling_client.compute_logprobs_async(full)
            return float(torch.dot(torch.tensor(logprobs[1:], dtype=torch.float32), weights))

        return list(await asyncio.gather(*(one(d) for d in self.datums)))

    async def __call__(self, sampling_client: Any) -> dict[str, float]:
        """Score the held-out pairs with ``sampling_client`` as the policy."""
        import torch
        from tinker_cookbook.preference.train_dpo import compute_dpo_loss

        if self._reference_logprobs is None:
            self._reference_logprobs = await self._sums(self.reference)
        ref = self._reference_logprobs
        # The reference scored as the policy: its own sums (one pass instead of two).
        policy = ref if sampling_client is self.reference else await self._sums(sampling_client)
        chosen, rejected = [torch.tensor(x) for x in policy[0::2]], [torch.tensor(x) for x in policy[1::2]]
        chosen_ref, rejected_ref = [torch.tensor(x) for x in ref[0::2]], [torch.tensor(x) for x in ref[1::2]]
        _, metrics = compute_dpo_loss(chosen, rejected, chosen_ref, rejected_ref, self.beta)
        log_ratio = sum(
            (c - cr) - (r - rr)
            for c, r, cr, rr in zip(policy[0::2], policy[1::2], ref[0::2], ref[1::2], strict=True)
        ) / (len(policy) // 2)
        out = {
            f"{self.prefix}/{k}": float(v)
            for k, v in metrics.items()
            if k in ("dpo_loss", "accuracy", "margin")
        }
        out[f"{self.prefix}/log_ratio_margin"] = float(log_ratio)
        return out


def _dpo_step(
    config: PreferenceConfig, sl: dict[str, Any], train_file: Path, test_file: Path, out: Path, service: Any
) -> dict[str, Any]:
    from tinker_cookbook.preference import train_dpo
    from tinker_cookbook.preference.dpo_datasets import DPODatasetBuilderFromComparisons
    from tinker_cookbook.preference.preference_datasets import ComparisonBuilderFromJsonl

    reference = service.create_sampling_client(model_path=sl["sampler_path"]).result()
    held_out = _pair_datums(config, test_file)

    evaluator = HeldOutDPOEvaluator(held_out, reference, config.dpo_beta)
    dpo = train_dpo.Config(
        log_path=str(out),
        model_name=config.model_name,
        renderer_name=config.renderer_name,
        recipe_name="turngym_preference",
        load_checkpoint_path=sl["state_path"],
        dataset_builder=DPODatasetBuilderFromComparisons(
            common_config=_common_config(config, batch_size=config.dpo_batch_size),
            comparison_builder=ComparisonBuilderFromJsonl(train_path=str(train_file)),
        ),
        learning_rate=config.dpo_learning_rate,
        num_epochs=config.dpo_epochs,
        dpo_beta=config.dpo_beta,
        lora_rank=config.lora_rank,
        base_url=config.base_url,
        evaluator_builders=[lambda: evaluator],
        eval_every=config.dpo_eval_every,
        save_every=0,
        max_steps=config.dpo_max_steps,
    )
    train_dpo.main(dpo)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    checkpoints = [
        json.loads(line) for line in (out / "checkpoints.jsonl").read_text().splitlines() if line.strip()
    ]
    final_sampler = next(r["sampler_path"] for r in reversed(checkpoints) if r.get("sampler_path"))
    before = asyncio.run(evaluator(reference))
    after = asyncio.run(evaluator(service.create_sampling_client(model_path=final_sampler).result()))
    train_losses = [r["dpo_loss"] for r in rows if "dpo_loss" in r]
    return {
        "steps": len(train_losses),
        "train_dpo_loss_first": train_losses[0],
        "train_dpo_loss_last": train_losses[-1],
        "heldout_before": before,
        "heldout_after": after,
        "final_sampler_path": final_sampler,
    }


def run_pipeline(config: PreferenceConfig) -> dict[str, Any]:
    """Run the three stages (each skipped when its output exists); returns ``summary.json``'s contents."""
    import contextlib

    import tinker

    from backend.model import register_tokenizers
    from backend.offline import use_local_backend
    from renderers_ext import load_renderer

    out = Path(config.log_path).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    local = config.backend == "local"
    register_tokenizers()
    block = (
        use_local_backend(out / "checkpoints", compute_dtype=config.compute_dtype)
        if local
        else contextlib.nullcontext()
    )
    with block:
        service = tinker.ServiceClient(base_url=config.base_url)
        renderer = load_renderer(config.renderer_name, config.model_name)
        print("[preference] 1/3 SL warm start", flush=True)
        sl = asyncio.run(_sl_step(config, service, renderer, out / "sl"))
        print(
            f"[preference] SL: loss/token {sl['warm_start/loss_first']:.3f} -> {sl['warm_start/loss_last']:.3f}",
            flush=True,
        )
        if config.dataset:
            from envs.judge.comparisons import split_comparisons

            print(f"[preference] 2/3 pairs from dataset={config.dataset}", flush=True)
            t_pairs = time.monotonic()
            train_file, test_file, stats = split_comparisons(
                config.dataset,
                out / "pairs",
                n_test_prompts=config.n_test_prompts,
                seed=config.seed,
                max_pairs=config.dataset_max_pairs,
            )
            stats["seconds"] = time.monotonic() - t_pairs
        else:
            print("[preference] 2/3 sampling and judging pairs", flush=True)
            train_file, test_file, stats = asyncio.run(
                _preference_step(config, service, sl["sampler_path"], out / "pairs")
            )
        print(
            f"[preference] pairs: {stats['train/pairs']:.0f} train, {stats['test/pairs']:.0f} held-out "
            f"({stats['seconds']:.0f}s)",
            flush=True,
        )
        print("[preference] 3/3 the cookbook's DPO trainer", flush=True)
        dpo = _dpo_step(config, sl, train_file, test_file, out / "dpo", service)
    before, after = dpo["heldout_before"], dpo["heldout_after"]
    summary = {
        "sl": sl,
        "pairs": stats,
        "dpo": dpo,
        "dpo_loss_first": before["heldout/dpo_loss"],
        "dpo_loss_last": after["heldout/dpo_loss"],
        "dpo_margin_gain": after["heldout/log_ratio_margin"] - before["heldout/log_ratio_margin"],
        "seconds": time.monotonic() - t0,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _report(summary: dict[str, Any]) -> list[str]:
    """The lines ``python -m envs.judge.preference`` prints after its run."""
    dpo = summary["dpo"]
    return [
        f"train pairs={summary['pairs']['train/pairs']:.0f} held-out pairs={summary['pairs']['test/pairs']:.0f} "
        f"dpo steps={dpo['steps']} train dpo_loss {dpo['train_dpo_loss_first']:.4f} -> {dpo['train_dpo_loss_last']:.4f}",
        f"dpo_loss_first={summary['dpo_loss_first']:.4f} dpo_loss_last={summary['dpo_loss_last']:.4f} "
        f"dpo_margin_gain={summary['dpo_margin_gain']:.4f}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m envs.judge.preference [key=value ...]``; returns the exit status."""
    from training import run_pipeline_cli

    return run_pipeline_cli("envs.judge.preference", PreferenceConfig, run_pipeline, _report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
