"""Prompt distillation, the tinker docs' recipe on a laptop: ``python -m envs.distill [key=value ...]``.

The task is the docs' language classification, on the shipped ``data/languages.jsonl`` (64 short
sentences, 16 each in English, French, Spanish and German; ``{"id", "text", "label"}`` per line;
sentences 12-15 of each language are held out). The reply is the language's name.

1. **Teacher**: the model (no adapter) with a long instruction prompt (:data:`TEACHER_PROMPT`: the
   labels and each language's cues, as the system message; then :data:`EXAMPLES` as earlier chat
   turns, one per language) answers every training
   sentence, greedily; its answers are the student's data (the cookbook's conversation format,
   ``teacher.jsonl``), right or wrong.
2. **Student**: a LoRA on the same model trained by SL on those conversations *without* the
   prompt (the user message is the sentence alone).
3. **Held-out accuracy** (greedy) of the unprompted model, the teacher and the student; the
   recovery is the share of the teacher's gain over the unprompted model that the student keeps,
   ``(student - unprompted) / (teacher - unprompted)``.

A reply is right when the first of the four language names it mentions is the label. It ends
with ``unprompted_accuracy=<u> teacher_accuracy=<t> student_accuracy=<s> distill_recovery=<r>``
and writes ``summary.json``; the teacher's data and the student are reused when they exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import chz

__all__ = [
    "LABELS",
    "LANGUAGES_FILE",
    "TEACHER_PROMPT",
    "DistillConfig",
    "first_label",
    "main",
    "run_pipeline",
]

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
LANGUAGES_FILE = Path(__file__).parent / "data" / "languages.jsonl"
"""The shipped sentences (``{"id", "text", "label"}``)."""
LABELS = ("English", "French", "Spanish", "German")
"""The answers."""
TEST_INDICES = frozenset(range(12, 16))
"""Sentence numbers (the ``NN`` of ``xx-NN`` ids) held out in every language."""
TEACHER_PROMPT = """You are a precise language classifier. Read the user's text and reply with the name of its language, one word: English, French, Spanish or German. Do not translate the text and do not repeat it.

How to tell them apart:
- English: words such as the, and, is, are, to, of, with, please, would; no accents.
- French: words such as le, la, les, des, est, avec, pour, nous, je, il y a; accents such as é, è, à, ç, ê; apostrophes as in l'été, j'ai, s'il.
- Spanish: words such as el, los, las, es, está, por, para, hoy, muy; the letter ñ; questions that start with ¿ and exclamations that start with ¡; accents such as á, í, ó, ú.
- German: words such as der, die, das, und, ist, nicht, ich, wir, bitte; umlauts ä, ö, ü and the letter ß; nouns written with a capital letter.

Reply with the language name only."""
"""The teacher's long instruction prompt (a system message, followed by :data:`EXAMPLES`)."""
EXAMPLES = (
    ("I am going to the station to meet my friend.", "English"),
    ("Je vais à la gare pour retrouver mon ami.", "French"),
    ("Voy a la estación para encontrarme con mi amigo.", "Spanish"),
    ("Ich gehe zum Bahnhof, um meinen Freund zu treffen.", "German"),
)
"""Worked examples shown to the teacher as earlier turns of the chat (few-shot)."""


@chz.chz
class DistillConfig:
    """Configuration of the recipe (fields are the command-line keys)."""

    log_path: str = "runs/distill"
    """Folder of every artifact (``teacher.jsonl``, ``student.json``, ``summary.json``, checkpoints)."""
    model_name: str = SMOLLM2
    """The model: the teacher (with the prompt), the student's base (without)."""
    renderer_name: str = "qwen3_instruct"
    """Renderer of the conversations."""
    backend: str = "local"
    """``local`` (embedded, offline) or ``tinker`` (the service ``base_url`` points at)."""
    base_url: str | None = None
    """Tinker service URL (``backend=tinker``)."""
    data_path: str = ""
    """Sentences (empty: the shipped ``languages.jsonl``)."""
    max_tokens: int = 4
    """Tokens per reply."""
    lora_rank: int = 16
    """LoRA rank of the student."""
    seed: int = 0
    """Seed of the student's initialisation and batch order."""
    steps: int = 24
    """Supervised steps of the student."""
    batch_size: int = 8
    """Conversations per step."""
    learning_rate: float = 5e-4
    """Student learning rate."""

    @chz.validate
    def _check(self) -> None:
        if self.backend not in ("local", "tinker"):
            raise ValueError(f"backend must be 'local' or 'tinker', got {self.backend!r}")
        if self.steps < 1 or self.batch_size < 1 or self.max_tokens < 1:
            raise ValueError("steps, batch_size and max_tokens must be >= 1")


def first_label(text: str) -> str | None:
    """The first of :data:`LABELS` that ``text`` mentions (whole word, any case), or None."""
    found = [
        (m.start(), label) for label in LABELS for m in [re.search(rf"\b{label}\b", text, re.IGNORECASE)] if m
    ]
    return min(found)[1] if found else None


def load_sentences(path: str | Path) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Train and held-out rows of a sentences file (held out: ids ending in 12-15)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"sentences file not found: {path}")
    train, test = [], []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            held_out = int(row["id"].rsplit("-", 1)[1]) in TEST_INDICES
            ok = row["label"] in LABELS and isinstance(row["text"], str)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, IndexError):
            ok = held_out = False
        if not ok:
            raise ValueError(
                f"{path}:{number}: expected {{'id': 'xx-NN', 'text', 'label'}} with a label in {LABELS}"
            )
        (test if held_out else train).append(row)
    if not train or not test:
        raise ValueError(f"{path}: needs train and held-out sentences, got {len(train)} / {len(test)}")
    return train, test


