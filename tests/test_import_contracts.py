"""The layering is kept: ``lint-imports`` checks the import-linter contracts of ``pyproject.toml``
(layers, forbidden imports, no import cycles inside a package) as part of ``make test``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_the_contracts_cover_every_package_and_the_stated_rules() -> None:
    """The contracts name all our top-level packages, so a new module cannot escape them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    packages = set(config["root_packages"])
    on_disk = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench"}
    assert packages == on_disk
    types = {c["type"] for c in config["contracts"]}
    assert {"layers", "forbidden", "acyclic_siblings"} <= types
    acyclic = next(c for c in config["contracts"] if c["type"] == "acyclic_siblings")
    assert set(acyclic["ancestors"]) == packages
