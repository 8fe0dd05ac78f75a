"""The completer registry: ``"<kind>:<argument>"`` specs -> live ``MessageCompleter`` s.

Built-in kinds: ``local`` (the embedded backend), ``tinker`` (a Tinker sampling client),
``openai`` (an OpenAI-compatible chat endpoint) and ``rules`` (a programmatic pairwise judge:
:mod:`envs.judge.rules`); :func:`register_completer` adds more. The
scripted test judges are not a built-in kind: importing :mod:`envs.judge.testing` registers
``scripted``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, Renderer, get_text_content

from envs.judge.config import JudgeConfig

CompleterFactory = Callable[[JudgeConfig, str], MessageCompleter]
"""Builds a completer from a config and the argument after ``"<kind>:"`` in its spec."""

_FACTORIES: dict[str, CompleterFactory] = {}


def register_completer(kind: str, factory: CompleterFactory, *, replace: bool = False) -> None:
    """Make ``"<kind>"`` / ``"<kind>:<arg>"`` specs resolve to ``factory(config, arg)``."""
    if not kind or ":" in kind:
        raise ValueError(f"completer kind must be a non-empty name without ':', got {kind!r}")
    if kind in _FACTORIES and not replace:
        raise ValueError(f"completer kind {kind!r} is already registered (pass replace=True)")
    _FACTORIES[kind] = factory


def make_completer(config: JudgeConfig) -> MessageCompleter:
    """Build the live completer a config describes."""
    kind, _, arg = config.completer.partition(":")
    factory = _FACTORIES.get(kind)
    if factory is None:
        known = ", ".join(sorted(_FACTORIES))
        hint = " (the scripted test judges: import envs.judge.testing)" if kind == "scripted" else ""
        raise ValueError(
            f"unknown completer kind {kind!r} in {config.completer!r}; known kinds: {known}{hint}"
        )
    return factory(config, arg)


_LOCAL_SERVICE: Any = None
_LOCAL_LOCK = threading.Lock()


class PrefilledSamplingCompleter(MessageCompleter):
    """Samples a reply that starts with ``prefix`` (prefilled after the generation prompt).

    Small judges rarely follow an output format; prefilling ``"Score:"`` makes the model only
    write the number. The returned message's content includes the prefix.

    Args:
        sampling_client: a ``tinker.SamplingClient`` or ``backend.LocalSamplingClient``.
        renderer: renders the messages and parses the sampled tokens.
        max_tokens: tokens sampled after the prefix.
        temperature: sampling temperature.
        prefix: text the reply starts with.
    """

    def __init__(
        self, sampling_client: Any, renderer: Renderer, *, max_tokens: int, temperature: float, prefix: str
    ):
        self.sampling_client = sampling_client
        self.renderer = renderer
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.prefix = prefix
        self._prefix_tokens = list(renderer.tokenizer.encode(prefix, add_special_tokens=False))

    async def __call__(self, messages: list[Message]) -> Message:
        import tinker

        prompt = self.renderer.build_generation_prompt(messages).to_ints() + self._prefix_tokens
        response = await self.sampling_client.sample_async(
            prompt=tinker.ModelInput.from_ints(prompt),
            num_samples=1,
            sampling_params=tinker.SamplingParams(
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                stop=self.renderer.get_stop_sequences(),
            ),
        )
        parsed, _ = self.renderer.parse_response(list(response.sequences[0].tokens))
        return {"role": "assistant", "content": self.prefix + get_text_content(parsed)}


def _sampling_completer(config: JudgeConfig, model: str, sampling_client: Any) -> MessageCompleter:
    from renderers_ext import load_renderer

    renderer = load_renderer(config.renderer_name, model)  # None: the model's recommended renderer
    if config.reply_prefix:
        return PrefilledSamplingCompleter(
            sampling_client,
            renderer,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            prefix=config.reply_prefix,
        )
    from tinker_cookbook.completers import TinkerMessageCompleter  # either backend's client

    return TinkerMessageCompleter(
        sampling_client, renderer, max_tokens=config.max_tokens, temperature=config.temperature
    )


def _local_factory(config: JudgeConfig, model: str) -> MessageCompleter:
    from backend import SMOLLM2, make_service_client

    global _LOCAL_SERVICE
    model = model or SMOLLM2
    with _LOCAL_LOCK:
        if _LOCAL_SERVICE is None:
            _LOCAL_SERVICE = make_service_client("local")
        service = _LOCAL_SERVICE
    sampling_client = service.create_sampling_client(base_model=model).result()
    return _sampling_completer(config, model, sampling_client)


def _tinker_factory(config: JudgeConfig, model: str) -> MessageCompleter:
    import tinker

    if not model:
        raise ValueError("a tinker judge needs a model: 'tinker:<base model or tinker:// path>'")
    service = tinker.ServiceClient(base_url=config.base_url)
    if model.startswith("tinker://"):
        sampling_client = service.create_sampling_client(model_path=model)
        base_model = sampling_client.get_base_model()
    else:
        sampling_client = service.create_sampling_client(base_model=model)
        base_model = model
    return _sampling_completer(config, base_model, sampling_client)


def _openai_factory(config: JudgeConfig, model: str) -> MessageCompleter:
    from completers.openai_compat import OpenAICompatibleMessageCompleter

    if not model:
        raise ValueError("an openai judge needs a model: 'openai:<model name>'")
    return OpenAICompatibleMessageCompleter(
        model=model,
        base_url=config.base_url or "https://api.openai.com/v1",
        api_key_env=config.api_key_env,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        timeout_s=config.timeout_s,
    )


def _rules_factory(config: JudgeConfig, checks: str) -> MessageCompleter:
    from envs.judge.rules import RuleJudge  # imports the pairwise prompt tags: not at module level

    return RuleJudge.from_spec(checks)


def _rm_factory(config: JudgeConfig, path: str) -> MessageCompleter:
    from envs.judge.reward_model import rm_judge  # the cookbook's preference model: not at module level

    return rm_judge(config, path)


register_completer("local", _local_factory)
register_completer("rm", _rm_factory)
register_completer("tinker", _tinker_factory)
register_completer("openai", _openai_factory)
register_completer("rules", _rules_factory)
