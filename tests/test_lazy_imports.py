"""One lazy-export mechanism: every package with heavy public names lists them once in its
``__init__.pyi`` and exports them with ``lazy_loader.attach_stub``, so ``import envs``, ``import
training`` or ``import backend`` loads no tinker/torch, and a train CLI rejects a bad key in well
under a second."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAZY_PACKAGES = [
    "backend",
    "envs",
    "envs.code",
    "envs.judge",
    "envs.math",
    "envs.seats",
    "envs.tictactoe",
    "envs.nim",
    "envs.twenty_questions",
    "training",
]


def _stub_names(package: str) -> set[str]:
    stub = ROOT / package.replace(".", "/") / "__init__.pyi"
    tree = ast.parse(stub.read_text())
    return {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_package_import_loads_no_heavy_module(package: str) -> None:
    code = f"import sys, {package}; print(sorted(m for m in ('tinker', 'torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_embedded_model_name_is_cheap_to_read() -> None:
    """``training._config`` (parsed before anything heavy) reads ``backend.model.SMOLLM2``."""
    code = "import sys, training._config; print(sorted(m for m in ('tinker', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


STUB_PACKAGES = sorted(
    ".".join(p.parent.relative_to(ROOT).parts) for p in ROOT.glob("*/**/__init__.pyi") if ".venv" not in p.parts
)
"""Every package with public names: one declaration style (the stub), eager or not at run time."""


def test_every_package_with_public_names_declares_them_in_a_stub() -> None:
    from test_public_api import NO_API, public_packages

    assert set(LAZY_PACKAGES) <= set(STUB_PACKAGES)
    assert sorted(p for p in public_packages() if p not in NO_API) == STUB_PACKAGES


@pytest.mark.parametrize("package", STUB_PACKAGES)
def test_stub_names_are_the_exports_and_each_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = _stub_names(package)
    assert sorted(module.__all__) == sorted(names)  # one list: the stub (a stub alias would not export)
    for name in names:
        assert getattr(module, name) is not None


def test_no_package_rolls_its_own_lazy_getattr() -> None:
    """A module-level ``__getattr__`` only comes from ``lazy_loader`` (one mechanism)."""
    offenders = []
    for init in ROOT.glob("*/**/__init__.py"):
        if ".venv" in init.parts:
            continue
        text = init.read_text()
        if "def __getattr__" in text:
            offenders.append(str(init.relative_to(ROOT)))
    assert not offenders


def test_lazy_name_resolves_and_unknown_name_raises() -> None:
    import envs

    assert envs.ChatEnv.__name__ == "ChatEnv"
    with pytest.raises(AttributeError, match="Nope"):
        _ = envs.Nope  # type: ignore[attr-defined]
