"""Grader: normalisation, equivalence on tricky pairs (equal and not equal), timeouts, non-blocking."""

from __future__ import annotations

import pickle
import time

import anyio
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from envs.math import Grader, GraderConfig, GradeStatus, normalize_answer
from envs.math._grading_core import fast_compare
from envs.math.grading import last_boxed

# (answer, reference): must grade as equal.
EQUAL = [
    ("1,000", "1000"),
    ("1{,}000", "1000"),
    ("12,345,678", "12345678"),
    ("\\frac12", "0.5"),
    ("\\frac{1}{2}", "1/2"),
    ("\\dfrac{3}{4}", "0.75"),
    ("\\tfrac{3}{4}", "\\frac34"),
    ("\\frac{6}{8}", "\\frac{3}{4}"),
    ("-\\frac{1}{2}", "-0.5"),
    ("\\frac{-1}{2}", "-\\frac12"),
    ("2.50", "2.5"),
    ("3.0", "3"),
    ("007", "7"),
    (".5", "0.5"),
    ("-0", "0"),
    ("+5", "5"),
    ("\u22123", "-3"),
    ("- 3", "-3"),
    ("50\\%", "50"),
    ("50%", "50"),
    ("\\$5.00", "5"),
    ("$12$", "12"),
    ("10 \\text{ cm}", "10"),
    ("10\\text{cm}", "10"),
    ("12 square feet", "12"),
    ("5 apples", "5"),
    ("90^\\circ", "90"),
    ("90^{\\circ}", "90"),
    ("x = 5", "5"),
    ("y=-2", "-2"),
    ("\\boxed{42}", "42"),
    ("\\left( 1, 2 \\right)", "(1,2)"),
    ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}"),
    ("\\sqrt{8}", "2\\sqrt{2}"),
    ("\\sqrt{12}", "2\\sqrt3"),
    ("x+1", "1+x"),
    ("2x+3", "3+2x"),
    ("(x+1)^2", "x^2+2x+1"),
    ("2^{10}", "1024"),
    ("\\frac{1}{3}", "0.333333"),
    ("\\pi/2", "\\frac{\\pi}{2}"),
    ("\\{1,2,3\\}", "\\{3,2,1\\}"),
    ("\\text{(B)}", "B"),
    ("(C)", "C"),
    ("\\text{Monday}", "monday"),
    ("1\\,000", "1000"),
    ("3\\!\\cdot\\!4", "12"),
    ("4.", "4"),
    ("1.000", "1"),
    ("\\frac{10}{4}", "2.5"),
    ("6/4", "3/2"),
    ("1e3", "1000"),
    ("\\displaystyle\\frac{2}{3}", "2/3"),
    ("5\\ \\text{dollars}", "5"),
    ("0.1", "\\frac{1}{10}"),
    ("2\\times 3", "6"),
]

# (answer, reference): must grade as NOT equal.
NOT_EQUAL = [
    ("3", "4"),
    ("-7", "7"),
    ("1000", "100"),
    ("1,001", "1000"),
    ("\\frac{1}{3}", "0.33"),
    ("0.5", "0.55"),
    ("2.5", "25"),
    ("\\frac{3}{4}", "\\frac{4}{3}"),
    ("\\sqrt{2}", "2"),
    ("\\sqrt{8}", "3\\sqrt{2}"),
    ("x+1", "x-1"),
    ("(x+1)^2", "x^2+1"),
    ("2x", "x^2"),
    ("\\pi", "3.14"),
    ("[1,2)", "[1,2]"),
    ("(1,2)", "(2,1)"),
    ("\\{1,2\\}", "\\{1,3\\}"),
    ("B", "C"),
    ("\\text{Monday}", "Tuesday"),
    ("-\\frac{1}{2}", "\\frac12"),
    ("2^{10}", "1000"),
    ("12", "1.2"),
    ("10", "100\\%"),
    ("0", "1"),
    ("e", "2.71"),
    ("", "5"),
    ("\\frac{1}{0}", "1"),
    ("x", "y"),
]


def _grade_all(pairs: list[tuple[str, str]], grader: Grader) -> list[tuple[str, str, bool, GradeStatus]]:
    async def main() -> list[tuple[str, str, bool, GradeStatus]]:
        await grader.warmup()
        out = []
        for a, b in pairs:
            r = await grader.grade(a, b)
            out.append((a, b, r.correct, r.status))
        return out

    return anyio.run(main)


@pytest.fixture(scope="module")
def grader():
    with Grader(GraderConfig(workers=2, timeout_s=10.0)) as g:
        yield g


