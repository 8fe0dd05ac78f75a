"""Run tinker-cookbook entry points unchanged on the embedded backend, offline.

The cookbook's trainers (``rl.train.main``, ``supervised.train.main``,
``preference.train_dpo.main``, its evaluators and recipes) build their own
``tinker.ServiceClient(...)``. Inside :func:`use_local_backend` that name is the embedded
backend's service client, whatever ``base_url`` or API key the code passes, so they run on the
local model with no key and no network::

    import asyncio
    from backend.offline import use_local_backend
    from tinker_cookbook.rl import train

    with use_local_backend(root="runs/ckpt"):
        asyncio.run(train.main(config))  # config.model_name = "HuggingFaceTB/SmolLM2-135M-Instruct"

or, for a module with a command line (a cookbook recipe, or your own script)::

    python -m backend.offline [--root DIR] [--compute-dtype bfloat16] MODULE [key=value ...]

While active:

- ``tinker.ServiceClient`` (and every already-imported module's own ``ServiceClient`` name
  bound to it, e.g. after ``from tinker import ServiceClient``) is a subclass of
  :class:`~backend.LocalServiceClient` taking tinker's constructor arguments; every service
  client made inside shares ``root`` for its ``local://`` checkpoints;
- the local models' tokenizers are registered with ``tinker_cookbook.tokenizer_utils``, so the
  cookbook's ``get_tokenizer`` never reaches the Hugging Face hub;
- ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` are ``1``.

On exit every one of these is put back as it was (also after an exception). Calls the local
clients cannot serve raise :class:`~backend.UnsupportedCallError` naming the tinker method.
Only the base models the local backend serves (``backend.KNOWN_MODELS``) can be trained.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import runpy
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import tinker

from backend.local._service import LocalServiceClient
from backend.local._surface import TINKER_CLASSES
from backend.model import register_tokenizers

__all__ = ["OFFLINE_ENV", "LocalTinkerServiceClient", "main", "use_local_backend"]

OFFLINE_ENV: Mapping[str, str] = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
"""Environment set while :func:`use_local_backend` is active."""

_REAL_SERVICE_CLIENT: type = TINKER_CLASSES["ServiceClient"]
_lock = threading.RLock()


class LocalTinkerServiceClient(LocalServiceClient):
    """What ``tinker.ServiceClient`` is inside :func:`use_local_backend`: a local service client
    that accepts tinker's constructor arguments (``user_metadata``, ``project_id``,
    ``display_name``, ``base_url``, ``api_key``, ...) and ignores where they point."""

    _root: Path | str | None = None
    _options: Mapping[str, Any] = {}

    def __init__(
        self,
        user_metadata: dict[str, str] | None = None,
        project_id: str | None = None,
        *,
        display_name: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        **ignored: Any,
    ) -> None:
        super().__init__(self._root, **self._options)
        self.session_user_metadata = dict(user_metadata or {})
        self.display_name = display_name


def _modules_binding(obj: object) -> list[ModuleType]:
    """Loaded modules (other than tinker's own) whose global ``ServiceClient`` is ``obj``."""
    out = []
    for module in list(sys.modules.values()):
        if module is None or module is tinker:
            continue
        try:
            if module.__dict__.get("ServiceClient") is obj:
                out.append(module)
        except AttributeError:  # exotic module objects without a dict
            continue
    return out


def _unregister(names: list[str]) -> None:
    from tinker_cookbook import tokenizer_utils

    with _lock:
        for name in names:
            tokenizer_utils.unregister_tokenizer(name)


@contextlib.contextmanager
def use_local_backend(
    root: str | Path | None = None,
    *,
    compute_dtype: str = "float32",
    max_tokens_per_pass: int = 1024,
    prefix_cache_tokens: int = 32768,
    max_batch_size: int = 64,
    lora_alpha: int | None = None,
) -> Iterator[type[LocalTinkerServiceClient]]:
    """Make ``tinker.ServiceClient`` the embedded backend for the duration of the block.

    Args:
        root: folder of the ``local://`` checkpoints of every service client made inside
            (default ``$TURNGYM_CHECKPOINTS`` or ``<turngym cache>/checkpoints``).
        compute_dtype / max_tokens_per_pass / prefix_cache_tokens / max_batch_size / lora_alpha:
            passed to each :class:`~backend.LocalServiceClient`.

    Yields the class standing in for ``tinker.ServiceClient``. Blocks may nest (the inner one's
    settings apply inside it); each restores what it replaced.
    """
    options = {
        "compute_dtype": compute_dtype,
        "max_tokens_per_pass": max_tokens_per_pass,
        "prefix_cache_tokens": prefix_cache_tokens,
        "max_batch_size": max_batch_size,
        "lora_alpha": lora_alpha,
    }
    # The embedded tokenizers, registered first (a LocalServiceClient registers them too) so that the
    # block unregisters exactly those it added; then the options are validated before anything else.
    with _lock:
        added = register_tokenizers()
    try:
        LocalServiceClient(root, **options)
    except BaseException:
        _unregister(added)
        raise
    stand_in = cast(
        type[LocalTinkerServiceClient],
        type("ServiceClient", (LocalTinkerServiceClient,), {"_root": root, "_options": options}),
    )
    stand_in.__module__ = __name__
    stand_in.__qualname__ = "LocalTinkerServiceClient"
    stand_in.__doc__ = LocalTinkerServiceClient.__doc__
    with _lock:
        previous = tinker.ServiceClient
        rebound = _modules_binding(previous)
        tinker.ServiceClient = stand_in  # type: ignore[misc]
        for module in rebound:
            module.__dict__["ServiceClient"] = stand_in
        saved_env = {k: os.environ.get(k) for k in OFFLINE_ENV}
        os.environ.update(OFFLINE_ENV)
    try:
        yield stand_in
    finally:
        _unregister(added)
        with _lock:
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            tinker.ServiceClient = previous  # type: ignore[misc]
            # Modules imported inside the block may have bound the stand-in too.
            for module in _modules_binding(stand_in):
                module.__dict__["ServiceClient"] = previous


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m backend.offline [options] MODULE [args...]``: run ``MODULE`` as ``__main__``
    inside :func:`use_local_backend`; returns its exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m backend.offline",
        description="Run a tinker-cookbook entry point (any module run as __main__) on the embedded "
        "local backend, offline. Arguments after MODULE are the module's own.",
    )
    parser.add_argument("--root", default=None, help="folder of local:// checkpoints")
    parser.add_argument("--compute-dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--tokens-per-pass", type=int, default=1024, help="training tokens per pass")
    parser.add_argument("module", help="module to run, e.g. tinker_cookbook.recipes.sl_loop")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the module's arguments")
    ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        found = importlib.util.find_spec(ns.module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        print(f"python -m backend.offline: error: no module named {ns.module!r}", file=sys.stderr)
        return 2
    saved_argv = sys.argv
    sys.argv = [ns.module, *ns.args]
    try:
        with use_local_backend(
            ns.root, compute_dtype=ns.compute_dtype, max_tokens_per_pass=ns.tokens_per_pass
        ):
            runpy.run_module(ns.module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        sys.argv = saved_argv
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
