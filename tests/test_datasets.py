"""One dataset base: ``envs.GroupDataset`` (batching, bounds, ``len``) under every included dataset."""

from __future__ import annotations

import pickle
import random
from dataclasses import dataclass

import pytest
from tinker_cookbook.rl.types import EnvGroupBuilder

from envs import GroupDataset, SeededDataset


@dataclass(frozen=True)
class SyntheticGroup(EnvGroupBuilder):
    size: int

    async def make_envs(self):
        return []


def _make(rng: random.Random) -> SyntheticGroup:
    return SyntheticGroup(size=rng.randint(1, 1000))


def test_batches_are_consecutive_groups_and_the_last_may_be_short() -> None:
    class Numbered(GroupDataset):
        def group(self, index: int) -> SyntheticGroup:
            return SyntheticGroup(size=index + 1)

    data = Numbered(batch_size=3, n_groups=7)
    assert len(data) == 3
    assert [[g.size for g in data.get_batch(i)] for i in range(3)] == [[1, 2, 3], [4, 5, 6], [7]]  # type: ignore[attr-defined]
    with pytest.raises(IndexError, match="outside the dataset's 3 batches"):
        data.get_batch(3)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        Numbered(batch_size=0, n_groups=1)


def test_seeded_dataset_group_k_depends_only_on_seed_and_k() -> None:
    a = SeededDataset(_make, batch_size=4, n_batches=3, seed=5)
    b = SeededDataset(_make, batch_size=2, n_batches=6, seed=5)  # other batching, same groups
    flat_a = [g.size for i in range(3) for g in a.get_batch(i)]  # type: ignore[attr-defined]
    flat_b = [g.size for i in range(6) for g in b.get_batch(i)]  # type: ignore[attr-defined]
    assert flat_a == flat_b
    other = SeededDataset(_make, batch_size=4, n_batches=3, seed=6)
    assert [g.size for i in range(3) for g in other.get_batch(i)] != flat_a  # type: ignore[attr-defined]
    pickle.dumps(a.get_batch(0))


def test_the_included_datasets_share_the_base() -> None:
    from envs.judge.builders import JudgeDataset
    from envs.math.builders import MathRLDataset
    from envs.twenty_questions import TwentyQuestionsDataset

    for cls in (JudgeDataset, MathRLDataset, TwentyQuestionsDataset, SeededDataset):
        assert issubclass(cls, GroupDataset)
        assert "get_batch" not in vars(cls) and "__len__" not in vars(cls)
