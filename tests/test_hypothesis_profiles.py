"""The hypothesis profiles of tests/conftest.py do what they say: ``deep`` scales every property
test's examples (its own ``max_examples`` included), ``ci`` derandomizes the modules it says, and
every property-test module has a written decision."""

from __future__ import annotations

from pathlib import Path

from conftest import DEEP_FACTOR, EXPLORE, _derandomized, scaled_settings
from hypothesis import given, settings
from hypothesis import strategies as st

TESTS = Path(__file__).parent


def test_scaling_multiplies_a_tests_own_max_examples_and_hypothesis_runs_them():
    calls: list[int] = []

    @settings(max_examples=7, database=None)
    @given(st.integers())
    def prop(x: int) -> None:
        calls.append(x)

    assert scaled_settings(prop, DEEP_FACTOR)
    prop()
    # hypothesis runs exactly max_examples valid examples of an unbounded strategy, unless it
    # stops early because the space is exhausted (not the case for the integers)
    assert len(calls) == 7 * DEEP_FACTOR


def test_scaling_leaves_a_plain_function_alone():
    def plain() -> None: ...

    assert not scaled_settings(plain, DEEP_FACTOR)


def test_derandomized_tests_draw_the_same_examples_every_run():
    def run_once() -> list[int]:
        seen: list[int] = []

        @settings(max_examples=20, database=None)
        @given(st.integers(0, 10**9))
        def prop(x: int) -> None:
            seen.append(x)

        _derandomized(prop)
        prop()
        return seen

    first = run_once()
    assert first == run_once()
    assert len(set(first)) > 1


def test_every_property_test_module_has_a_written_decision_and_no_stale_one():
    with_properties = {
        path.stem
        for path in TESTS.glob("test_*.py")
        if "@given(" in path.read_text() and path.name != Path(__file__).name
    }
    assert with_properties <= set(EXPLORE), sorted(with_properties - set(EXPLORE))
    assert set(EXPLORE) <= with_properties, sorted(set(EXPLORE) - with_properties)


def test_make_test_deep_runs_the_property_tests_under_the_deep_profile():
    """The README's ``make test-deep`` (too long for CI itself) expands to the deep profile over
    the property tests: checked with ``make -n``."""
    import subprocess

    root = TESTS.parent
    assert "make test-deep" in (root / "README.md").read_text()
    out = subprocess.run(
        ["make", "-n", "test-deep"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert "HYPOTHESIS_PROFILE=deep" in out and "scripts/test.sh -m property" in out
