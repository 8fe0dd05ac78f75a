"""Labelled comparisons in the cookbook's format: the shipped file, the docs' named datasets, splits.

A comparison is one JSON line ``{"comparison": {"prompt_conversation", "completion_A",
"completion_B"}, "label": "A" | "B" | "Tie"}``, what the cookbook's ``ComparisonBuilderFromJsonl``
reads (DPO's ``DPODatasetBuilderFromComparisons``, the reward model's
``ChatDatasetBuilderFromComparisons``).

:func:`split_comparisons` takes a source, ``dataset=``:

- a JSONL path in that format (default: the shipped :data:`COMPARISONS_FILE`: for each of the 48
  preference prompts, its reference answer as a short sentence against an evasive reply, and
  against another prompt's answer when the prompt has a reference: 92 comparisons, offline;
  also shipped, :data:`RM_COMPARISONS_FILE`, those with their :func:`sentence_comparisons`, 268,
  which ``envs.judge.rlhf`` reads when its ``dataset`` is unset);
- a name of the tinker docs (``hhh``, ``helpsteer3``, ``ultrafeedback``): the cookbook's builder
  of that dataset (``tinker_cookbook.recipes.preference.datasets``), which downloads it from the
  Hugging Face hub; with no network that is one clear error line.

It writes ``train.jsonl`` and ``test.jsonl`` with every comparison of a held-out prompt in the
test split, so the held-out figures are on prompts never trained on.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envs.judge.rules import RuleJudge

__all__ = [
    "COMPARISONS_FILE",
    "NAMED_DATASETS",
    "RM_COMPARISONS_FILE",
    "label_answers",
    "load_comparisons",
    "sentence_comparisons",
    "split_comparisons",
]

COMPARISONS_FILE = Path(__file__).parent / "data" / "comparisons.jsonl"
"""The shipped comparisons (cookbook format)."""
RM_COMPARISONS_FILE = Path(__file__).parent / "data" / "rm_comparisons.jsonl"
"""The shipped comparisons and their :func:`sentence_comparisons` (268): the RLHF reward model's default."""
_SENTENCES = ("The answer is {}.", "It is {}.", "I would say {}.", "My answer: {}.")
_LONG = "{}, and there is a lot more that one could say about this question if there were time."
_CUT = "The answer is {} because"
NAMED_DATASETS = {
    "hhh": "HHHComparisonBuilder",
    "helpsteer3": "HelpSteer3ComparisonBuilder",
    "ultrafeedback": "UltraFeedbackComparisonBuilder",
}
"""The docs' dataset names and their cookbook builders (``tinker_cookbook.recipes.preference.datasets``)."""


def load_comparisons(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a comparisons JSONL file, checked (one clear error line on a bad row)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"comparisons file not found: {path}")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            comparison = row["comparison"]
            ok = row["label"] in ("A", "B", "Tie") and all(
                isinstance(comparison[k], list)
                for k in ("prompt_conversation", "completion_A", "completion_B")
            )
        except (json.JSONDecodeError, KeyError, TypeError):
            ok = False
        if not ok:
            raise ValueError(
                f"{path}:{number}: expected {{'comparison': {{'prompt_conversation', 'completion_A', "
                "'completion_B'}, 'label': 'A'|'B'|'Tie'}"
            )
        rows.append(row)
    if not rows:
        raise ValueError(f"{path} holds no comparisons")
    return rows


def _named_rows(name: str, max_pairs: int | None) -> list[dict[str, Any]]:
    from dataclasses import asdict

    from tinker_cookbook.recipes.preference import datasets as cookbook_datasets

    builder = getattr(cookbook_datasets, NAMED_DATASETS[name])()
    try:
        train, test = builder.get_train_and_test_datasets()
    except Exception as exc:  # datasets raises many types for "no network / not cached"
        raise RuntimeError(
            f"dataset={name} needs the Hugging Face hub (the cookbook's {NAMED_DATASETS[name]} downloads it) "
            f"and it is not reachable or cached ({type(exc).__name__}); pass dataset=<comparisons.jsonl> offline"
        ) from None
    rows = []
    for split in (train, test):
        for example in split or []:
            labeled = builder.example_to_labeled_comparison(example)
            if labeled is not None:
                rows.append({"comparison": asdict(labeled.comparison), "label": labeled.label})
            if max_pairs is not None and len(rows) >= max_pairs:
                return rows
    return rows


