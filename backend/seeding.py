"""How a seed is mixed, in one place: the local sampler, the training loop and the judge use it.

:func:`mix_seed` hashes its parts (in order) into a non-negative 31-bit integer: the one width
every Tinker service accepts as ``SamplingParams.seed`` (an int32; SkyRL tx answers 400 to a
larger one), so a seed made here can be sent anywhere. It imports nothing heavy.
"""

from __future__ import annotations

import hashlib

SEED_BITS = 31
"""Width of every mixed seed (a non-negative int32)."""


def mix_seed(*parts: int | str | bytes) -> int:
    """A :data:`SEED_BITS`-bit seed that depends on every part and its position (stable across
    processes, machines and runs: a blake2b hash of the parts' ``repr``)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> (64 - SEED_BITS)
