"""The helpers of :mod:`envs.testing` (the conformance assertion, scripted policies) and the
strategies it re-exports; import them from :mod:`envs.testing`."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from hypothesis import strategies as st
from tinker_cookbook.renderers import Message, Renderer, ToolSpec

from completers import ScriptedGroupCompleter, ScriptedReply, ScriptedTokenCompleter
from envs.checker import (
    ActionKind,
    CheckConfig,
    CheckName,
    ConformanceReport,
    Outcome,
    check_conformance,
    make_renderer,
)
from envs.checker._strategies import (
    WELL_FORMED_TEXTS,
    env_actions,
    env_limits,
    fault_policies,
    json_values,
    tool_call_messages,
    well_formed_action,
)
from envs.gym._adapter import EnvSource
from envs.gym._cookbook import ScriptedAnswerer, cookbook_twenty_questions
from envs.testing._strategies import tool_call_conversations, tool_calls
from renderers_ext import render_action, tool_call
from renderers_ext.testing import (
    assistant_messages,
    conversations,
    messages,
    texts,
    thinking_contents,
    token_actions,
)


def assert_env_conforms(
    source: EnvSource,
    *,
    examples: int = 20,
    seed: int = 0,
    renderer: Renderer | str | None = None,
    model_name: str | None = None,
    tools: Sequence[ToolSpec] | None = None,
    action_messages: st.SearchStrategy[Message] | None = None,
    allow_skip: Iterable[CheckName | str] = (),
    tolerate: Iterable[CheckName | str] = (),
    **config: Any,
) -> ConformanceReport:
    """Run the conformance checker on ``source`` and raise ``AssertionError`` on any failure,
    including a check that could not run (it never passes vacuously).

    Args:
        source: an ``EnvGroupBuilder``, an ``RLDataset`` or an env factory (taking nothing, a
            ``seed`` or an ``rng``).
        examples: hypothesis-drawn episodes.
        seed: seed of the run (reproducible).
        renderer: the env's renderer (or its name) when the env does not expose it at
            ``.renderer`` (e.g. a cookbook env).
        model_name: the model whose tokenizer a renderer given by name uses (default: the
            embedded SmolLM2).
        tools: tools to draw calls to when the env does not declare them (``env.tools``).
        action_messages: assistant messages worth drawing, besides the env's ``action_messages()``.
        allow_skip: checks allowed not to run (e.g. ``CheckName.EXTENSION`` for an env whose
            episodes cannot get past one turn).
        tolerate: checks whose failure is tolerated (e.g. ``CheckName.PICKLE`` for a local-only env).
        config: more :class:`~envs.checker.CheckConfig` fields (``block_threshold_s``, ``max_steps``...).

    Returns:
        The report, for further assertions (``report.stats["tool_calls"]``...).
    """
    if isinstance(renderer, str):
        renderer = make_renderer(renderer, model_name)
    report = check_conformance(
        source,
        CheckConfig(
            examples=examples,
            seed=seed,
            renderer=renderer,
            tools=tools,
            action_messages=action_messages,
            allow_skip=frozenset(CheckName(s) for s in allow_skip),
            **config,
        ),
    )
    tolerated = {CheckName(s) for s in tolerate}
    failures = [r for r in report.failures if r.check not in tolerated]
    if failures:
        lines = "\n".join(
            f"  {r.check}{' (not run)' if r.outcome == Outcome.NOT_RUN else ''}: {r.detail}" for r in failures
        )
        raise AssertionError(f"{report.target} does not conform ({len(failures)} failed):\n{lines}")
    return report


def scripted_policy(
    renderer: Renderer, scripts: Sequence[Sequence[ScriptedReply]], **options: Any
) -> ScriptedGroupCompleter:
    """A scripted policy for a group of envs on ``renderer``: env ``k`` (in order of first turns)
    plays ``scripts[k]``, whose replies are text (end-of-turn appended), token lists, or
    assistant messages (text, thinking, ``tool_calls``; see :func:`tool_call`) rendered with
    :func:`render_action`. ``options`` (e.g. ``delay``, ``logprob``, ``cycle``) go to each
    script's :class:`completers.ScriptedTokenCompleter`."""
    stop = renderer.get_stop_sequences()
    return ScriptedGroupCompleter(
        [
            ScriptedTokenCompleter(
                script,
                renderer.tokenizer,
                stop_token=stop[0] if stop and isinstance(stop[0], int) else None,
                render=functools.partial(render_action, renderer),
                **options,
            )
            for script in scripts
        ]
    )


__all__ = [
    "WELL_FORMED_TEXTS",
    "ActionKind",
    "CheckName",
    "ConformanceReport",
    "Outcome",
    "ScriptedAnswerer",
    "assert_env_conforms",
    "assistant_messages",
    "conversations",
    "cookbook_twenty_questions",
    "env_actions",
    "env_limits",
    "fault_policies",
    "json_values",
    "messages",
    "render_action",
    "scripted_policy",
    "texts",
    "thinking_contents",
    "token_actions",
    "tool_call",
    "tool_call_conversations",
    "tool_call_messages",
    "tool_calls",
    "well_formed_action",
]
