"""verifiers environments as TurnGym ``ChatEnv`` s (ids ``verifiers:<name>``), token-exact.

verifiers 0.4 (``pip install verifiers``, the ``verifiers`` extra; its stack is ``verifiers.v1``)
describes an environment as a *taskset* (``vf.Taskset.load()`` yields ``vf.Task`` s: the data,
``@vf.reward`` / ``@vf.metric`` scoring hooks, ``vf.Toolset`` tool servers) and, for multi-turn
control flow, an env whose ``run(task, agents)`` talks to the model through
``agents.<seat>.interaction(task)`` and ``await interaction.turn(user_text)``. verifiers runs the
model through a harness program and an intercepted chat endpoint (text in, text out); this
adapter runs the same pieces in our engine instead:

- The env's own ``run()`` drives the conversation (a verifiers ``Env`` subclass's ``run`` is
  called as written, with its config; without one, verifiers' single-agent default: one model
  turn on the task's prompt). Each ``interaction.turn(text)`` becomes a user message of the
  ``ChatEnv``; the model's reply is the policy's *sampled tokens* (parsed by the renderer), handed
  back to ``run()`` as the segment's text. Only the new user message is rendered after a turn, so
  the next observation extends the previous one token for token.
- Tools: the task's toolsets (``Task.toolsets(config)``) run in process; their ``@vf.tool``
  methods become the ``ChatEnv`` 's tools (schemas from their signatures and docstrings, see
  :mod:`envs.tools`); a tool call is answered in the ``tool`` role by id and the turn goes on,
  as the harness's tool loop does.
- Reward: at the end the task's own ``score(trace)`` runs on a verifiers ``Trace`` holding the
  conversation as text (each ``@vf.reward`` weighted, summed: ``trace.reward``); each reward and
  metric is also a step metric ``verifiers/<name>``.
- Not carried over: verifiers' harness programs, sandboxes/runtimes, MCP servers out of
  process, judges that call a model, multi-seat envs (``agents`` has one seat here: every seat
  name is the policy). ``run()`` runs as a task on the asyncio loop (anyio's asyncio backend).
- Ids: ``verifiers:<name>`` for the envs registered in :data:`ENVS` (built in code, offline) or
  ``verifiers:<module>:<function>`` (a function returning a :class:`VerifiersSpec`). An
  Environments Hub id (``verifiers:owner/name``) needs a download, which fails in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tinker_cookbook.renderers import Message, Renderer, get_text_content
from tinker_cookbook.rl.types import Env, EnvGroupBuilder

from envs.core import ChatEnv, EnvLimits, Reply

PREFIX = "verifiers:"
"""Prefix of the TurnGym ids of verifiers environments."""
METRIC_PREFIX = "verifiers/"
"""Prefix of the step metrics made from a trace's rewards and metrics."""
NO_FEEDBACK = "(No new message. Go on.)"
"""The user message of a turn the env opened with no text."""
ENVS: dict[str, str] = {
    "arith-retry": "envs.interop.verifiers_examples:arith_retry",
    "calculator": "envs.interop.verifiers_examples:calculator",
}
"""The verifiers environments built in code here (offline), by name."""


class VerifiersError(RuntimeError):
    """A verifiers environment that cannot be loaded or whose ``run()`` failed."""


@dataclass(frozen=True)
class VerifiersSpec:
    """A verifiers environment in the pieces the adapter runs."""

    taskset: Any
    """A ``vf.Taskset`` (its ``load()`` yields the tasks)."""
    env_cls: type | None = None
    """A ``vf.Env`` subclass whose ``run(task, agents)`` is the control flow (None: one turn)."""
    env_config: Any = None
    """The env's config (``self.config`` inside ``run``)."""


