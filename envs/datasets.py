"""The one dataset base of TurnGym: groups served in batches, each group a pure function of its index.

- :class:`GroupDataset`: a ``tinker_cookbook.rl.types.RLDataset`` of ``n_groups`` groups in
  batches of ``batch_size`` (the last batch may be shorter). A subclass says only how to build
  group ``k`` (:meth:`GroupDataset.group`); the base does the batching, the bounds check and
  ``len``. Because group ``k`` depends only on ``k`` (and the dataset's own fields), a resumed run
  that asks for batch ``i`` again gets the same groups. The included datasets (math, Twenty
  Questions, judge) are ``GroupDataset`` s.
- :class:`SeededDataset`: the generic one for your own env: group ``k`` is ``make_group(rng)``
  with an RNG seeded from ``(seed, k)``.
"""

from __future__ import annotations

import math
import random
from abc import abstractmethod
from collections.abc import Callable, Sequence

from tinker_cookbook.rl.types import EnvGroupBuilder, RLDataset


class GroupDataset(RLDataset):
    """``n_groups`` groups in batches of ``batch_size``; batch ``i`` holds groups
    ``[i * batch_size, (i + 1) * batch_size)`` (the last batch may be shorter).

    Subclasses implement :meth:`group`, a pure function of the group's index.

    Args:
        batch_size: groups per batch (>= 1).
        n_groups: groups in the dataset (>= 0).
    """

    def __init__(self, batch_size: int, n_groups: int):
        if batch_size < 1 or n_groups < 0:
            raise ValueError(f"batch_size must be >= 1 and n_groups >= 0, got {batch_size}, {n_groups}")
        self.batch_size = batch_size
        self.n_groups = n_groups

    @abstractmethod
    def group(self, index: int) -> EnvGroupBuilder:
        """The builder of group ``index`` (``0 <= index < n_groups``); the same every call."""

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        """Groups ``[index * batch_size, (index + 1) * batch_size)`` (fewer in the last batch)."""
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} is outside the dataset's {len(self)} batches")
        start = index * self.batch_size
        return [self.group(k) for k in range(start, min(start + self.batch_size, self.n_groups))]

    def __len__(self) -> int:
        return math.ceil(self.n_groups / self.batch_size)


class SeededDataset(GroupDataset):
    """``n_batches`` batches of ``batch_size`` groups, each made by ``make_group(rng)``.

    Args:
        make_group: builds one (picklable) ``EnvGroupBuilder`` from a ``random.Random``.
        batch_size: groups per batch.
        n_batches: number of batches (``len(dataset)``).
        seed: base seed; group ``k`` uses an RNG seeded from ``(seed, k)``.
    """

    def __init__(
        self,
        make_group: Callable[[random.Random], EnvGroupBuilder],
        batch_size: int,
        n_batches: int,
        seed: int = 0,
    ):
        if batch_size < 1 or n_batches < 0:
            raise ValueError(f"batch_size must be >= 1 and n_batches >= 0, got {batch_size}, {n_batches}")
        super().__init__(batch_size, batch_size * n_batches)
        self.make_group = make_group
        self.n_batches = n_batches
        self.seed = seed

    def group(self, index: int) -> EnvGroupBuilder:
        """``make_group`` of an RNG seeded from ``(seed, index)``."""
        return self.make_group(random.Random(f"{self.seed}:{index}"))
