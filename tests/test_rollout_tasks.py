"""rollout._tasks.Slots: a group's slots on plain asyncio tasks, with anyio task-group semantics."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from rollout._tasks import Slots


def run(main):
    anyio.run(main, backend="asyncio")


def test_all_slots_run_and_slot_zero_runs_in_the_calling_task():
    async def main():
        host = asyncio.current_task()
        seen: dict[int, bool] = {}

        async def fn(i: int) -> None:
            await anyio.sleep(0.001 * (3 - i))
            seen[i] = asyncio.current_task() is host

        before = len(asyncio.all_tasks())
        await Slots().run(3, fn)
        assert seen == {0: True, 1: False, 2: False}
        assert len(asyncio.all_tasks()) == before

    run(main)


def test_without_first_inline_every_slot_is_a_task_of_its_own():
    async def main():
        host = asyncio.current_task()
        tasks: list[object] = []

        async def fn(i: int) -> None:
            tasks.append(asyncio.current_task())

        await Slots().run(3, fn, first_inline=False)
        assert len(set(map(id, tasks))) == 3 and host not in tasks

    run(main)


def test_cancel_from_a_slot_cancels_every_slot_and_waits_for_them():
    async def main():
        slots = Slots()
        finished: list[int] = []

        async def fn(i: int) -> None:
            try:
                if i == 2:
                    await anyio.sleep(0.01)
                    slots.cancel()
                    return
                await anyio.sleep_forever()
            finally:
                finished.append(i)

        before = len(asyncio.all_tasks())
        with anyio.fail_after(5):
            await slots.run(4, fn)
        assert sorted(finished) == [0, 1, 2, 3]
        assert len(asyncio.all_tasks()) == before

    run(main)


def test_cancellation_is_level_triggered_and_shields_hold():
    async def main():
        slots = Slots()
        log: list[str] = []

        async def fn(i: int) -> None:
            if i == 0:
                await anyio.sleep(0.01)
                slots.cancel()
                return
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.03)  # not interrupted by the cancel
                log.append("shielded done")
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                log.append("cancelled once")
            await anyio.sleep_forever()  # cancelled again (level-triggered), like an anyio task group

        with anyio.fail_after(5):
            await slots.run(2, fn)
        assert log == ["shielded done", "cancelled once"]

    run(main)


def test_an_outer_cancellation_reaches_every_slot_and_leaves_no_task():
    async def main():
        cleaned: list[int] = []

        async def fn(i: int) -> None:
            try:
                await anyio.sleep_forever()
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(0.005)
                cleaned.append(i)

        before = len(asyncio.all_tasks())
        with anyio.move_on_after(0.02) as scope:
            await Slots().run(3, fn)
        assert scope.cancelled_caught
        assert sorted(cleaned) == [0, 1, 2]
        assert len(asyncio.all_tasks()) == before

    run(main)


def test_a_slot_raising_cancels_the_others_and_raises_a_group():
    class Boom(BaseException):
        pass

    async def main():
        cancelled: list[int] = []

        async def fn(i: int) -> None:
            if i == 1:
                await anyio.sleep(0.005)
                raise Boom()
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.append(i)
                raise

        with anyio.fail_after(5), pytest.raises(BaseExceptionGroup) as info:
            await Slots().run(3, fn)
        assert [type(e) for e in info.value.exceptions] == [Boom]
        assert sorted(cancelled) == [0, 2]

    run(main)