def test_enough_tricky_pairs():
    assert len(EQUAL) + len(NOT_EQUAL) >= 60
    assert len(set(EQUAL) | set(NOT_EQUAL)) == len(EQUAL) + len(NOT_EQUAL)


def test_equal_pairs_grade_correct(grader):
    results = _grade_all(EQUAL, grader)
    wrong = [(a, b, s) for a, b, ok, s in results if not ok]
    assert not wrong, f"graded as different: {wrong}"


def test_equal_pairs_grade_correct_reversed(grader):
    results = _grade_all([(b, a) for a, b in EQUAL], grader)
    wrong = [(a, b, s) for a, b, ok, s in results if not ok]
    assert not wrong, f"graded as different: {wrong}"


def test_unequal_pairs_grade_wrong(grader):
    results = _grade_all(NOT_EQUAL, grader)
    right = [(a, b, s) for a, b, ok, s in results if ok]
    assert not right, f"graded as equal: {right}"


def test_unequal_pairs_grade_wrong_reversed(grader):
    results = _grade_all([(b, a) for a, b in NOT_EQUAL], grader)
    right = [(a, b, s) for a, b, ok, s in results if ok]
    assert not right, f"graded as equal: {right}"


def test_statuses_are_counted(grader):
    before = grader.stats
    results = _grade_all([("1,000", "1000"), ("x+1", "1+x"), ("3", "4")], grader)
    after = grader.stats
    assert [s for *_, s in results] == [GradeStatus.FAST, GradeStatus.SYMBOLIC, GradeStatus.FAST]
    assert after.graded - before.graded == 3
    assert after.fast - before.fast == 2
    assert after.symbolic - before.symbolic == 1
    assert after.correct - before.correct == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so \\boxed{\\frac{1}{2}} done", "\\frac{1}{2}"),
        ("\\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{a{b}c}", "a{b}c"),
        ("\\boxed 7 is it", "7"),
        ("\\fbox{9}", "9"),
        ("no box here", None),
        ("\\boxed{unclosed", None),
    ],
)
def test_extract_boxed(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("\\dfrac{3}{4}", "3/4"),
        ("1,234,567.50", "1234567.5"),
        ("\\$ 1{,}000", "1000"),
        ("x = \\left(2\\right)", "(2)"),
        ("7 \\text{ meters}", "7"),
        ("\\pi r", "\\pi r"),
    ],
)
def test_normalize_answer(raw, canonical):
    assert normalize_answer(raw) == canonical


def test_too_long_and_missing_answers_are_wrong_without_a_worker():
    async def main():
        with Grader(GraderConfig(max_chars=50)) as g:
            long = await g.grade("1" * 51, "1" * 51)
            missing = await g.grade(None, "5")
            assert g._idle == [] and g._booting == []  # no worker was needed
            return long, missing

    long, missing = anyio.run(main)
    assert (long.correct, long.status) == (False, GradeStatus.TOO_LONG)
    assert (missing.correct, missing.status) == (False, GradeStatus.FAST)


POWER_TOWER = "2^{2^{2^{2^{2^{2}}}}}"


@pytest.mark.parametrize("soft", [0.8, 0.0], ids=["soft-interrupt", "hard-kill"])
def test_power_tower_is_cut_off_and_the_grader_recovers(soft):
    """A hung sympy check is cut off by the timeout, scored wrong and counted; the next
    grading works. ``soft=0`` disables the worker's own alarm so the parent must kill it."""

    async def main():
        with Grader(GraderConfig(workers=1, timeout_s=1.0, soft_timeout_fraction=soft)) as g:
            await g.warmup()
            t0 = time.monotonic()
            bad = await g.grade(POWER_TOWER, "1")
            elapsed = time.monotonic() - t0
            good = await g.grade("x+1", "1+x")
            return bad, elapsed, good, g.stats

    bad, elapsed, good, stats = anyio.run(main)
    assert (bad.correct, bad.status) == (False, GradeStatus.TIMEOUT)
    assert elapsed < 5.0  # generous: the timeout is 1 s
    assert stats.timed_out == 1
    if soft == 0.0:
        assert stats.restarts == 1
    assert good.correct and good.status is GradeStatus.SYMBOLIC


