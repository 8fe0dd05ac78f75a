"""``python -m envs.judge.rlhf``: SL policy -> reward model (the cookbook's SL on comparisons) ->
RL against it through the pairwise env (``rm:`` judge) -> held-out judgement (TINY, tiny sizes)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from envs.judge.reward_model import PreferenceModelJudge, comparison_from_prompt
from envs.judge.rlhf import _standard_error, main

TINY = "turngym/tiny-random-llama"


def test_comparison_prompt_round_trips_without_its_reference() -> None:
    from envs.judge.pairwise import comparison_prompt

    prompt = comparison_prompt(
        [{"role": "user", "content": "Capital of France?"}],
        [{"role": "assistant", "content": "Paris."}],
        [{"role": "assistant", "content": "Lyon, I think."}],
        reference=["Paris"],
    )
    comparison = comparison_from_prompt(prompt)  # type: ignore[arg-type]
    assert comparison.prompt_conversation == [{"role": "user", "content": "Capital of France?"}]
    assert comparison.completion_A == [{"role": "assistant", "content": "Paris."}]
    assert comparison.completion_B == [{"role": "assistant", "content": "Lyon, I think."}]

    class Prefers:  # a stand-in preference model: -1 (A), 1 (B), 0 (tie)
        def __init__(self, score: float) -> None:
            self.score = score

        async def __call__(self, comparison: object) -> float:
            return self.score

    for score, verdict in ((-1.0, "A"), (1.0, "B"), (0.0, "tie")):
        reply = anyio.run(PreferenceModelJudge(Prefers(score)), prompt)  # type: ignore[arg-type]
        assert reply["content"] == f"Preferred: {verdict}"
    with pytest.raises(ValueError, match="no response blocks"):
        comparison_from_prompt([{"role": "user", "content": "Grade this."}])


class _PositionBiasedModel:
    """A stand-in reward model's sampling client: its greedy label and that label's probability,
    for a model that prefers the answer "Paris." by 1 nat and the position A by 3 nats (a small
    reward model's habit)."""

    def __init__(self, tokenizer: object) -> None:
        self.tokenizer = tokenizer

    async def sample_async(self, prompt: object, num_samples: int, sampling_params: object) -> object:
        text = self.tokenizer.decode(prompt.to_ints())  # type: ignore[attr-defined]
        paris_first = text.index("Paris.") < text.index("Lyon.")
        logits = {"A": 3.0 + float(paris_first), "B": float(not paris_first)}
        norm = math.log(sum(math.exp(v) for v in logits.values()))
        label = max(logits, key=logits.__getitem__)
        token = self.tokenizer.encode(label, add_special_tokens=False)[0]  # type: ignore[attr-defined]
        sequence = SimpleNamespace(tokens=[token], logprobs=[logits[label] - norm])
        return SimpleNamespace(sequences=[sequence])


def test_symmetric_reward_model_cancels_a_position_bias() -> None:
    from tinker_cookbook.preference.types import Comparison

    from envs.judge.pairwise import comparison_prompt, parse_preference
    from envs.judge.reward_model import SymmetricPreferenceModel
    from renderers_ext import load_renderer

    renderer = load_renderer("qwen3_instruct", TINY)
    model = SymmetricPreferenceModel(renderer, _PositionBiasedModel(renderer.tokenizer))
    paris, lyon = [{"role": "assistant", "content": "Paris."}], [{"role": "assistant", "content": "Lyon."}]
    question = [{"role": "user", "content": "Capital of France?"}]
    comparison = Comparison(prompt_conversation=question, completion_A=lyon, completion_B=paris)  # type: ignore[arg-type]
    # greedy, this model says A in both orders (a tie over the two); symmetric, Paris wins by 1 nat
    assert anyio.run(model.log_odds_b, comparison) == pytest.approx(1.0)
    assert anyio.run(model.log_odds_b, comparison.swap()) == pytest.approx(-1.0)
    assert anyio.run(model, comparison) == pytest.approx(2 / (1 + math.exp(-1.0)) - 1)
    reply = anyio.run(PreferenceModelJudge(model), comparison_prompt(question, lyon, paris))  # type: ignore[arg-type]
    assert parse_preference(str(reply["content"])) == pytest.approx(1 / (1 + math.exp(-1.0)), abs=1e-6)


def test_three_steps_one_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        f"log_path={tmp_path}",
        f"model_name={TINY}",
        "lora_rank=2",
        "sft_steps=1",
        "dataset_max_pairs=24",
        "n_test_prompts=2",
        "rm_epochs=2",
        "rm_max_steps=2",
        "rm_both_orders=true",
        "rm_comparisons=both",  # the dataset's comparisons and the SL policy's ranked answers
        "rl_steps=2",
        "rl_batch_size=16",  # more than the train prompts: step 2 needs a second pass over them
        "rl_group_size=2",
        "max_tokens=4",
        "eval_samples=1",
    ]
    assert main(args) == 0
    last = capsys.readouterr().out.strip().splitlines()[-2]
    assert last.startswith("rm_heldout_accuracy=") and "rlhf_heldout_win_gain=" in last
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["rm"]["steps"] == 2 and 0.0 <= summary["rm_heldout_accuracy"] <= 1.0
    assert 0.0 <= summary["rm"]["heldout_accuracy_greedy"] <= 1.0
    rm_config = json.loads((tmp_path / "rm" / "config.json").read_text())
    assert rm_config["dataset_builder"]["swap"] is True  # rm_both_orders: the cookbook's swap
    assert summary["rm"]["sampler_path"].startswith("local:///")
    assert summary["rl"]["steps"] == 2 and summary["rl"]["sampler_path"].startswith("local:///")
    assert summary["judgement"]["pairs"] == 2  # 2 held-out prompts x 1 answer
    assert sum(summary["judgement"]["rules_decided_by"].values()) == 2  # each pair decided once
    assert summary["judgement"]["rm_agrees_with_rules_pairs"] <= 2
    # the gain's standard error: over the held-out prompts' mean wins (two here, one answer each)
    by_prompt = list(summary["judgement"]["heldout_win_rate_by_prompt"].values())
    assert len(by_prompt) == 2 and sum(by_prompt) / 2 == pytest.approx(
        summary["judgement"]["heldout_win_rate"]
    )
    assert summary["rlhf_heldout_win_gain_se"] == pytest.approx(abs(by_prompt[0] - by_prompt[1]) / 2)
    assert 0.0 <= summary["judgement"]["rm_agrees_with_rules"] <= 1.0
    rl_rows = [
        json.loads(x) for x in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines() if x.strip()
    ]
    # per group, its pair once: the reward model scores both orders itself
    assert rl_rows[0]["env/all/judge/calls"] == 1
    assert rl_rows[0]["env/all/judge/errors"] == 0
    held_out = {
        json.loads(x)["prompt"] for x in (tmp_path / "pairs" / "test_prompts.jsonl").read_text().splitlines()
    }
    trained = {
        json.loads(x)["prompt"] for x in (tmp_path / "pairs" / "train_prompts.jsonl").read_text().splitlines()
    }
    assert held_out and not held_out & trained
    # the reward model's on-policy comparisons: the SL policy's answers to train prompts only,
    # every label the rules' verdict against that prompt's reference answers
    from envs.judge.rules import RuleJudge

    references = {
        json.loads(x)["prompt"]: json.loads(x).get("reference", [])
        for x in (tmp_path / "pairs" / "train_prompts.jsonl").read_text().splitlines()
    }
    policy = [json.loads(x) for x in (tmp_path / "pairs" / "policy_train.jsonl").read_text().splitlines()]
    assert policy and summary["pairs"]["policy/pairs"] == len(policy)
    for row in policy:
        prompt = row["comparison"]["prompt_conversation"][0]["content"]
        assert prompt in trained and prompt not in held_out
        a, b = (row["comparison"][k][0]["content"] for k in ("completion_A", "completion_B"))
        assert RuleJudge().verdict(a, b, references[prompt])[0] == row["label"]
    # rm_comparisons=both: the dataset's train comparisons, then the policy's
    assert summary["rm"]["train_pairs"] == summary["pairs"]["train/pairs"] + len(policy)
    assert main(args) == 0  # a rerun resumes: every stage is read back


