"""Shared test set-up: offline, deterministic, hypothesis profiles.

``HYPOTHESIS_PROFILE=ci`` (set by .ci/run) runs every property test with at least 200 examples.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "dev",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def tokenizer():
    """The embedded SmolLM2 tokenizer (byte-level fixed)."""
    from backend.model import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def renderer():
    """The ``qwen3_instruct`` renderer on the embedded tokenizer (ChatML, extension property)."""
    from renderers_ext import get_renderer

    return get_renderer("qwen3_instruct")
