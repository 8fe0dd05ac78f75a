"""Env packages import their public names lazily: a train CLI rejects a bad key in well under a second."""

from __future__ import annotations

import subprocess
import sys

import pytest

import envs._lazy as lazy


def test_type_checking_imports_are_parsed() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pkg.sub import A, B as C\n"
        "    from .rel import D\n"
        "from other import E\n"
    )
    assert lazy._type_checking_imports(source, "pkg") == {"A": "pkg.sub", "C": "pkg.sub", "D": "pkg.rel"}


@pytest.mark.parametrize("package", ["envs", "envs.twenty_questions", "envs.math", "envs.judge"])
def test_package_import_loads_no_heavy_module(package: str) -> None:
    code = f"import sys, {package}; print(sorted(m for m in ('tinker', 'torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_lazy_name_resolves_and_unknown_name_raises() -> None:
    import envs

    assert envs.ChatEnv.__name__ == "ChatEnv"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = envs.Nope  # type: ignore[attr-defined]