def _messages(text: str, prompted: bool) -> list[dict[str, str]]:
    if not prompted:
        return [{"role": "user", "content": text}]
    shots = [
        message
        for example, label in EXAMPLES
        for message in (
            {"role": "user", "content": f"Text: {example}"},
            {"role": "assistant", "content": label},
        )
    ]
    return [
        {"role": "system", "content": TEACHER_PROMPT},
        *shots,
        {"role": "user", "content": f"Text: {text}"},
    ]


async def _replies(
    client: Any, renderer: Any, texts: Sequence[str], prompted: bool, max_tokens: int
) -> list[str]:
    import tinker
    from tinker_cookbook.renderers import get_text_content

    async def one(text: str) -> str:
        response = await client.sample_async(
            prompt=renderer.build_generation_prompt(_messages(text, prompted)),
            num_samples=1,
            sampling_params=tinker.SamplingParams(
                max_tokens=max_tokens, temperature=0.0, stop=renderer.get_stop_sequences()
            ),
        )
        message, _ = renderer.parse_response(list(response.sequences[0].tokens))
        return get_text_content(message).strip()

    return list(await asyncio.gather(*(one(t) for t in texts)))


def accuracy(replies: Sequence[str], rows: Sequence[dict[str, str]]) -> float:
    """Share of ``replies`` whose :func:`first_label` is the row's label."""
    return sum(first_label(r) == row["label"] for r, row in zip(replies, rows, strict=True)) / len(rows)


async def _run(config: DistillConfig, service: Any, out: Path) -> dict[str, Any]:
    import training
    from envs.judge.preference import sft_datums
    from renderers_ext import load_renderer

    def ready(made: Any) -> Any:
        return made.result() if hasattr(made, "result") and not hasattr(type(made), "sample_async") else made

    renderer = load_renderer(config.renderer_name, config.model_name)
    train, test = load_sentences(config.data_path or LANGUAGES_FILE)
    base = ready(service.create_sampling_client(base_model=config.model_name))
    t0 = time.monotonic()
    teacher_file = out / "teacher.jsonl"
    if not teacher_file.is_file():
        answers = await _replies(base, renderer, [r["text"] for r in train], True, config.max_tokens)
        teacher_file.write_text(
            "".join(
                json.dumps({"messages": [*_messages(r["text"], False), {"role": "assistant", "content": a}]})
                + "\n"
                for r, a in zip(train, answers, strict=True)
            )
        )
    teacher_rows = [json.loads(line) for line in teacher_file.read_text().splitlines() if line.strip()]
    teacher_train = accuracy([r["messages"][-1]["content"] for r in teacher_rows], train)
    record = out / "student.json"
    if record.is_file():
        student = json.loads(record.read_text())
    else:
        client = await service.create_lora_training_client_async(
            config.model_name,
            rank=config.lora_rank,
            seed=config.seed,
            user_metadata={"renderer_name": config.renderer_name},
        )
        hook = training.supervised_warm_start(
            sft_datums(teacher_file, renderer),
            steps=config.steps,
            batch_size=config.batch_size,
            learning_rate=config.learning_rate,
            seed=config.seed,
        )
        metrics = await hook(client, training.Config(learning_rate=config.learning_rate))
        sampler = await (await client.save_weights_for_sampler_async("student")).result_async()
        student = {"sampler_path": sampler.path, **metrics}
        record.write_text(json.dumps(student, indent=2))
    texts = [r["text"] for r in test]
    unprompted = await _replies(base, renderer, texts, False, config.max_tokens)
    teacher = await _replies(base, renderer, texts, True, config.max_tokens)
    student_client = ready(service.create_sampling_client(model_path=student["sampler_path"]))
    distilled = await _replies(student_client, renderer, texts, False, config.max_tokens)
    u, t, s = accuracy(unprompted, test), accuracy(teacher, test), accuracy(distilled, test)
    return {
        "train_sentences": len(train),
        "heldout_sentences": len(test),
        "teacher_train_accuracy": teacher_train,
        "student": student,
        "unprompted_accuracy": u,
        "teacher_accuracy": t,
        "student_accuracy": s,
        "distill_recovery": (s - u) / (t - u) if t != u else float("nan"),
        "examples": [
            {"text": row["text"], "label": row["label"], "unprompted": a, "teacher": b, "student": c}
            for row, a, b, c in list(zip(test, unprompted, teacher, distilled, strict=True))[:4]
        ],
        "seconds": time.monotonic() - t0,
    }


def run_pipeline(config: DistillConfig) -> dict[str, Any]:
    """Teacher data, student, held-out accuracies; returns ``summary.json``'s contents."""
    import tinker

    from backend.model import register_tokenizers
    from backend.offline import use_local_backend

    out = Path(config.log_path).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    register_tokenizers()
    block = use_local_backend(out / "checkpoints") if config.backend == "local" else contextlib.nullcontext()
    with block:
        summary = asyncio.run(_run(config, tinker.ServiceClient(base_url=config.base_url), out))
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    return summary


def _report(summary: dict[str, Any]) -> list[str]:
    """The lines ``python -m envs.distill`` prints after its run."""
    return [
        f"unprompted_accuracy={summary['unprompted_accuracy']:.3f} teacher_accuracy={summary['teacher_accuracy']:.3f} "
        f"student_accuracy={summary['student_accuracy']:.3f} distill_recovery={summary['distill_recovery']:.3f}"
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m envs.distill [key=value ...]``; returns the exit status."""
    from training import run_pipeline_cli

    return run_pipeline_cli("envs.distill", DistillConfig, run_pipeline, _report, argv)