def test_label_answers_ranks_every_decided_pair_by_the_rules() -> None:
    from envs.judge.comparisons import label_answers
    from envs.judge.rules import RuleJudge

    answers = ["Paris.", "Lyon.", "It is Paris, the capital.", "Paris.", "Lyon is"]
    rows = label_answers("Capital of France?", answers, ["Paris"], RuleJudge())
    labelled = {
        (r["comparison"]["completion_A"][0]["content"], r["comparison"]["completion_B"][0]["content"]): r[
            "label"
        ]
        for r in rows
    }
    assert labelled[("Paris.", "Lyon.")] == "A"  # correct beats wrong
    assert labelled[("Lyon.", "It is Paris, the capital.")] == "B"  # correct beats shorter
    assert labelled[("Paris.", "It is Paris, the capital.")] == "A"  # both correct: the shorter
    assert labelled[("Lyon.", "Lyon is")] == "A"  # both wrong: the finished one
    assert ("Paris.", "Paris.") not in labelled  # identical answers teach nothing
    # every pair once (10 pairs of 5 answers), less the identical one
    assert len(rows) == 9
    assert all(
        r["comparison"]["prompt_conversation"] == [{"role": "user", "content": "Capital of France?"}]
        for r in rows
    )
    # a tie under every check is left out
    assert label_answers("Tip?", ["Sleep more.", "Eat well."], [], RuleJudge()) == []