def load_spec(env_id: str) -> VerifiersSpec:
    """The :class:`VerifiersSpec` behind ``verifiers:<name>`` or ``verifiers:<module>:<fn>``."""
    name = env_id[len(PREFIX) :] if env_id.startswith(PREFIX) else env_id
    target = ENVS.get(name, name)
    if ":" not in target:
        if "/" in name:
            raise VerifiersError(
                f"verifiers:{name} needs a download from the Environments Hub (network), "
                f"not available offline; built-in: {', '.join(sorted(ENVS))}"
            )
        raise VerifiersError(f"unknown verifiers env {name!r}; built-in: {', '.join(sorted(ENVS))}")
    module, _, attr = target.partition(":")
    try:
        spec = getattr(importlib.import_module(module), attr)()
    except ImportError as error:
        raise VerifiersError(
            f"verifiers:{name} needs {error.name!r} (pip install 'turngym[verifiers]')"
        ) from None
    if not isinstance(spec, VerifiersSpec):
        raise VerifiersError(f"{target} returned {type(spec).__name__}, expected a VerifiersSpec")
    return spec


def task_at(taskset: Any, index: int) -> Any:
    """The ``index``-th task of a taskset (modulo its size when it is finite)."""
    if getattr(taskset, "INFINITE", False):
        return next(itertools.islice(iter(taskset.load()), index, None))
    tasks = list(taskset.load())
    if not tasks:
        raise VerifiersError(f"{type(taskset).__name__} has no tasks")
    return tasks[index % len(tasks)]


class _Seat:
    """The one seat of ``agents``: every ``agents.<name>.interaction`` is the policy."""

    def __init__(self, env: VerifiersEnv):
        self._env = env
        self.trainable = True

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any, **_: Any) -> AsyncIterator[_Interaction]:
        yield _Interaction(self._env)


class _Agents:
    def __init__(self, env: VerifiersEnv):
        self._seat = _Seat(env)

    def __getattr__(self, name: str) -> _Seat:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._seat


class _Interaction:
    """verifiers' ``Interaction`` as ``run()`` sees it: each ``turn`` waits for the policy."""

    def __init__(self, env: VerifiersEnv):
        self._env = env

    @property
    def trace(self) -> Any:
        return self._env.trace

    async def turn(self, message: Any = None) -> Any:
        from verifiers.v1.agent import Segment
        from verifiers.v1.types import AssistantMessage

        text = message if isinstance(message, str) or message is None else _messages_text(message)
        await self._env._to_env.put(("turn", text))
        reply = await self._env._to_run.get()
        if reply is None:  # the episode was cut (TurnGym's limits)
            return Segment(messages=[], terminated=True)
        return Segment(messages=[AssistantMessage(content=reply)])


def _messages_text(messages: Any) -> str:
    from verifiers.v1.types import content_text

    return "\n\n".join(content_text(m.content) for m in messages if content_text(m.content))


