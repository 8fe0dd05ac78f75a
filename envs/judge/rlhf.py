"""RLHF in the tinker docs' three steps, one command: ``python -m envs.judge.rlhf [key=value ...]``.

On the embedded model, offline (``backend=local``), or on a service (``backend=tinker``):

1. **SL policy**: the supervised warm start of :mod:`envs.judge.preference` on a chat JSONL
   (default: the shipped ``data/sft_chats.jsonl``), saved as the ``sl`` checkpoint.
2. **Reward model**: the cookbook's step 2, unchanged: ``supervised.train.main`` on
   ``ChatDatasetBuilderFromComparisons`` (each comparison in both orders, ``rm_both_orders``, the
   cookbook's ``swap``; the preference-model format: prompt,
   ``==== Completion A ====``, ``==== Completion B ====``, ``==== Preference ====``, then ``A`` or
   ``B``), a LoRA on the base model. Its comparisons (``rm_comparisons``): the train split of
   ``dataset`` (default: the shipped ``data/rm_comparisons.jsonl``, ``data/comparisons.jsonl``
   with four sentence-form comparisons per prompt, :func:`envs.judge.comparisons.sentence_comparisons`;
   split by prompt,
   :func:`envs.judge.comparisons.split_comparisons`), and/or, as InstructGPT labelled its reward
   model's data (people ranking the SL policy's own samples), the SL policy's answers to the
   *train* prompts, every pair ranked by the ``rules`` checks against those prompts' reference
   answers (:func:`envs.judge.comparisons.label_answers`). The rules stand in for the labellers:
   the same preference the held-out judgement applies, but on other prompts, so the reward model
   never sees a held-out prompt nor its reference. A reward model of hand-written comparisons
   only scores the policy's answers near chance: they do not look like them.
   Reported: the held-out pair accuracy (chance 0.5), before and after training, on the held-out
   prompts' comparisons, of the reward model as step 3 uses it
   (:class:`~envs.judge.reward_model.SymmetricPreferenceModel`: the label's log-odds in both
   orders, so a preference for a position cancels) and, for comparison, of the cookbook's
   ``PreferenceModelFromChatRenderer`` (one greedy token, each comparison in both orders).
3. **RL against the reward model**: our training loop on the pairwise judge env
   (``env.kind=pairwise``, each pair of a group once: each answer's reward is its mean
   probability of beating the others), the judge the learned model loaded from its sampler
   checkpoint (judge spec ``rm:<path>``, :mod:`envs.judge.reward_model`: ``local://`` here,
   ``tinker://`` on a service), from the SL checkpoint, on the train prompts. ``rl_reward=rules``
   swaps the reward model for the held-out judge's own checks (on the train prompts and their
   references): not RLHF but its ceiling, what this RL budget can do with a reward that is never
   wrong, which tells whether a short gain is the reward model's fault or the RL settings'.

Then a **held-out judgement**: the SL and the RL policy answer each held-out prompt
``eval_samples`` times (the same sampling seeds), and the RL answer meets the SL answer of the same
seed before two judges: the reward model it was trained against (the cookbook's
``ComparisonEvaluator`` win, both orders), and a held-out judge it never saw,
``rules`` (:mod:`envs.judge.rules`: the answer that gives the prompt's reference answer, then a
finished one, then the shorter one). A win counts 1, a tie 1/2 (the reward model's win is
graded); the gain is the win rate minus 1/2 (the SL policy against itself), with its standard
error over the held-out prompts (each prompt's mean win, so answers to one prompt count as the
correlated draws they are). A reward model that was hacked shows as an RM gain without a
held-out one.

It ends with ``rm_heldout_accuracy=<a> rlhf_rm_win_gain=<b> rlhf_heldout_win_gain=<c>`` and writes
``summary.json``; each stage is skipped when its output exists, so a rerun resumes.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import chz

from envs.judge.preference import PROMPTS_FILE, SMOLLM2, answer_seed

__all__ = ["RlhfConfig", "main", "rm_accuracy", "run_pipeline"]


@chz.chz
class RlhfConfig:
    """Configuration of the three steps (fields are the command-line keys)."""

    log_path: str = "runs/rlhf"
    """Folder of every artifact (``sl/``, ``pairs/``, ``rm/``, ``rl/``, ``summary.json``)."""
    model_name: str = SMOLLM2
    """Base model of the policy and of the reward model."""
    renderer_name: str = "qwen3_instruct"
    """Renderer of the conversations (policy and reward model)."""
    backend: str = "local"
    """``local`` (embedded, offline) or ``tinker`` (the service ``base_url`` points at)."""
    base_url: str | None = None
    """Tinker service URL (``backend=tinker``)."""
    lora_rank: int = 16
    """LoRA rank of the policy and of the reward model."""
    seed: int = 0
    """Seed of the LoRA initialisations, the prompt split and the sampling."""

    # --- 1. SL policy -----------------------------------------------------------------------
    sft_path: str = ""
    """Chat JSONL of the SL step (empty: the shipped ``sft_chats.jsonl``)."""
    sft_train_on_what: str = "all_assistant_messages"
    """Messages the SL step trains on (the cookbook's ``TrainOnWhat``)."""
    sft_steps: int = 12
    """Supervised steps."""
    sft_batch_size: int = 8
    """Conversations per SL step."""
    sft_learning_rate: float = 3e-4
    """SL learning rate."""

    # --- 2. reward model --------------------------------------------------------------------
    dataset: str = ""
    """Comparisons: a JSONL in the cookbook's format (empty: the shipped ``rm_comparisons.jsonl``) or
    ``hhh`` / ``helpsteer3`` / ``ultrafeedback`` (the cookbook's builders; need the network)."""
    dataset_max_pairs: int | None = None
    """Cap on the comparisons read."""
    n_test_prompts: int = 12
    """Prompts held out: their comparisons measure the reward model, and the policies are judged on them."""
    rm_learning_rate: float = 1e-3
    """Reward-model learning rate (linear decay)."""
    rm_batch_size: int = 16
    """Comparisons per reward-model step (each in both orders)."""
    rm_epochs: int = 3
    """Passes over the train comparisons (three: after one, the reward model had learned length
    but neither the finished-vs-cut pairs nor the right-vs-wrong words; ``envs/judge/NOTES.md``)."""
    rm_max_steps: int | None = None
    """Cap on reward-model steps."""
    rm_comparisons: str = "dataset"
    """What the reward model trains on: ``policy`` (the SL policy's own answers to the train prompts,
    ``rm_policy_samples`` each, every pair ranked by the ``rules`` checks against the train prompts'
    reference answers: InstructGPT's step 2, labellers ranking the SL policy's samples, with the rules
    standing in for the labellers), ``dataset`` (the train split of ``dataset``), or ``both``. The
    held-out prompts are never sampled for it, and the held-out accuracy is always on ``dataset``'s
    held-out comparisons."""
    rm_policy_samples: int = 4
    """SL answers per train prompt for ``rm_comparisons=policy|both`` (all pairs of them, ties left out)."""
    rm_policy_min_word_gap: int = 0
    """Of the SL answers' pairs that only length decides, keep those whose word counts differ by at
    least this much (0: all; a correct-vs-wrong or finished-vs-cut pair is always kept)."""
    rm_both_orders: bool = True
    """Train on both orders of every comparison (the cookbook's ``swap``: twice the tokens a step),
    so the position tells nothing and the model must learn the answers; False: one order drawn at
    random (the cookbook's default)."""

    # --- 3. RL ------------------------------------------------------------------------------
    rl_steps: int = 16
    """RL steps (the train prompts are repeated as often as that takes)."""
    rl_batch_size: int = 8
    """Prompts per RL step (16 steps of 8: against the sentence-form reward model, 8 steps of 4
    moved the policy too little to win much; ``envs/judge/NOTES.md``)."""
    rl_group_size: int = 4
    """Answers per prompt (the tournament of the pairwise env, in both orders)."""
    rl_learning_rate: float = 1e-4
    """RL learning rate."""
    rl_reward: str = "rm"
    """What RL optimises: ``rm`` (the learned reward model: RLHF) or a ``rules`` judge spec
    (``rules``, ``rules:<check>,...``: the held-out judge's own checks, against the *train*
    prompts' reference answers). ``rules`` is the ceiling, not RLHF: how far this RL budget can
    move the policy with a reward that agrees with the held-out judge everywhere (on other prompts)."""
    rl_advantage_normalize_std: bool = False
    """Divide each group's centred rewards by their std (GRPO's advantage; ``training.Config``'s
    ``advantage_normalize_std``)."""
    rl_kl_penalty_coef: float = 0.0
    """KL penalty to the SL policy in RL (``training.Config``'s ``kl_penalty_coef``: each sampled
    token's advantage is lowered by ``coef * (logp_policy - logp_SL)`` less its batch mean), so a
    higher ``rl_learning_rate`` can follow the reward without drifting where the reward cannot see
    (correctness on other prompts). 0: off."""
    max_tokens: int = 32
    """Tokens per answer (RL and the held-out judgement)."""
    temperature: float = 1.0
    """Sampling temperature of the policy."""

    # --- judgement --------------------------------------------------------------------------
    eval_samples: int = 32
    """Answers per held-out prompt and policy (12 prompts x 32: 384 RL-vs-SL pairs). With 8 (96
    pairs), the answers' sampling noise alone moved the gain as much as the +0.1 sought
    (``envs/judge/NOTES.md``); the summary gives the gain's standard error over the prompts."""

    @chz.validate
    def _check(self) -> None:
        if self.backend not in ("local", "tinker"):
            raise ValueError(f"backend must be 'local' or 'tinker', got {self.backend!r}")
        for name in (
            "sft_batch_size",
            "rm_batch_size",
            "rm_epochs",
            "rl_steps",
            "rl_batch_size",
            "eval_samples",
            "rm_policy_samples",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.rm_comparisons not in ("policy", "dataset", "both"):
            raise ValueError(
                f"rm_comparisons must be 'policy', 'dataset' or 'both', got {self.rm_comparisons!r}"
            )
        if self.rm_comparisons != "dataset" and self.rm_policy_samples < 2:
            raise ValueError(f"rm_policy_samples must be >= 2 (pairs), got {self.rm_policy_samples}")
        if self.rl_reward != "rm" and self.rl_reward.partition(":")[0] != "rules":
            raise ValueError(
                f"rl_reward must be 'rm' or a rules spec ('rules[:checks]'), got {self.rl_reward!r}"
            )
        if self.rl_kl_penalty_coef < 0:
            raise ValueError(f"rl_kl_penalty_coef must be >= 0, got {self.rl_kl_penalty_coef}")
        if self.rl_group_size < 2:
            raise ValueError(f"rl_group_size must be >= 2 (pairs), got {self.rl_group_size}")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _absolute(path: str, root: Path) -> str:
    """A ``local://<run>/...`` path as ``local:///<root>/<run>/...`` (any local service reads it)."""
    rest = path.removeprefix("local://")
    if not path.startswith("local://") or rest.startswith("/"):
        return path
    return f"local://{(root / rest).resolve()}"


def _prompt_text(row: dict[str, Any]) -> str | None:
    conversation = row["comparison"]["prompt_conversation"]
    if len(conversation) != 1 or conversation[0]["role"] != "user":
        return None
    content = conversation[0]["content"]
    return content if isinstance(content, str) else None


def _tasks_file(rows: list[dict[str, Any]], path: Path) -> Path:
    """The distinct single-turn prompts of ``rows`` as a judge-task file, with the reference
    answers of the shipped preference prompts where the prompt is one of them."""
    references = {r["prompt"]: r.get("reference", []) for r in _rows(PROMPTS_FILE)}
    prompts = list(dict.fromkeys(p for p in map(_prompt_text, rows) if p))
    lines = []
    for i, prompt in enumerate(prompts):
        task: dict[str, Any] = {"id": f"{path.stem}-{i:03d}", "prompt": prompt, "rubric": "default"}
        if references.get(prompt):
            task["reference"] = references[prompt]
        lines.append(json.dumps(task) + "\n")
    if len(lines) < 2:
        raise ValueError(f"{path.name}: need >= 2 single-turn prompts, the comparisons give {len(lines)}")
    path.write_text("".join(lines))
    return path


# --------------------------------------------------------------------------------------------
# 2. the reward model
# --------------------------------------------------------------------------------------------
def _policy_comparisons(
    config: RlhfConfig, service: Any, sl_sampler: str, train_tasks: Path, out: Path
) -> tuple[Path, dict[str, float]]:
    """The SL policy's answers to the train prompts (``rm_policy_samples`` each), every pair ranked
    by the ``rules`` checks against the prompt's reference answers (:func:`label_answers`), written
    to ``out`` (cookbook format; skipped when it exists). Only ``train_tasks`` is sampled: the
    held-out prompts stay unseen by the reward model."""
    from tinker_cookbook.renderers import get_text_content

    from envs.judge import load_tasks
    from envs.judge.comparisons import label_answers
    from envs.judge.rules import RuleJudge
    from renderers_ext import load_renderer

    if not out.is_file():
        renderer = load_renderer(config.renderer_name, config.model_name)
        tasks = load_tasks(train_tasks)
        client = _sampling_client(service, sl_sampler)
        answers = asyncio.run(_answers(client, tasks, config, renderer, config.rm_policy_samples))
        judge = RuleJudge()
        rows = [
            row
            for task, group in zip(tasks, answers, strict=True)
            for row in label_answers(
                get_text_content(task.messages[-1]),
                group,
                task.reference,
                judge,
                min_word_gap=config.rm_policy_min_word_gap,
            )
        ]
        if not rows:
            raise RuntimeError(
                "the SL policy's answers to the train prompts gave no decided pair to train on"
            )
        out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows = _rows(out)
    prompts = {_prompt_text(r) for r in rows}
    return out, {"policy/pairs": float(len(rows)), "policy/prompts": float(len(prompts))}


def _rm_train_file(config: RlhfConfig, dataset_train: Path, policy: Path | None, out: Path) -> Path:
    """The reward model's train comparisons for ``rm_comparisons``: the dataset's, the policy's, or both."""
    parts = {"dataset": [dataset_train], "policy": [policy], "both": [dataset_train, policy]}[
        config.rm_comparisons
    ]
    out.write_text("".join(path.read_text() for path in parts if path is not None))
    return out


async def rm_accuracy(model: Any, rows: Sequence[dict[str, Any]]) -> float:
    """Pair accuracy of a cookbook ``PreferenceModel`` on labelled comparison rows, each scored in
    both orders (a tie or an unreadable verdict counts as wrong)."""
    from tinker_cookbook.preference.types import Comparison, LabeledComparison

    from envs.judge.reward_model import SymmetricPreferenceModel

    orders = 1 if isinstance(model, SymmetricPreferenceModel) else 2  # its swap negates the score

    async def one(row: dict[str, Any]) -> float:
        labeled = LabeledComparison(comparison=Comparison(**row["comparison"]), label=row["label"])
        right = 0.0
        for item in (labeled, labeled.swap())[:orders]:
            score = await model(item.comparison)
            right += float((score < 0 and item.label == "A") or (score > 0 and item.label == "B"))
        return right / orders

    scores = await asyncio.gather(*(one(r) for r in rows if r["label"] in ("A", "B")))
    return sum(scores) / max(len(scores), 1)


def _check_rm_batch(n_train: int, batch_size: int) -> None:
    """The cookbook's comparison dataset drops a short last batch: fewer pairs than a batch would
    train no step at all, and fail later on a missing metrics file."""
    if n_train < batch_size:
        raise ValueError(
            f"the reward model has {n_train} train comparisons, fewer than rm_batch_size={batch_size}"
        )


def _rm_step(
    config: RlhfConfig, train_file: Path, test_file: Path, out: Path, service: Any, root: Path
) -> dict[str, Any]:
    from tinker_cookbook import checkpoint_utils
    from tinker_cookbook.preference.preference_datasets import (
        ChatDatasetBuilderFromComparisons,
        ComparisonBuilderFromJsonl,
    )
    from tinker_cookbook.supervised import train as supervised_train
    from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig

    from envs.judge.reward_model import SymmetricPreferenceModel, load_preference_model

    record = out / "rm.json"
    if record.is_file():
        return json.loads(record.read_text())
    test_rows = _rows(test_file)
    n_train = len(_rows(train_file))
    _check_rm_batch(n_train, config.rm_batch_size)
    base = _sampling_client(service, base_model=config.model_name)
    from tinker_cookbook.preference.types import PreferenceModelFromChatRenderer

    from renderers_ext import load_renderer

    renderer = load_renderer(config.renderer_name, config.model_name)
    before = asyncio.run(rm_accuracy(SymmetricPreferenceModel(renderer, base), test_rows))
    before_greedy = asyncio.run(rm_accuracy(PreferenceModelFromChatRenderer(renderer, base), test_rows))
    t0 = time.monotonic()
    rm = supervised_train.Config(
        log_path=str(out),
        model_name=config.model_name,
        recipe_name="turngym_rlhf_rm",
        renderer_name=config.renderer_name,
        dataset_builder=ChatDatasetBuilderFromComparisons(
            common_config=ChatDatasetBuilderCommonConfig(
                model_name_for_tokenizer=config.model_name,
                renderer_name=config.renderer_name,
                max_length=1024,
                batch_size=config.rm_batch_size,
            ),
            comparison_builder=ComparisonBuilderFromJsonl(train_path=str(train_file)),
            swap=config.rm_both_orders,
        ),
        learning_rate=config.rm_learning_rate,
        num_epochs=config.rm_epochs,
        lora_rank=config.lora_rank,
        base_url=config.base_url,
        save_every=0,
        eval_every=0,
        max_steps=config.rm_max_steps,
    )
    asyncio.run(supervised_train.main(rm))
    last = checkpoint_utils.get_last_checkpoint(str(out))
    if last is None or not last.sampler_path:
        raise RuntimeError(f"the reward-model run saved no sampler checkpoint in {out}")
    path = _absolute(last.sampler_path, root)
    model = load_preference_model(path, renderer_name=config.renderer_name, service=service)
    after = asyncio.run(rm_accuracy(model, test_rows))
    greedy = load_preference_model(path, renderer_name=config.renderer_name, service=service, symmetric=False)
    after_greedy = asyncio.run(rm_accuracy(greedy, test_rows))
    metrics = _rows(out / "metrics.jsonl")
    losses = [r["train_mean_nll"] for r in metrics if "train_mean_nll" in r]
    result = {
        "sampler_path": path,
        "steps": len(losses),
        "train_nll_first": losses[0] if losses else None,
        "train_nll_last": losses[-1] if losses else None,
        "heldout_accuracy_before": before,
        "heldout_accuracy": after,
        "heldout_accuracy_greedy_before": before_greedy,
        "heldout_accuracy_greedy": after_greedy,
        "heldout_pairs": len(test_rows),
        "train_pairs": n_train,
        "seconds": time.monotonic() - t0,
    }
    record.write_text(json.dumps(result, indent=2))
    return result


# --------------------------------------------------------------------------------------------
# 3. RL against the reward model, then the held-out judgement
# --------------------------------------------------------------------------------------------
def _rl_step(config: RlhfConfig, sl_state: str, rm_path: str, tasks: Path, out: Path) -> dict[str, Any]:
    import training
    from envs.judge.config import JudgeConfig, JudgeData, JudgeEnvConfig, JudgeEnvKind, PairingScheme
    from envs.judge.train import JudgeTrainConfig

    record = out / "rl.json"
    if record.is_file():
        return json.loads(record.read_text())
    rl = JudgeTrainConfig(
        log_path=str(out),
        model_name=config.model_name,
        renderer_name=config.renderer_name,
        backend=config.backend,  # type: ignore[arg-type]
        base_url=config.base_url,
        lora_rank=config.lora_rank,
        seed=config.seed,
        load_checkpoint_path=sl_state,
        learning_rate=config.rl_learning_rate,
        advantage_normalize_std=config.rl_advantage_normalize_std,
        kl_penalty_coef=config.rl_kl_penalty_coef,
        max_steps=config.rl_steps,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        # enough passes over the train prompts (one is the loop's held-out prompt) for ``rl_steps``
        data=JudgeData(
            batch_size=config.rl_batch_size,
            group_size=config.rl_group_size,
            n_test=1,
            epochs=math.ceil(config.rl_steps * config.rl_batch_size / max(len(_rows(tasks)) - 1, 1)),
        ),
        eval_every=0,
        progress=False,
        # each pair once: the reward model's verdict is symmetric in the order already
        env=JudgeEnvConfig(
            kind=JudgeEnvKind.PAIRWISE, tasks_path=str(tasks), pattern=PairingScheme.ALL_PAIRS
        ),
        judge=JudgeConfig(
            completer=f"rm:{rm_path}" if config.rl_reward == "rm" else config.rl_reward,
            renderer_name=config.renderer_name,
            base_url=config.base_url,
            timeout_s=900.0,
            max_attempts=1,
            fallback_reward=0.5,
        ),
    )
    t0 = time.monotonic()
    summary = training.train(rl)
    checkpoints = _rows(out / "checkpoints.jsonl")
    sampler = next((r["sampler_path"] for r in reversed(checkpoints) if r.get("sampler_path")), None)
    if sampler is None:
        raise RuntimeError(f"the RL run saved no sampler checkpoint in {out}")
    metrics = _rows(out / "metrics.jsonl")
    rewards = [r["env/all/reward/total"] for r in metrics if "env/all/reward/total" in r]
    result = {
        "sampler_path": _absolute(sampler, out / "checkpoints"),
        "steps": summary.end_step,
        "reward_first": rewards[0] if rewards else None,
        "reward_last": rewards[-1] if rewards else None,
        # the cookbook's estimate of KL[policy || SL] at each step (rl_kl_penalty_coef > 0 only)
        "kl_policy_base": [r["kl_policy_base"] for r in metrics if "kl_policy_base" in r],
        "seconds": time.monotonic() - t0,
    }
    record.write_text(json.dumps(result, indent=2))
    return result


def _sampling_client(service: Any, path: str | None = None, *, base_model: str | None = None) -> Any:
    """The sampling client of a sampler ``path`` (or of ``base_model``), whether the service hands
    back the client itself or a future of it (the local service)."""
    made = (
        service.create_sampling_client(model_path=path)
        if base_model is None
        else service.create_sampling_client(base_model=base_model)
    )
    return made.result() if hasattr(made, "result") and not hasattr(type(made), "sample_async") else made


async def _answers(
    client: Any, tasks: Sequence[Any], config: RlhfConfig, renderer: Any, n: int
) -> list[list[str]]:
    import tinker
    from tinker_cookbook.renderers import get_text_content

    async def one(task: Any, slot: int) -> str:
        prompt = renderer.build_generation_prompt(list(task.messages))
        response = await client.sample_async(
            prompt=prompt,
            num_samples=1,
            sampling_params=tinker.SamplingParams(
                max_tokens=config.max_tokens,
                temperature=config.temperature,
                stop=renderer.get_stop_sequences(),
                seed=answer_seed(config.seed, task.id, 0, slot),
            ),
        )
        message, _ = renderer.parse_response(list(response.sequences[0].tokens))
        return get_text_content(message).strip()

    flat = await asyncio.gather(
        *(one(t, s) for t in tasks for s in range(n))
    )  # one batch: the sampler batches it
    return [list(flat[i * n : (i + 1) * n]) for i in range(len(tasks))]


def _standard_error(xs: Sequence[float]) -> float | None:
    """Standard error of the mean of ``xs`` (None for fewer than two)."""
    return statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) >= 2 else None


async def _judgement(
    config: RlhfConfig, service: Any, sl_path: str, rl_path: str, rm_path: str, tasks_file: Path
) -> dict[str, Any]:
    from tinker_cookbook.preference.types import Comparison

    from envs.judge import load_tasks
    from envs.judge.reward_model import SymmetricPreferenceModel, load_preference_model
    from envs.judge.rules import CHECKS, RuleJudge, complete, concise
    from renderers_ext import load_renderer

    renderer = load_renderer(config.renderer_name, config.model_name)
    tasks = load_tasks(tasks_file)
    n = config.eval_samples
    sl_answers = await _answers(_sampling_client(service, sl_path), tasks, config, renderer, n)
    rl_answers = await _answers(_sampling_client(service, rl_path), tasks, config, renderer, n)
    rm = load_preference_model(rm_path, renderer_name=config.renderer_name, service=service)
    rules = RuleJudge()
    held_out, comparisons, correct_sl, correct_rl = [], [], [], []
    per_prompt: list[float] = []  # each prompt's mean held-out win (the standard error's units)
    decided_by: dict[str, int] = {}
    for task, sl, rl in zip(tasks, sl_answers, rl_answers, strict=True):
        for a, b in zip(rl, sl, strict=True):
            choice, reasons = rules.verdict(a, b, task.reference)
            held_out.append({"A": 1.0, "B": 0.0}.get(choice, 0.5))
            # which check decided it, for whom (``concise/rl``: the RL answer won by being shorter)
            key = (
                "tie"
                if choice == "tie"
                else f"{reasons.splitlines()[-1].split(':')[0]}/{'rl' if choice == 'A' else 'sl'}"
            )
            decided_by[key] = decided_by.get(key, 0) + 1
            comparisons.append(
                Comparison(
                    prompt_conversation=list(task.messages),
                    completion_A=[{"role": "assistant", "content": a}],
                    completion_B=[{"role": "assistant", "content": b}],
                )
            )
            if task.reference:
                correct_rl.append(CHECKS["correct"](a, task.reference))
                correct_sl.append(CHECKS["correct"](b, task.reference))
        per_prompt.append(sum(held_out[-len(rl) :]) / len(rl))
    # the RL answer is A, then B (the swap); the cookbook's ComparisonEvaluator's win
    # (scores in [-1, 1], -1: A is better): a win in both orders is 1, a tie 1/2
    if isinstance(rm, SymmetricPreferenceModel):  # its swap negates the score: one call a pair
        firsts = await asyncio.gather(*(rm(comparison) for comparison in comparisons))
        scores = [x for first in firsts for x in (first, -first)]
    else:
        scores = await asyncio.gather(
            *(rm(c) for comparison in comparisons for c in (comparison, comparison.swap()))
        )
    by_rm = [(second - first + 2) / 4 for first, second in zip(scores[0::2], scores[1::2], strict=True)]
    # the reward model on the policies' own answers: does it pick the answer the held-out judge picks?
    decided = [(m, r) for m, r in zip(by_rm, held_out, strict=True) if r != 0.5 and m != 0.5]
    mean = lambda xs: sum(xs) / max(len(xs), 1)  # noqa: E731

    def each(check: Callable[[str, Sequence[str]], float], answers: Sequence[Sequence[str]]) -> float:
        """A rules check's mean over every answer of a policy (no reference needed)."""
        return mean([check(a, ()) for group in answers for a in group])

    return {
        "pairs": len(held_out),
        "heldout_win_rate": mean(held_out),
        "heldout_win_rate_se": _standard_error(per_prompt),
        "heldout_win_rate_by_prompt": {
            t.messages[-1]["content"]: x for t, x in zip(tasks, per_prompt, strict=True)
        },
        "rm_win_rate": mean(by_rm),
        "rm_agrees_with_rules": mean([float((m > 0.5) == (r > 0.5)) for m, r in decided]),
        "rm_agrees_with_rules_pairs": len(decided),
        "sl_correct": mean(correct_sl),
        "rl_correct": mean(correct_rl),
        "sl_words": -each(concise, sl_answers),
        "rl_words": -each(concise, rl_answers),
        "sl_complete": each(complete, sl_answers),
        "rl_complete": each(complete, rl_answers),
        "rules_decided_by": dict(sorted(decided_by.items())),
        "examples": [
            {"prompt": t.messages[-1]["content"], "sl": s[0], "rl": r[0]}
            for t, s, r in list(zip(tasks, sl_answers, rl_answers, strict=True))[:4]
        ],
    }


def run_pipeline(config: RlhfConfig) -> dict[str, Any]:
    """Run the three steps and the judgement (each skipped when its output exists); returns
    ``summary.json``'s contents."""
    import contextlib

    import tinker

    from backend.model import register_tokenizers
    from backend.offline import use_local_backend
    from envs.judge.comparisons import RM_COMPARISONS_FILE, split_comparisons
    from envs.judge.preference import _sl_step
    from renderers_ext import load_renderer

    out = Path(config.log_path).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    root = out / "checkpoints"
    t0 = time.monotonic()
    register_tokenizers()
    local = config.backend == "local"
    train_file, test_file, pair_stats = split_comparisons(
        config.dataset or RM_COMPARISONS_FILE,
        out / "pairs",
        n_test_prompts=config.n_test_prompts,
        seed=config.seed,
        max_pairs=config.dataset_max_pairs,
    )
    if config.rm_comparisons == "dataset":  # known now, before the SL step (else: in the RM step)
        _check_rm_batch(int(pair_stats["train/pairs"]), config.rm_batch_size)
    train_tasks = _tasks_file(_rows(train_file), out / "pairs" / "train_prompts.jsonl")
    test_tasks = _tasks_file(_rows(test_file), out / "pairs" / "test_prompts.jsonl")
    block = use_local_backend(root) if local else contextlib.nullcontext()
    with block:
        service = tinker.ServiceClient(base_url=config.base_url)
        renderer = load_renderer(config.renderer_name, config.model_name)
        print("[rlhf] 1/3 SL policy", flush=True)
        sl = asyncio.run(_sl_step(config, service, renderer, out / "sl"))
        sl_state, sl_sampler = _absolute(sl["state_path"], root), _absolute(sl["sampler_path"], root)
        print(
            f"[rlhf] SL: loss/token {sl['warm_start/loss_first']:.3f} -> {sl['warm_start/loss_last']:.3f}",
            flush=True,
        )
        policy_file = None
        if config.rm_comparisons != "dataset":
            policy_file, policy_stats = _policy_comparisons(
                config, service, sl_sampler, train_tasks, out / "pairs" / "policy_train.jsonl"
            )
            pair_stats.update(policy_stats)
        rm_train = _rm_train_file(config, train_file, policy_file, out / "pairs" / "rm_train.jsonl")
        print(
            f"[rlhf] 2/3 reward model on {len(_rows(rm_train))} comparisons (rm_comparisons={config.rm_comparisons}: "
            f"{pair_stats['train/pairs']:.0f} of the dataset's train prompts, "
            f"{pair_stats.get('policy/pairs', 0):.0f} ranked SL answers to them); held out: "
            f"{pair_stats['test/pairs']:.0f} of the dataset's comparisons",
            flush=True,
        )
        rm = _rm_step(config, rm_train, test_file, out / "rm", service, root)
        print(
            f"[rlhf] RM: {rm['steps']} steps, held-out pair accuracy "
            f"{rm['heldout_accuracy_before']:.3f} -> {rm['heldout_accuracy']:.3f} (both orders, log-odds; "
            f"the cookbook's greedy verdict: {rm.get('heldout_accuracy_greedy', float('nan')):.3f})",
            flush=True,
        )
    against = (
        "the reward model" if config.rl_reward == "rm" else f"{config.rl_reward} (the ceiling, not RLHF)"
    )
    print(f"[rlhf] 3/3 RL against {against} (pairwise env)", flush=True)
    rl = _rl_step(config, sl_state, rm["sampler_path"], train_tasks, out / "rl")
    print(f"[rlhf] RL: {rl['steps']} steps, group win rate is 1/2 by construction", flush=True)
    with use_local_backend(root) if local else contextlib.nullcontext():
        service = tinker.ServiceClient(base_url=config.base_url)
        judged = asyncio.run(
            _judgement(config, service, sl_sampler, rl["sampler_path"], rm["sampler_path"], test_tasks)
        )
    summary = {
        "pairs": pair_stats,
        "sl": sl,
        "rm": rm,
        "rl": rl,
        "judgement": judged,
        "rm_heldout_accuracy": rm["heldout_accuracy"],
        "rlhf_rm_win_gain": judged["rm_win_rate"] - 0.5,
        "rlhf_heldout_win_gain": judged["heldout_win_rate"] - 0.5,
        "rlhf_heldout_win_gain_se": judged["heldout_win_rate_se"],
        "seconds": time.monotonic() - t0,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _report(summary: dict[str, Any]) -> list[str]:
    """The lines ``python -m envs.judge.rlhf`` prints after its run."""
    judged = summary["judgement"]
    se = judged.get("heldout_win_rate_se")
    spread = "" if se is None else f" +- {se:.3f}, standard error over the prompts"
    return [
        f"held-out: {judged['pairs']} RL-vs-SL pairs; win rate {judged['rm_win_rate']:.3f} (reward model), "
        f"{judged['heldout_win_rate']:.3f} (rules judge{spread}); correct {judged['sl_correct']:.3f} -> {judged['rl_correct']:.3f}; "
        f"the reward model agrees with the rules judge on {judged['rm_agrees_with_rules']:.3f} of "
        f"{judged['rm_agrees_with_rules_pairs']} pairs both decide",
        f"rm_heldout_accuracy={summary['rm_heldout_accuracy']:.3f} rlhf_rm_win_gain={summary['rlhf_rm_win_gain']:.3f} "
        f"rlhf_heldout_win_gain={summary['rlhf_heldout_win_gain']:.3f}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m envs.judge.rlhf [key=value ...]``; returns the exit status."""
    from training import run_pipeline_cli

    return run_pipeline_cli("envs.judge.rlhf", RlhfConfig, run_pipeline, _report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