def test_label_answers_keeps_only_clear_length_pairs() -> None:
    from envs.judge.comparisons import label_answers
    from envs.judge.rules import RuleJudge

    answers = ["Paris.", "It is Paris.", "The capital of France is Paris.", "Lyon.", "Lyon is"]
    rows = label_answers("Capital of France?", answers, ["Paris"], RuleJudge(), min_word_gap=3)
    pairs = {
        frozenset(r["comparison"][k][0]["content"] for k in ("completion_A", "completion_B")) for r in rows
    }
    assert frozenset({"Paris.", "It is Paris."}) not in pairs  # length decides, 2 words apart
    assert frozenset({"It is Paris.", "The capital of France is Paris."}) in pairs  # 3 words apart
    assert frozenset({"Paris.", "The capital of France is Paris."}) in pairs  # 5 words apart
    assert frozenset({"Paris.", "Lyon."}) in pairs  # correctness decides: always kept
    assert frozenset({"Lyon.", "Lyon is"}) in pairs  # a finished answer against a cut one: kept
    everything = label_answers("Capital of France?", answers, ["Paris"], RuleJudge())
    assert len(everything) == len(rows) + 1  # only the 2-word gap left out at 3


def test_rm_comparisons_are_the_shipped_ones_with_sentence_pairs_the_rules_agree_with() -> None:
    from envs.judge.comparisons import (
        COMPARISONS_FILE,
        RM_COMPARISONS_FILE,
        load_comparisons,
        sentence_comparisons,
    )
    from envs.judge.preference import PROMPTS_FILE
    from envs.judge.rules import RuleJudge

    shipped = load_comparisons(COMPARISONS_FILE)
    wide = load_comparisons(RM_COMPARISONS_FILE)
    assert wide == sentence_comparisons(shipped)  # the shipped file is regenerated, not hand-edited
    assert [r for r in wide if r in shipped] == shipped  # every shipped comparison kept, in order
    prompts = {r["comparison"]["prompt_conversation"][0]["content"] for r in shipped}
    two = sum(
        sum(r["comparison"]["prompt_conversation"][0]["content"] == p for r in shipped) == 2 for p in prompts
    )
    assert len(wide) == len(shipped) + 4 * two
    references = {
        row["prompt"]: row.get("reference", [])
        for row in map(json.loads, PROMPTS_FILE.read_text().splitlines())
    }
    judge, added = RuleJudge(), [r for r in wide if r not in shipped]
    for row in added:  # the label is the held-out judge's verdict on every added pair
        c = row["comparison"]
        a, b = c["completion_A"][0]["content"], c["completion_B"][0]["content"]
        assert judge.verdict(a, b, references[c["prompt_conversation"][0]["content"]])[0] == row["label"]
    assert {r["label"] for r in added} == {"A", "B"}  # the better answer is not always in one place
    giraffe = [r for r in added if "tallest animal" in r["comparison"]["prompt_conversation"][0]["content"]]
    texts = [r["comparison"][k][0]["content"] for r in giraffe for k in ("completion_A", "completion_B")]
    assert "The answer is Giraffe." in texts and "The answer is Water." in texts


