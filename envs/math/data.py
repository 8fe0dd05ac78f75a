"""Math problems: a seeded procedural generator (the offline default) and GSM8K / MATH loaders.

- :func:`generate_problems`: arithmetic and multi-step word problems at difficulty levels 1-5,
  a pure function of ``(seed, split, index)``; train and test splits never share a question.
- :func:`load_jsonl`, :func:`load_gsm8k`, :func:`load_math`: local ``.jsonl`` / ``.parquet``
  files (a malformed line is reported with its number), or the Hugging Face hub when no path
  is given and the hub is reachable (never in tests: ``HF_HUB_OFFLINE=1`` makes it a clear error).
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from envs.data_files import DatasetFormatError, read_records
from envs.math._grading_core import last_boxed
from envs.math._keys import SOURCES

__all__ = [
    "SOURCES",
    "DatasetFormatError",
    "MathProblem",
    "Split",
    "check_source",
    "generate_problems",
    "gsm8k_reference_answer",
    "load_gsm8k",
    "load_jsonl",
    "load_math",
    "load_split",
]


class Split(StrEnum):
    """A dataset split."""

    TRAIN = "train"
    """Problems to train on."""
    TEST = "test"
    """Held-out problems for evaluation."""


@dataclass(frozen=True)
class MathProblem:
    """One problem with its reference answer."""

    question: str
    """The problem statement (without answer-format instructions)."""
    answer: str
    """The reference final answer (a number or LaTeX expression)."""
    source: str = "generated"
    """Where it comes from (``generated``, ``gsm8k``, ``math``, a file name)."""
    level: int = 0
    """Difficulty level (generator and MATH: 1-5; 0: unknown)."""
    uid: str = ""
    """A stable identifier."""


# --- procedural generator --------------------------------------------------------------------

_NAMES = ("Ava", "Ben", "Chloe", "Dev", "Emma", "Farid", "Grace", "Hugo", "Iris", "Jonas", "Kira", "Liam")
_ITEMS = (
    ("apple", "apples"),
    ("pencil", "pencils"),
    ("book", "books"),
    ("marble", "marbles"),
    ("sticker", "stickers"),
    ("cookie", "cookies"),
)


def _level1(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(1, 20), rng.randint(1, 20)
    if rng.random() < 0.5:
        return f"What is {a} + {b}?", a + b
    a, b = max(a, b), min(a, b)
    return f"What is {a} - {b}?", a - b


def _level2(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    op = rng.choice("+-*")
    value = {"+": a + b, "-": a - b, "*": a * b}[op]
    return f"What is {a} {op} {b}?", value


def _level3(rng: random.Random) -> tuple[str, int]:
    kind = rng.randrange(3)
    if kind == 0:
        a, b, c = rng.randint(2, 30), rng.randint(2, 30), rng.randint(2, 12)
        return f"Compute ({a} + {b}) * {c}.", (a + b) * c
    if kind == 1:
        q, d = rng.randint(2, 40), rng.randint(2, 12)
        e = rng.randint(1, 50)
        return f"Compute {q * d} / {d} - {e}.", q - e
    name = rng.choice(_NAMES)
    _one, many = rng.choice(_ITEMS)
    a = rng.randint(5, 60)
    b = rng.randint(2, min(20, a))
    return f"{name} has {a} {many} and gives away {b} of them. How many {many} does {name} have left?", a - b


def _level4(rng: random.Random) -> tuple[str, int]:
    kind = rng.randrange(3)
    name = rng.choice(_NAMES)
    one, many = rng.choice(_ITEMS)
    if kind == 0:
        packs, per = rng.randint(2, 9), rng.randint(3, 12)
        eaten = rng.randint(1, min(10, packs * per))
        return (
            f"{name} buys {packs} packs of {many} with {per} {many} in each pack, "
            f"then uses {eaten} {many}. How many {many} are left?",
            packs * per - eaten,
        )
    if kind == 1:
        price, count, paid = rng.randint(2, 15), rng.randint(2, 8), 0
        paid = (price * count // 10 + 1 + rng.randint(0, 3)) * 10
        return (
            f"Each {one} costs {price} dollars. {name} buys {count} of them and pays with {paid} dollars. "
            "How much change does " + name + " get, in dollars?",
            paid - price * count,
        )
    speed, hours, extra = rng.randint(20, 80), rng.randint(2, 6), rng.randint(5, 50)
    return (
        f"A train travels at {speed} km per hour for {hours} hours, then another {extra} km. "
        "How many km does it travel in total?",
        speed * hours + extra,
    )


def _level5(rng: random.Random) -> tuple[str, int]:
    kind = rng.randrange(3)
    name, other = rng.sample(_NAMES, 2)
    _one, many = rng.choice(_ITEMS)
    if kind == 0:
        base = rng.randint(2, 20) * 20
        pct = rng.choice((10, 15, 20, 25, 30, 40, 50, 75))
        sold = rng.randint(1, 9)
        left = base - base * pct // 100
        return (
            f"A shop has {base} {many}. It sells {pct}% of them in the morning and {sold} more in the "
            f"afternoon. How many {many} are left?",
            left - sold,
        )
    if kind == 1:
        age, diff, years = rng.randint(5, 20), rng.randint(2, 30), rng.randint(2, 15)
        return (
            f"{name} is {age} years old and {other} is {diff} years older. "
            f"What will be the sum of their ages in {years} years?",
            (age + years) + (age + diff + years),
        )
    per_day, days, times = rng.randint(2, 9), rng.randint(3, 14), rng.randint(2, 5)
    total = per_day * days * (1 + times)
    friends = rng.choice([k for k in range(2, 13) if total % k == 0])
    return (
        f"{name} collects {per_day} {many} a day for {days} days. {other} collects {times} times as many "
        f"in the same time. They put them together and share them equally among {friends} friends. "
        f"How many {many} does each friend get?",
        total // friends,
    )


_LEVELS: dict[int, Callable[[random.Random], tuple[str, int]]] = {
    1: _level1,
    2: _level2,
    3: _level3,
    4: _level4,
    5: _level5,
}


def _generated(seed: int, split: Split, index: int, levels: tuple[int, ...]) -> MathProblem:
    rng = random.Random(f"turngym-math:{seed}:{split}:{index}")
    level = levels[index % len(levels)]
    question, value = _LEVELS[level](rng)
    return MathProblem(question, str(value), "generated", level, f"gen-{seed}-{split}-{index}")


def generate_problems(
    n: int,
    *,
    seed: int = 0,
    split: Split | str = Split.TRAIN,
    levels: Iterable[int] = (1, 2, 3, 4, 5),
    n_test: int = 200,
    strict: bool = True,
) -> list[MathProblem]:
    """``n`` generated problems, deterministic in ``(seed, split, levels)``.

    Levels: 1 addition or subtraction within 20; 2 one operation on two-digit numbers; 3 two
    operations or a one-step word problem; 4 multi-step word problems; 5 percentages, ages and
    sharing. Levels cycle through ``levels`` in order, skipping repeated questions (level 1 has
    only a few hundred). The train split skips any question that appears in the first ``n_test``
    test problems, so the splits are disjoint.

    Raises:
        ValueError: bad levels, or (when ``strict``) fewer than ``n`` distinct questions exist
            at these levels; with ``strict=False`` the distinct ones found are returned.
    """
    split = Split(split)
    levels = tuple(levels)
    bad = [x for x in levels if x not in _LEVELS]
    if not levels or bad:
        raise ValueError(f"levels must be a non-empty subset of {sorted(_LEVELS)}, got {list(levels)}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    exclude: set[str] = set()
    if split is Split.TRAIN:
        exclude = {p.question for p in generate_problems(n_test, seed=seed, split=Split.TEST, levels=levels)}
    out: list[MathProblem] = []
    seen: set[str] = set()
    index = 0
    while len(out) < n:
        if index > 50 * n + 1000:
            if not strict:
                break
            raise ValueError(f"cannot generate {n} distinct problems at levels {list(levels)}")
        problem = _generated(seed, split, index, levels)
        index += 1
        if problem.question in exclude or problem.question in seen:
            continue
        seen.add(problem.question)
        out.append(problem)
    return out


# --- files -----------------------------------------------------------------------------------

_GSM8K_ANSWER = re.compile(r"####\s*(.+?)\s*$", re.MULTILINE)


def gsm8k_reference_answer(solution: str) -> str:
    """The final answer of a GSM8K solution (after the last ``####``), commas removed."""
    found = _GSM8K_ANSWER.findall(solution)
    if not found:
        raise ValueError("no '#### <answer>' line in the GSM8K solution")
    return found[-1].replace(",", "").strip()


def load_jsonl(
    path: str | os.PathLike[str],
    *,
    question_key: str = "question",
    answer_key: str = "answer",
    answer_from: Callable[[str], str] | None = None,
    source: str | None = None,
    limit: int | None = None,
) -> list[MathProblem]:
    """Problems from a ``.jsonl`` (one object per line) or ``.parquet`` file.

    ``answer_from`` turns the answer field into the final answer (e.g. GSM8K's ``#### 42``).

    Raises:
        DatasetFormatError: naming the file and line of a malformed row (bad JSON, missing or
            non-string field, no extractable answer).
        FileNotFoundError: the file does not exist.
    """
    p = Path(path)
    src = source or p.stem
    out: list[MathProblem] = []
    for lineno, row in read_records(p):
        if limit is not None and len(out) >= limit:
            break
        fields = []
        for key in (question_key, answer_key):
            value = row.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                value = str(value)
            if not isinstance(value, str) or not value.strip():
                raise DatasetFormatError(f"{p}:{lineno}: missing or empty string field {key!r}")
            fields.append(value)
        question, answer = fields
        if answer_from is not None:
            try:
                answer = answer_from(answer)
            except ValueError as e:
                raise DatasetFormatError(f"{p}:{lineno}: {e}") from None
        level = row.get("level", 0)
        if isinstance(level, str):
            m = re.search(r"\d+", level)
            level = int(m.group(0)) if m else 0
        out.append(MathProblem(question, answer, src, int(level or 0), f"{src}-{lineno}"))
    return out


_MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)


