"""Generic datasets of env groups, for envs whose problems are drawn from a seeded generator.

:class:`SeededDataset` is a ``tinker_cookbook.rl.types.RLDataset`` whose batch ``i`` depends only
on ``(seed, i)``: a resumed run that asks for batch ``i`` again gets the same groups.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from tinker_cookbook.rl.types import EnvGroupBuilder, RLDataset


class SeededDataset(RLDataset):
    """``n_batches`` batches of ``batch_size`` groups, each made by ``make_group(rng)``.

    Args:
        make_group: builds one (picklable) ``EnvGroupBuilder`` from a ``random.Random``.
        batch_size: groups per batch.
        n_batches: number of batches (``len(dataset)``).
        seed: base seed; batch ``i`` uses an RNG seeded from ``(seed, i)``.
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
        self.make_group = make_group
        self.batch_size = batch_size
        self.n_batches = n_batches
        self.seed = seed

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        if not 0 <= index < self.n_batches:
            raise IndexError(f"batch {index} is outside the dataset's {self.n_batches} batches")
        rng = random.Random(f"{self.seed}:{index}")
        return [self.make_group(rng) for _ in range(self.batch_size)]

    def __len__(self) -> int:
        return self.n_batches
