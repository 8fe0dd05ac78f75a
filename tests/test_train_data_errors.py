"""Bad data files stop a train command in one line, exit 2, before the model loads, writing nothing.

One fresh interpreter runs every case (as ``python -m envs.<env>.train`` would) and reports, per
case, the exit status, stderr, whether the run folder exists and whether torch was ever imported
(the model cannot have loaded without it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"

_RUNNER = """
import contextlib, importlib, io, json, sys
cases = json.loads(sys.argv[1])
out = {}
for name, (module, args, log_path) in cases.items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = importlib.import_module(module).main([*args, f"log_path={log_path}"])
    out[name] = {"rc": rc, "stderr": err.getvalue(), "torch": "torch" in sys.modules}
print(json.dumps(out))
"""


def _cases(tmp: Path) -> dict[str, tuple[str, list[str], str]]:
    (tmp / "no_answer.jsonl").write_text(
        '{"question": "What is 1 + 1?", "answer": "#### 2"}\n{"question": "q2"}\n'
    )
    (tmp / "gsm8k_no_final.jsonl").write_text('{"question": "What is 1 + 1?", "answer": "It is two."}\n')
    (tmp / "tasks_malformed.jsonl").write_text('{"prompt": "Hi"}\n{"prompt": "Hello"\n')
    (tmp / "tasks_unknown_rubric.jsonl").write_text('{"prompt": "Hi", "rubric": "nope"}\n')
    (tmp / "rubrics_malformed.json").write_text('[{"name": "default", "criteria": [\n')
    math = "envs.math.train"
    judge = "envs.judge.train"
    return {
        "missing_file": (
            math,
            ["data.source=gsm8k", "data.path=/nonexistent.jsonl"],
            "/nonexistent.jsonl: no such file",
        ),
        "malformed_line": (
            math,
            ["data.source=gsm8k", f"data.path={FIXTURES / 'math_malformed.jsonl'}"],
            "math_malformed.jsonl:3: invalid JSON",
        ),
        "row_without_question": (
            math,
            ["data.source=jsonl", f"data.path={FIXTURES / 'math_missing_field.jsonl'}"],
            "math_missing_field.jsonl:2: missing or empty string field 'question'",
        ),
        "row_without_answer": (
            math,
            ["data.source=jsonl", f"data.path={tmp / 'no_answer.jsonl'}"],
            "no_answer.jsonl:2: missing or empty string field 'answer'",
        ),
        "gsm8k_row_without_final_answer": (
            math,
            ["data.source=gsm8k", f"data.path={tmp / 'gsm8k_no_final.jsonl'}"],
            "gsm8k_no_final.jsonl:1: no '#### <answer>' line",
        ),
        "hub_source_offline": (math, ["data.source=math"], "the Hugging Face hub, which is offline"),
        "judge_missing_task_file": (judge, ["env.tasks_path=/nonexistent.jsonl"], "/nonexistent.jsonl: no such file"),
        "judge_malformed_task_line": (
            judge,
            [f"env.tasks_path={tmp / 'tasks_malformed.jsonl'}"],
            "tasks_malformed.jsonl:2: invalid JSON",
        ),
        "judge_task_names_unknown_rubric": (
            judge,
            [f"env.tasks_path={tmp / 'tasks_unknown_rubric.jsonl'}"],
            "names rubric 'nope'",
        ),
        "judge_malformed_rubric_file": (
            judge,
            [f"env.rubrics_path={tmp / 'rubrics_malformed.json'}"],
            "rubrics_malformed.json is not valid JSON",
        ),
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("data_errors")
    cases = _cases(tmp)
    spec = {name: (module, args, str(tmp / f"run_{name}")) for name, (module, args, _) in cases.items()}
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, json.dumps(spec)],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        name: {**out[name], "module": cases[name][0], "expected": cases[name][2], "log_path": tmp / f"run_{name}"}
        for name in cases
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing_file",
        "malformed_line",
        "row_without_question",
        "row_without_answer",
        "gsm8k_row_without_final_answer",
        "hub_source_offline",
        "judge_missing_task_file",
        "judge_malformed_task_line",
        "judge_task_names_unknown_rubric",
        "judge_malformed_rubric_file",
    ],
)
def test_bad_data_is_one_line_exit_2_before_the_model_and_writes_nothing(results: dict[str, Any], case: str):
    result = results[case]
    lines = result["stderr"].strip().splitlines()
    assert result["rc"] == 2, result["stderr"]
    assert len(lines) == 1 and lines[0].startswith(f"{result['module']}: error: "), lines
    assert result["expected"] in lines[0]
    assert not result["log_path"].exists()
    assert not result["torch"], "the data check must run before torch (and the model) are imported"


def test_the_loop_checks_data_before_writing_too(tmp_path: Path):
    import training
    from envs.math.train import MathTrainConfig

    config = training.parse_config(
        MathTrainConfig,
        ["data.source=gsm8k", f"data.path={FIXTURES / 'math_malformed.jsonl'}", f"log_path={tmp_path / 'run'}"],
    )
    with pytest.raises(training.ConfigError, match=r"math_malformed\.jsonl:3: invalid JSON"):
        training.train(config)
    assert not (tmp_path / "run").exists()