def _math_answer(solution: str) -> str:
    boxed = last_boxed(solution)
    if boxed is None:
        raise ValueError("no \\boxed{} answer in the solution")
    return boxed


def _hub_rows(name: str, config: str | None, split: str) -> list[dict[str, Any]]:
    if _hub_offline():
        raise RuntimeError(
            f"no local path given for {name} and the hub is offline (HF_HUB_OFFLINE=1): "
            "pass path=<file.jsonl|file.parquet>"
        )
    import datasets

    ds = datasets.load_dataset(name, config, split=split)
    return [dict(r) for r in ds]  # type: ignore[arg-type]


def _from_hub_rows(
    rows: list[dict[str, Any]],
    question_key: str,
    answer_key: str,
    answer_from: Callable[[str], str],
    src: str,
) -> list[MathProblem]:
    out = []
    for i, row in enumerate(rows):
        try:
            answer = answer_from(str(row[answer_key]))
        except ValueError:
            continue
        out.append(MathProblem(str(row[question_key]), answer, src, 0, f"{src}-{i}"))
    return out


def load_gsm8k(
    path: str | os.PathLike[str] | None = None, *, split: Split | str = Split.TRAIN, limit: int | None = None
) -> list[MathProblem]:
    """GSM8K (``question``, ``answer`` with ``#### <n>``) from a local file, or ``openai/gsm8k``
    from the hub when ``path`` is None and the hub is reachable."""
    if path is not None:
        return load_jsonl(path, answer_from=gsm8k_reference_answer, source="gsm8k", limit=limit)
    rows = _hub_rows("openai/gsm8k", "main", str(Split(split)))
    return _from_hub_rows(rows, "question", "answer", gsm8k_reference_answer, "gsm8k")[:limit]


