"""Shared test set-up: offline, deterministic where it should be, hypothesis profiles.

Hypothesis profiles (``HYPOTHESIS_PROFILE``):

- ``dev`` (default): 200 examples per property test (or the test's own ``max_examples``),
  fresh random examples each run.
- ``ci`` (set by ``.ci/run``): the same counts; each property test draws fresh examples or runs
  derandomized according to :data:`EXPLORE` below.
- ``deep`` (``make test-deep``): every property test with ten times its usual examples (tests
  that set their own ``max_examples`` scale too), fresh random examples. Not part of CI; run it
  before saying an issue that touches a property-tested module is resolved.

Which property tests may draw new examples on every CI run (the decision, per test module; a
test can override its module with ``@pytest.mark.explore`` or ``@pytest.mark.derandomize``):

- **explore** (fresh examples every CI run: finds bugs, and a failure is always a real bug in
  our own pure code, never the machine): the prefix/extension invariants of the renderers, the
  env core, the rollout engine's datums, the math generator/calculator and the Twenty Questions
  game logic. Their inputs are small and their checks involve no clock, process or model.
- **derandomize** (the same examples every CI run, seeded by the test's name: stable): tests
  whose properties run real event loops with timing checks, worker processes or third-party
  components (the conformance checker, the gym adapter, the judge's concurrency and
  cache, the math grader's worker processes, the tokenizer round trip, parity with the
  cookbook's rollout). A bug there is sought by ``deep``, which explores them all.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
from hypothesis import HealthCheck, settings

from backend.model import SMOLLM2, register_tokenizers

# This process runs envs of the embedded models, like the training loop or a rollout worker:
# their tokenizers resolve (and their renderers unpickle) offline. Nothing registers on import.
register_tokenizers()

_COMMON = {
    "max_examples": 200,
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("ci", print_blob=True, **_COMMON)
settings.register_profile("dev", **_COMMON)
settings.register_profile("deep", print_blob=True, **_COMMON)  # scaled per test below
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
settings.load_profile(PROFILE)

DEEP_FACTOR = 10
"""``deep`` multiplies every property test's example count by this."""

EXPLORE: dict[str, bool] = {
    # explore: pure invariants of our own code
    "test_renderers_properties": True,
    "test_renderers_ext": True,
    "test_env_core_properties": True,
    "test_rollout_properties": True,
    "test_rollout_datums": True,
    "test_rollout_accounting": True,  # the engine's extension accounting vs the tracker replayed
    "test_compaction_engine": True,
    "test_math_data": True,
    "test_code_env": True,  # CodeEnv's books and prefix across tool turns, with an in-process sandbox double
    "test_math_calculator": True,
    "test_twenty_questions": True,
    "test_seats_properties": True,  # the multi-seat loop on drawn schedules (short deadlines, no model)
    # derandomize: event loops with timing checks, processes, third-party components
    "test_checker": False,
    "test_gym": False,
    "test_judge": False,
    "test_math_grading": False,
    "test_model_loader": False,
    "test_rollout_parity": False,
    "test_backend_prefix": False,  # the tiny model's shared-prefix pass vs the padded one (float tolerances)
}
"""Per test module: may its property tests draw new examples on every CI run (see the module
docstring)? A module with property tests that is missing here fails the collection (in every
profile), so the decision is always written down."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "property: a hypothesis property test (added automatically)")
    config.addinivalue_line("markers", "explore: draw fresh hypothesis examples in CI (overrides EXPLORE)")
    config.addinivalue_line("markers", "derandomize: fixed hypothesis examples in CI (overrides EXPLORE)")


def scaled_settings(test: object, factor: int) -> bool:
    """Multiply a ``@given`` test's ``max_examples`` by ``factor`` in place; False if ``test`` is
    not a hypothesis test. Uses hypothesis' per-test settings attribute (pinned by
    ``tests/test_hypothesis_profiles.py``)."""
    current = getattr(test, "_hypothesis_internal_use_settings", None)
    if current is None or not hasattr(test, "hypothesis"):
        return False
    test._hypothesis_internal_use_settings = settings(  # type: ignore[attr-defined]
        current, max_examples=current.max_examples * factor
    )
    return True


def _derandomized(test: object) -> None:
    current = test._hypothesis_internal_use_settings  # type: ignore[attr-defined]
    test._hypothesis_internal_use_settings = settings(current, derandomize=True, database=None)  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    done: set[int] = set()
    for item in items:
        test = getattr(item, "obj", None)
        if test is None or not hasattr(test, "hypothesis"):
            continue
        item.add_marker(pytest.mark.property)
        if id(test) in done:  # parametrized: one function, several items
            continue
        done.add(id(test))
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        if item.get_closest_marker("explore"):
            explore = True
        elif item.get_closest_marker("derandomize"):
            explore = False
        elif module in EXPLORE:
            explore = EXPLORE[module]
        else:  # in every profile, so the decision is made before the code reaches CI
            raise pytest.UsageError(
                f"{item.nodeid}: property-test module {module!r} is not in tests/conftest.py EXPLORE "
                "(decide whether CI may draw new examples for it)"
            )
        if PROFILE == "deep":
            scaled_settings(test, DEEP_FACTOR)
        elif PROFILE == "ci" and not explore:
            _derandomized(test)


@pytest.fixture(scope="session")
def tokenizer():
    """The embedded SmolLM2 tokenizer (byte-level fixed)."""
    from backend.model import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def renderer():
    """The ``qwen3_instruct`` renderer on the embedded tokenizer (ChatML, extension property)."""
    from renderers_ext import load_renderer

    return load_renderer("qwen3_instruct", SMOLLM2)
