"""Lazy package exports, so ``python -m envs.<env>.train bad=key`` fails in well under a second.

A package lists its public imports once, under ``if TYPE_CHECKING:`` (where type checkers and
IDEs read them), and calls :func:`attach`; at run time each name is imported on first access.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _type_checking_imports(source: str, package: str) -> dict[str, str]:
    """``{exported name: absolute module}`` for the ``from X import Y`` under ``if TYPE_CHECKING:``."""
    out: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module is not None:
                    module = stmt.module
                    if stmt.level:  # relative import
                        base = package.rsplit(".", stmt.level - 1)[0] if stmt.level > 1 else package
                        module = f"{base}.{module}"
                    for alias in stmt.names:
                        out[alias.asname or alias.name] = module
    return out


def attach(package: str, file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module ``__getattr__`` and ``__dir__`` that import the ``TYPE_CHECKING`` names lazily."""
    lazy = _type_checking_imports(Path(file).read_text(), package)

    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(importlib.import_module(package), name, value)  # cache: next access is a plain lookup
        return value

    def __dir__() -> list[str]:
        return sorted(lazy)

    return __getattr__, __dir__