def test_event_loop_keeps_running_during_a_hung_grading():
    """While a pathological check runs, other tasks keep getting scheduled."""

    async def main():
        ticks = 0

        async def ticker(stop: anyio.Event):
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await anyio.sleep(0.01)

        with Grader(GraderConfig(workers=1, timeout_s=1.0, soft_timeout_fraction=0.0)) as g:
            await g.warmup()
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(ticker, stop)
                result = await g.grade(POWER_TOWER, "1")
                stop.set()
            return result, ticks

    result, ticks = anyio.run(main)
    assert result.status is GradeStatus.TIMEOUT
    assert ticks >= 20  # ~100 expected in 1 s; a blocked loop gives 1


def test_concurrent_gradings_queue_on_a_small_pool():
    async def main():
        with Grader(GraderConfig(workers=2, timeout_s=10.0)) as g:
            results: list[bool] = [False] * 12

            async def one(i: int):
                results[i] = (await g.grade(f"x+{i}", f"{i}+x")).correct

            async with anyio.create_task_group() as tg:
                for i in range(12):
                    tg.start_soon(one, i)
            return results, g.stats

    results, stats = anyio.run(main)
    assert all(results)
    assert stats.symbolic + stats.fast == 12


def test_a_worker_that_died_while_idle_is_replaced():
    async def main():
        with Grader(GraderConfig(workers=1, timeout_s=10.0)) as g:
            await g.warmup()
            (worker,) = g._idle
            worker.proc.kill()
            worker.proc.wait()
            result = await g.grade("x+1", "1+x")
            return result, g.stats

    result, stats = anyio.run(main)
    assert result.correct and result.status is GradeStatus.SYMBOLIC
    assert stats.restarts == 1 and stats.errors == 0


def test_grader_pickles_as_its_config_and_close_is_final():
    g = Grader(GraderConfig(workers=3, timeout_s=1.5))
    copy = pickle.loads(pickle.dumps(g))
    assert copy.config == g.config and copy is not g
    g.close()
    copy.close()
    with pytest.raises(RuntimeError, match="closed"):
        anyio.run(g.grade, "1", "1")


def test_bad_config_is_one_clear_error():
    with pytest.raises(ValueError, match="workers must be >= 1"):
        GraderConfig(workers=0)


# --- properties of the in-process fast path (no worker involved) -----------------------------


def _variants(n: int) -> list[str]:
    return [
        f"{n:,}",
        f"{n}.0",
        f"{n}.00",
        f"\\boxed{{{n}}}",
        f"${n}$",
        f"x = {n}",
        f"{n} \\text{{ cm}}",
        f"{n}\\%",
    ]


@given(n=st.integers(-(10**15), 10**15))
def test_formatting_variants_of_an_integer_are_equal_in_process(n):
    for variant in _variants(n):
        assert fast_compare(normalize_answer(variant), normalize_answer(str(n))) is True, variant


@given(a=st.integers(-(10**9), 10**9), b=st.integers(-(10**9), 10**9))
def test_different_integers_are_wrong_in_process(a, b):
    assume(a != b)
    assert fast_compare(normalize_answer(f"{a:,}"), normalize_answer(str(b))) is False


@given(p=st.integers(-1000, 1000), q=st.integers(1, 1000))
def test_latex_fraction_equals_its_slash_form(p, q):
    assert fast_compare(normalize_answer(f"\\dfrac{{{p}}}{{{q}}}"), normalize_answer(f"{p}/{q}")) is True


@given(text=st.text(max_size=300))
def test_normalize_never_raises_and_is_bounded(text):
    out = normalize_answer(text)
    assert isinstance(out, str) and len(out) <= 3 * len(text) + 2


def test_a_forked_child_gets_its_own_workers():
    """After fork the child must not talk to the parent's workers (their pipes are shared)."""
    import multiprocessing

    with Grader(GraderConfig(workers=1, timeout_s=10.0)) as g:
        anyio.run(g.warmup)
        parent_pid = g._idle[0].proc.pid

        def child(conn):
            result = anyio.run(g.grade, "x+1", "1+x")
            conn.send((result.correct, [w.proc.pid for w in g._idle]))
            g.close()

        ctx = multiprocessing.get_context("fork")
        here, there = ctx.Pipe()
        proc = ctx.Process(target=child, args=(there,))
        proc.start()
        correct, child_pids = here.recv()
        proc.join(30)
        assert correct and parent_pid not in child_pids
        assert anyio.run(g.grade, "x+2", "2+x").correct  # the parent's worker still works
        assert g._idle[0].proc.pid == parent_pid


def test_extract_boxed_gives_up_on_many_unclosed_boxes():
    assert last_boxed("\\boxed{1} " + "\\boxed{" * 5000) is None  # bounded work, no answer
    assert last_boxed("\\boxed{1} " + "\\boxed{" * 3) == "1"