def test_bad_rm_comparisons_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rm_comparisons=humans"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "rm_comparisons must be 'policy', 'dataset' or 'both'" in err


def test_rl_against_the_rules_ceiling(tmp_path: Path) -> None:
    """``rl_reward=rules``: RL optimises the held-out judge's checks on the train prompts (the
    ceiling of the RL budget), GRPO's std-normalised advantages and the KL penalty to the SL policy
    on; the reward model is still trained and measured, and the judgement runs as for RLHF."""
    args = [
        f"log_path={tmp_path}",
        f"model_name={TINY}",
        "lora_rank=2",
        "sft_steps=1",
        "dataset_max_pairs=48",  # 8 prompts x 6 comparisons: 6 train prompts, 36 pairs
        "n_test_prompts=2",
        "rm_max_steps=1",
        "rl_steps=1",
        "rl_group_size=2",
        "rl_reward=rules",
        "rl_advantage_normalize_std=true",
        "rl_kl_penalty_coef=0.1",
        "max_tokens=4",
        "eval_samples=1",
    ]
    assert main(args) == 0
    rl_config = json.loads((tmp_path / "rl" / "config.json").read_text())
    assert "completer='rules'" in rl_config["judge"]  # the config is written as its repr
    assert rl_config["advantage_normalize_std"] is True
    assert rl_config["kl_penalty_coef"] == 0.1  # the KL penalty to the SL policy, saved when RL starts
    assert (tmp_path / "rl" / "kl_reference.json").is_file()
    rl_rows = [
        json.loads(x) for x in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines() if x.strip()
    ]
    assert rl_rows[0]["env/all/judge/errors"] == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["rm"]["steps"] == 1 and summary["judgement"]["pairs"] == 2
    trained = [r for r in rl_rows if r["datums"] > 0]
    assert summary["rl"]["kl_policy_base"] == [r["kl_policy_base"] for r in trained]


def test_fewer_rm_pairs_than_a_batch_is_one_line_before_the_sl_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [f"log_path={tmp_path}", f"model_name={TINY}", "dataset_max_pairs=24", "n_test_prompts=2"]
    assert main(args) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "12 train comparisons, fewer than rm_batch_size=16" in err
    assert not (tmp_path / "sl").exists()  # nothing trained first


def test_bad_rl_reward_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rl_reward=local:judge"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "rl_reward must be 'rm' or a rules spec" in err


def test_negative_rl_kl_penalty_coef_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rl_kl_penalty_coef=-0.1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "rl_kl_penalty_coef must be >= 0" in err


def test_standard_error_of_the_gain() -> None:
    assert _standard_error([0.5]) is None  # one prompt: no spread to measure
    assert _standard_error([0.25, 0.75, 0.5, 0.5]) == pytest.approx(math.sqrt(0.125 / 3 / 4))