def load_math(
    path: str | os.PathLike[str] | None = None, *, split: Split | str = Split.TEST, limit: int | None = None
) -> list[MathProblem]:
    """MATH (``problem`` with ``answer``, or ``solution`` containing ``\\boxed{}``) from a local
    file, or from the hub when ``path`` is None: MATH-500 for test, the rest of hendrycks MATH
    (all subjects, train and test parts, minus MATH-500) for train."""
    if path is not None:
        p = Path(path)
        first = next(iter(read_records(p)), (0, {}))[1]
        if "answer" in first:
            return load_jsonl(p, question_key="problem", answer_key="answer", source="math", limit=limit)
        return load_jsonl(
            p,
            question_key="problem",
            answer_key="solution",
            answer_from=_math_answer,
            source="math",
            limit=limit,
        )
    if Split(split) is Split.TEST:
        rows = _hub_rows("HuggingFaceH4/MATH-500", None, "test")
        return _from_hub_rows(rows, "problem", "answer", str, "math")[:limit]
    held_out = {str(r["problem"]) for r in _hub_rows("HuggingFaceH4/MATH-500", None, "test")}
    rows = [
        row
        for subject in _MATH_SUBJECTS
        for part in ("train", "test")  # the cookbook's recipe: all of MATH except MATH-500
        for row in _hub_rows("EleutherAI/hendrycks_math", subject, part)
        if str(row["problem"]) not in held_out
    ]
    return _from_hub_rows(rows, "problem", "solution", _math_answer, "math")[:limit]


