"""The ``turngym/...`` gymnasium ids, registered lazily.

Registering costs nothing: each id points at a string entry point (``envs.gym._registry:make_*``)
so the env package is imported only when ``gymnasium.make`` is called, and an id is registered
only when its package is present (checked with ``importlib.util.find_spec``, no import).

Keyword arguments of ``gymnasium.make`` besides ``render_mode`` go to the env's factory.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym

from envs.gym._adapter import TokenEnv

NAMESPACE = "turngym"
"""Namespace of every TurnGym id."""


@dataclass(frozen=True)
class EnvEntry:
    """One registered id."""

    id: str
    """The gymnasium id, ``turngym/<Name>-v<k>``."""
    entry_point: str
    """``module:function`` building the :class:`TokenEnv` (takes ``render_mode`` and config)."""
    requires: str
    """The module that must exist for the id to be registered."""
    description: str
    """One line about the env."""


ENTRIES: tuple[EnvEntry, ...] = (
    EnvEntry(
        "turngym/CookbookTwentyQuestions-v0",
        "envs.gym._registry:make_cookbook_twenty_questions",
        "tinker_cookbook.recipes.multiplayer_rl.twenty_questions.env",
        "tinker-cookbook's own Twenty Questions env with a scripted (offline) answerer",
    ),
)
"""Every id TurnGym knows, registered or not (see :data:`ENV_IDS`)."""

ENV_IDS: list[str] = []
"""The ids registered in this process (those whose env package is present)."""


def _present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def register_envs() -> list[str]:
    """Register every available ``turngym/...`` id with gymnasium (idempotent); return them."""
    for entry in ENTRIES:
        if entry.id in gym.registry or not _present(entry.requires):
            if entry.id in gym.registry and entry.id not in ENV_IDS:
                ENV_IDS.append(entry.id)
            continue
        gym.register(id=entry.id, entry_point=entry.entry_point)
        ENV_IDS.append(entry.id)
    return list(ENV_IDS)


def _token_env(factory: Callable[..., Any], render_mode: str | None, config: dict[str, Any]) -> TokenEnv:
    return TokenEnv(partial(factory, **config) if config else factory, render_mode=render_mode)


def make_cookbook_twenty_questions(render_mode: str | None = None, **config: Any) -> TokenEnv:
    """``turngym/CookbookTwentyQuestions-v0``: config goes to
    :func:`envs.testing.cookbook_twenty_questions` (``group_size``)."""
    from envs.testing._cookbook import cookbook_twenty_questions

    return _token_env(cookbook_twenty_questions, render_mode, config)