def sentence_comparisons(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` in the shipped file's shape, each prompt followed by four comparisons in sentence form.

    The shipped file gives a prompt two comparisons: its short right answer against an evasive
    reply, and against a wrong one (another prompt's answer). A reward model trained on those
    alone learns length: it scores a policy's one-sentence answers near chance on correctness
    (``envs/judge/NOTES.md``). For a prompt with both, this adds, with the same words: the right
    answer in a sentence against the wrong one in the same sentence; the right sentence against
    the bare wrong word (correct beats short); the bare right word against it with a long tail
    (both right: the shorter wins); the right sentence against it cut off (both right: the
    finished one wins). Each label follows the rules judge's checks in their order (correct, then
    complete, then concise), so it is the verdict ``rules`` gives. The sentence form and which
    side is ``A`` vary by prompt."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(_prompt_key(row), []).append(row)
    out: list[dict[str, Any]] = []
    for i, group in enumerate(groups.values()):
        out += group
        decided = [r for r in group if r["label"] in ("A", "B")]
        if len(decided) < 2:
            continue
        first, second = decided[:2]
        right = _side(first, first["label"]).rstrip(".")
        wrong = _side(second, "B" if second["label"] == "A" else "A").rstrip(".")
        sentence = _SENTENCES[i % len(_SENTENCES)]
        pairs = [
            (sentence.format(right), sentence.format(wrong)),
            (sentence.format(right), f"{wrong}."),
            (f"{right}.", _LONG.format(right)),
            (sentence.format(right), _CUT.format(right)),
        ]
        prompt = group[0]["comparison"]["prompt_conversation"]
        for k, (good, bad) in enumerate(pairs):
            a, b, label = (good, bad, "A") if (k + i) % 2 else (bad, good, "B")
            out.append(
                {
                    "comparison": {
                        "prompt_conversation": prompt,
                        "completion_A": [{"role": "assistant", "content": a}],
                        "completion_B": [{"role": "assistant", "content": b}],
                    },
                    "label": label,
                }
            )
    return out


def _side(row: dict[str, Any], side: str) -> str:
    return "".join(m["content"] for m in row["comparison"][f"completion_{side}"])


def _prompt_key(row: dict[str, Any]) -> str:
    return json.dumps(row["comparison"]["prompt_conversation"], sort_keys=True)


def split_comparisons(
    source: str | Path,
    out: Path,
    *,
    n_test_prompts: int,
    seed: int,
    max_pairs: int | None = None,
) -> tuple[Path, Path, dict[str, float]]:
    """Write ``out/train.jsonl`` and ``out/test.jsonl`` from ``source`` (a path or a name of
    :data:`NAMED_DATASETS`), the comparisons of ``n_test_prompts`` prompts (drawn with ``seed``)
    held out; returns both paths and counts. Skipped when both files exist."""
    train_file, test_file = out / "train.jsonl", out / "test.jsonl"
    if not (train_file.is_file() and test_file.is_file()):
        source = str(source) or str(COMPARISONS_FILE)
        if source in NAMED_DATASETS:
            rows = _named_rows(source, max_pairs)
        else:
            rows = load_comparisons(source)[:max_pairs]
        prompts = sorted({_prompt_key(r) for r in rows})
        random.Random(seed).shuffle(prompts)
        if not 0 < n_test_prompts < len(prompts):
            raise ValueError(f"n_test_prompts must be in [1, {len(prompts) - 1}] for {len(prompts)} prompts")
        held_out = set(prompts[:n_test_prompts])
        out.mkdir(parents=True, exist_ok=True)
        train_file.write_text("".join(json.dumps(r) + "\n" for r in rows if _prompt_key(r) not in held_out))
        test_file.write_text("".join(json.dumps(r) + "\n" for r in rows if _prompt_key(r) in held_out))
    n_train = sum(1 for line in train_file.read_text().splitlines() if line.strip())
    n_test = sum(1 for line in test_file.read_text().splitlines() if line.strip())
    return train_file, test_file, {"train/pairs": float(n_train), "test/pairs": float(n_test)}


def label_answers(
    prompt: str,
    answers: Sequence[str],
    reference: Sequence[str],
    judge: RuleJudge,
    *,
    min_word_gap: int = 0,
) -> list[dict[str, Any]]:
    """Labelled comparisons (cookbook format) of every pair of ``answers`` to one prompt, each
    pair once, as ``judge`` (a :class:`~envs.judge.rules.RuleJudge` with the prompt's accepted
    ``reference`` answers) decides it; ties and identical answers are left out (a tie teaches a
    reward model nothing about which answer is better).

    The way InstructGPT labelled its reward model's data (people ranking the SL policy's own
    samples), with ``judge`` standing in for the people: the comparisons look like the answers the
    reward model will score in RL, unlike hand-written ones.

    ``min_word_gap`` keeps only the clear pairs among those the ``concise`` check decides (the
    answers' word counts differ by at least that much): two sentences a word apart are a
    distinction a small reward model does not learn from a few examples; pairs decided by
    another check (a correct answer against a wrong one, a finished against a cut one) are kept."""
    from envs.judge.rules import concise

    rows = []
    for i, a in enumerate(answers):
        for b in answers[i + 1 :]:
            if a == b:
                continue
            choice, reasons = judge.verdict(a, b, reference)
            if choice == "tie":
                continue
            if reasons.splitlines()[-1].startswith("concise:") and (
                abs(concise(a, reference) - concise(b, reference)) < min_word_gap
            ):
                continue
            comparison = {
                "prompt_conversation": [{"role": "user", "content": prompt}],
                "completion_A": [{"role": "assistant", "content": a}],
                "completion_B": [{"role": "assistant", "content": b}],
            }
            rows.append({"comparison": comparison, "label": choice})
    return rows