# --- one split of a source, and its validation ------------------------------------------------


def _split_file(path: str | None, split: Split) -> str | None:
    return path.replace("{split}", str(split)) if path else None


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1"


def load_split(
    source: str,
    split: Split | str,
    *,
    path: str | None = None,
    n: int = 1000,
    seed: int = 0,
    levels: str = "1,2,3,4,5",
) -> list[MathProblem]:
    """Problems of one split from ``source`` (``generated``, ``gsm8k``, ``math`` or ``jsonl``).

    ``path`` is a local file (for ``jsonl`` a file per split: ``{split}`` in the path is
    replaced by the split name). ``n`` caps the number of problems (the generator may have
    fewer distinct ones at easy levels).
    """
    split = Split(split)
    file = _split_file(path, split)
    if source == "generated":
        level_list = tuple(int(x) for x in levels.split(",") if x.strip())
        return generate_problems(n, seed=seed, split=split, levels=level_list, strict=False)
    if source == "gsm8k":
        return load_gsm8k(file, split=split, limit=n)
    if source == "math":
        return load_math(file, split=split, limit=n)
    if source == "jsonl":
        if not file:
            raise ValueError("source=jsonl needs path=<file.jsonl>, e.g. path=data/{split}.jsonl")
        return load_jsonl(file, limit=n)
    raise ValueError(f"unknown source {source!r}: use {', '.join(SOURCES)}")


def check_source(
    source: str,
    path: str | None = None,
    *,
    test_path: str | None = None,
    n_train: int = 1000,
    n_test: int = 0,
) -> None:
    """Validate a data source cheaply, before a model loads: the files of the train and test splits
    (those with ``n_train`` / ``n_test`` > 0) exist and their first ``n_train`` / ``n_test`` rows
    parse with a usable question and answer, exactly as :func:`load_split` will read them.

    The generator needs no check; a hub source (no ``path``) is refused while the hub is
    offline and not checked otherwise (it downloads when the datasets are built).

    Raises:
        FileNotFoundError: a file does not exist (one line, the path).
        DatasetFormatError: a malformed file or row (one line, ``path:line: what``).
        ValueError: an unknown source, or a source that needs a path.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}: use {', '.join(SOURCES)}")
    if source == "generated":
        return
    splits = [(Split.TRAIN, path, n_train), (Split.TEST, test_path or path, n_test)]
    for split, split_path, n in ((s, p, n) for s, p, n in splits if n > 0):
        if split_path is None:
            if source == "jsonl":
                raise ValueError("source=jsonl needs path=<file.jsonl>, e.g. path=data/{split}.jsonl")
            if _hub_offline():
                raise ValueError(
                    f"source={source} with no path reads the Hugging Face hub, which is offline "
                    "(HF_HUB_OFFLINE=1): pass path=<file.jsonl|file.parquet> ({split} in it becomes train / test)"
                )
            continue
        if not load_split(source, split, path=split_path, n=n):
            raise DatasetFormatError(f"{_split_file(split_path, split)}: no problems in the file")