class VerifiersEnv(ChatEnv):
    """One episode of a verifiers task (build with :class:`VerifiersGroup`).

    Args:
        spec: the environment.
        task: the ``vf.Task`` to play.
        renderer: the policy's renderer.
        limits: TurnGym's budgets (tool calls count as turns).
    """

    def __init__(
        self, spec: VerifiersSpec, task: Any, renderer: Renderer, *, limits: EnvLimits | None = None
    ):
        from verifiers.v1.utils.decorators import discover_decorated

        from envs.tools import Toolbox

        tools = [
            fn for toolset in type(task).toolsets(task.config) for fn in discover_decorated(toolset, "tool")
        ]
        self.toolbox = Toolbox(tools)
        super().__init__(renderer, limits=limits or EnvLimits(max_turns=16), tools=self.toolbox.specs)
        self.spec = spec
        self.task = task
        self.trace: Any = None
        self.opening: list[Message] = []
        self._to_env: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._to_run: asyncio.Queue[str | None] = asyncio.Queue()
        self._runner: asyncio.Task[None] | None = None

    # --- the verifiers side ---------------------------------------------------------------
    def _record(self, message: Any, *, sampled: bool = False) -> None:
        from verifiers.v1.graph import MessageNode

        parent = len(self.trace.nodes) - 1 if self.trace.nodes else None
        self.trace.nodes.append(MessageNode(parent=parent, message=message, sampled=sampled))

    async def _drive(self) -> None:
        """verifiers' side of the episode: ``run()``, then the task's scoring."""
        try:
            if self.spec.env_cls is None:
                async with _Agents(self).player.interaction(self.task) as interaction:
                    await interaction.turn()
            else:
                env = object.__new__(self.spec.env_cls)  # run() needs only its config
                env.config = self.spec.env_config
                await self.spec.env_cls.run(env, self.task, _Agents(self))
            await self.task.score(self.trace)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            await self._to_env.put(("error", error))
            return
        await self._to_env.put(("done", None))

    async def _next(self) -> tuple[str, Any]:
        kind, value = await self._to_env.get()
        if kind == "error":
            first = str(value).splitlines()[0] if str(value) else ""
            raise VerifiersError(f"{type(self.task).__name__}: run() failed: {type(value).__name__}: {first}")
        return kind, value

    # --- the ChatEnv side -----------------------------------------------------------------
    async def initial_observation(self):  # type: ignore[override]
        from verifiers.v1 import AgentConfig, SystemMessage, UserMessage
        from verifiers.v1.trace import AgentInfo, Trace, TraceTask

        data = self.task.data
        self.trace = Trace(
            task=TraceTask(type=type(self.task).__name__, data=data), agent=AgentInfo(config=AgentConfig())
        )
        self.opening = []
        if data.system_prompt:
            self.opening.append({"role": "system", "content": data.system_prompt})
        if isinstance(data.prompt, str):
            self.opening.append({"role": "user", "content": data.prompt})
        elif data.prompt:
            self.opening.extend(
                {"role": m.role, "content": get_text_content(m.model_dump())} for m in data.prompt
            )
        self._to_env, self._to_run = asyncio.Queue(), asyncio.Queue()  # on this episode's loop
        self._runner = asyncio.create_task(self._drive())
        kind, text = await self._next()
        if kind != "turn":
            raise VerifiersError(f"{type(self.task).__name__}: run() ended before the model's first turn")
        if text:
            self.opening.append({"role": "user", "content": text})
        for message in self.opening:
            self._record(
                SystemMessage(content=get_text_content(message))
                if message["role"] == "system"
                else UserMessage(content=get_text_content(message))
            )
        return await super().initial_observation()

    def initial_messages(self) -> list[Message]:
        if not self.tools:
            return list(self.opening)
        system = [m for m in self.opening if m["role"] == "system"]
        rest = [m for m in self.opening if m["role"] != "system"]
        return [*self.tool_prompt(str(system[0]["content"]) if system else ""), *rest]

    async def on_message(self, message: Message) -> Reply:
        from verifiers.v1.types import AssistantMessage, ToolCall, ToolMessage, UserMessage

        calls = message.get("tool_calls") or []
        text = get_text_content(message)
        if calls:
            self._record(
                AssistantMessage(
                    content=text or None,
                    tool_calls=[
                        ToolCall(id=c.id or "", name=c.function.name, arguments=c.function.arguments)
                        for c in calls
                    ],
                ),
                sampled=True,
            )
            reply = await self.toolbox.answer(message)
            for answer in reply.messages:
                self._record(
                    ToolMessage(
                        tool_call_id=str(answer.get("tool_call_id", "")), content=get_text_content(answer)
                    )
                )
            return reply
        self._record(AssistantMessage(content=text), sampled=True)
        await self._to_run.put(text)
        kind, feedback = await self._next()
        if kind == "turn":
            self._record(UserMessage(content=feedback or NO_FEEDBACK))
            return Reply(messages=[{"role": "user", "content": feedback or NO_FEEDBACK}])
        metrics = {
            f"{METRIC_PREFIX}{k}": float(v.score) for k, v in self.trace.rewards.items() if v is not None
        }
        metrics.update(
            {f"{METRIC_PREFIX}{k}": float(v) for k, v in self.trace.metrics.items() if v is not None}
        )
        return Reply(done=True, reward=float(self.trace.reward), metrics=metrics)

    async def close(self) -> None:
        """End verifiers' side if the episode was cut (its pending ``turn`` sees a terminated
        segment), then stop it."""
        runner, self._runner = self._runner, None
        if runner is None or runner.done():
            return
        await self._to_run.put(None)
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(runner), timeout=2.0)
        if not runner.done():
            runner.cancel()


