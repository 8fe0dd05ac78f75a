"""Pins the public API: what each public package exports (its ``__all__``, from its ``__init__.pyi``).

The snapshot is generated from the modules into ``tests/public_api.txt`` (one ``package.name`` a
line), never typed by hand. A change of it is an API change: regenerate it on purpose with

    PYTHONPATH=. .venv/bin/python tests/test_public_api.py --write

and name every removed or renamed name in the CHANGELOG.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "public_api.txt"
NOT_PACKAGES = {"tests", "bench", "scripts", "docs", "runs"}
NO_API = {
    "backend.local": "the local backend's implementation (private modules only; use ``backend``)",
    "envs.judge.data": "data files of the judge envs",
    "envs.distill": "a command (``python -m envs.distill``); its pieces live in ``envs.distill.pipeline``",
    "envs.distill.data": "data files of the distillation command",
    "envs.evals": "Inspect task modules (``envs.evals.inspect_tasks``) and their builders, named by path",
    "envs.evals.data": "data files of the offline evaluations",
    "envs.interop": "one module per adapted framework (``envs.interop.textarena``), imported by path",
}
"""Public-looking packages with no ``__all__`` on purpose, with the reason."""


def public_packages() -> list[str]:
    """Every package of the repository whose dotted path has no private (``_``) part."""
    found = []
    for init in sorted(ROOT.glob("**/__init__.py")):
        parts = init.parent.relative_to(ROOT).parts
        if not parts or parts[0] in NOT_PACKAGES or parts[0].startswith("."):
            continue
        if any(p.startswith("_") for p in parts):
            continue
        found.append(".".join(parts))
    return found


def api_lines() -> list[str]:
    """The snapshot: ``package.name`` for every name each public package exports, sorted."""
    lines = []
    for package in public_packages():
        if package in NO_API:
            continue
        module = importlib.import_module(package)
        lines += [f"{package}.{name}" for name in sorted(module.__all__)]
    return lines


def _snapshot() -> list[str]:
    return [line for line in SNAPSHOT.read_text().splitlines() if line and not line.startswith("#")]


def test_the_snapshot_is_the_modules_exports() -> None:
    current = api_lines()
    print(f"public API: {len(current)} names in {len({line.rsplit('.', 1)[0] for line in current})} packages")
    pinned = _snapshot()
    added = sorted(set(current) - set(pinned))
    removed = sorted(set(pinned) - set(current))
    assert not added and not removed, (
        f"public API changed (added {added}, removed {removed}); if on purpose, regenerate with "
        "`PYTHONPATH=. .venv/bin/python tests/test_public_api.py --write` and say so in the CHANGELOG"
    )


def test_every_package_without_api_says_why() -> None:
    for package in public_packages():
        module = importlib.import_module(package)
        assert hasattr(module, "__all__") or package in NO_API, f"{package} declares no __all__"


def _exports() -> list[tuple[str, str]]:
    return [(package, name) for package, _, name in (line.rpartition(".") for line in api_lines())]


@pytest.mark.parametrize("package", [p for p in public_packages() if p not in NO_API])
def test_every_export_resolves_and_is_documented(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        obj = getattr(module, name)  # raises if an export is missing
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert (obj.__doc__ or "").strip(), f"{package}.{name} has no docstring"


ENV_FILES = {"__init__.py", "env.py", "builders.py", "config.py", "train.py", "README.md"}
"""The files every env folder has (``NOTES.md`` beside them where the env has figures)."""


def test_every_env_folder_has_the_same_file_set() -> None:
    folders = [p.parent for p in (ROOT / "envs").glob("*/train.py")]
    assert len(folders) >= 4, folders  # twenty_questions, math, code, judge
    for folder in folders:
        missing = ENV_FILES - {p.name for p in folder.iterdir()}
        assert not missing, f"{folder.relative_to(ROOT)} lacks {sorted(missing)}"


SAME_MEANING_AS_THE_COOKBOOK = {
    "training.Config": "a trainer's config, named like each cookbook trainer's (rl.train.Config, supervised.train.Config)",
}
"""Names we share with the cookbook on purpose, with the reason (each is checked to still clash)."""


def _cookbook_library_names() -> dict[str, list[str]]:
    """Top-level public classes and functions of the cookbook's library modules, by name.

    Read from the source (no imports: fast, and no optional dependency needed). Private modules,
    tests and ``recipes`` are left out: recipes are example programs (their ``MathEnv`` or
    ``TwentyQuestionsEnv`` is the same kind of thing as ours), not the library's namespace.
    """
    import tinker_cookbook

    root = Path(tinker_cookbook.__file__).parent
    names: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[0] == "recipes" or any(p.startswith("_") and p != "__init__" for p in parts):
            continue
        if any(p.startswith("test") or p.endswith("_test") for p in parts):
            continue
        module = ".".join(("tinker_cookbook", *parts)).removesuffix(".__init__")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(
                node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
            ) and not node.name.startswith("_"):
                names.setdefault(node.name, []).append(module)
    return names


def test_no_public_name_means_something_else_in_the_cookbook() -> None:
    """A name we export that a cookbook library module also defines is the cookbook's own object (a
    re-export), never a different thing under the same name (#17: e.g. the old
    ``rollout.RolloutConfig``, ``rollout.run_rollout(env, policy)``, ``envs.judge.Comparison``)."""
    theirs = _cookbook_library_names()
    clashes: dict[str, list[str]] = {}
    for package, name in _exports():
        obj = getattr(importlib.import_module(package), name)
        if name in theirs and not str(getattr(obj, "__module__", "")).startswith("tinker_cookbook"):
            clashes[f"{package}.{name}"] = theirs[name]
    unexplained = {k: v for k, v in clashes.items() if k not in SAME_MEANING_AS_THE_COOKBOOK}
    assert not unexplained, f"public names that mean something else in the cookbook: {unexplained}"
    stale = set(SAME_MEANING_AS_THE_COOKBOOK) - set(clashes)
    assert not stale, f"no longer shared with the cookbook, drop from the allow-list: {stale}"


def test_the_cookbook_scan_sees_its_library() -> None:
    """The scan above is not vacuous: it finds names we know the cookbook defines."""
    theirs = _cookbook_library_names()
    assert "tinker_cookbook.renderers" in theirs["get_renderer"]
    assert "tinker_cookbook.preference.types" in theirs["Comparison"]
    assert "TwentyQuestionsEnv" not in theirs  # recipes are left out on purpose


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: PYTHONPATH=. python tests/test_public_api.py --write")
    lines = api_lines()
    SNAPSHOT.write_text(
        "# The public API, generated by `PYTHONPATH=. .venv/bin/python tests/test_public_api.py --write`;\n"
        "# tests/test_public_api.py compares it with the modules. Do not edit by hand.\n" + "\n".join(lines) + "\n"
    )
    print(f"wrote {SNAPSHOT.relative_to(ROOT)}: {len(lines)} names")