@dataclass(frozen=True)
class VerifiersGroup(EnvGroupBuilder):
    """``group_size`` episodes of one task of a verifiers environment (picklable: the
    environment is loaded in :meth:`make_envs`)."""

    env: str
    """``verifiers:<name>``, ``verifiers:<module>:<function>`` or the part after the prefix."""
    index: int = 0
    """Which task of the taskset."""
    group_size: int = 1
    """Envs per group."""
    max_turns: int = 16
    """TurnGym's turn budget (tool calls count)."""
    renderer_name: str | None = None
    """Renderer (default: the model's recommended one)."""
    model_name_for_tokenizer: str | None = None
    """Tokenizer's model (default: the embedded SmolLM2)."""
    _envs: list[VerifiersEnv] = field(default_factory=list, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_envs": []}

    def renderer(self) -> Renderer:
        """The policy's renderer."""
        from envs.interop._renderer import policy_renderer

        return policy_renderer(self.renderer_name, self.model_name_for_tokenizer)

    async def make_envs(self) -> Sequence[Env]:
        spec = load_spec(self.env)
        task = task_at(spec.taskset, self.index)
        renderer = self.renderer()
        limits = EnvLimits(max_turns=self.max_turns)
        envs = [VerifiersEnv(spec, task, renderer, limits=limits) for _ in range(self.group_size)]
        self._envs.extend(envs)
        return envs

    async def cleanup(self) -> None:
        envs, self._envs[:] = list(self._envs), []
        for env in envs:
            await env.close()

    def logging_tags(self) -> list[str]:
        return ["verifiers", self.env.removeprefix(PREFIX)]


def verifiers_source(env: str, group_size: int = 1, **fields: Any) -> Callable[[int], VerifiersGroup]:
    """An env factory for the checker, ``gym.make`` and the train CLIs: the group of task
    ``seed`` (``fields`` are :class:`VerifiersGroup` fields). A bad id fails here, in one line."""
    load_spec(env)
    return _Factory(env, group_size, fields)


@dataclass(frozen=True)
class _Factory:
    env: str
    group_size: int
    fields: dict[str, Any]

    def __call__(self, seed: int) -> VerifiersGroup:
        return VerifiersGroup(self.env, index=seed, group_size=self.group_size, **self.fields)


GYM_NAMESPACE = "verifiers"
"""Gymnasium namespace of registered verifiers environments (:func:`register_verifiers`)."""


def register_verifiers(names: Sequence[str] = tuple(ENVS)) -> list[str]:
    """Register verifiers environments as gymnasium ids (``verifiers/<name>``; idempotent) so
    that ``gymnasium.make("verifiers/calculator")`` gives a TurnGym ``TokenEnv`` over the adapter
    (keyword arguments of ``make`` go to :func:`verifiers_source`). Returns the ids."""
    import gymnasium as gym

    ids: list[str] = []
    for name in names:
        name = name.removeprefix(PREFIX)
        env_id = f"{GYM_NAMESPACE}/{name}"
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="envs.gym._registry:make_env",
                kwargs={"source": "envs.interop.verifiers:verifiers_source", "env": name},
            )
        ids.append(env_id)
    return ids
