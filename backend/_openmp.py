"""How long GNU OpenMP's idle threads spin before they sleep, set before torch loads it.

The local backend runs its torch work on one thread (``backend.local._device``), so the process
has one OpenMP pool and, by libgomp's default, its idle helper spins ~300,000 times (a few ms)
before sleeping: consecutive small ops then find it awake. But two such processes on the same
cores (two runs side by side, a run beside the tests) spin against each other: measured on 2
cores, a loop of small ops ran 160x slower than alone, and two runs of the main job ~30x. At
10,000 spins (~0.1 ms) a lone process keeps its speed (training step 14.9 s against 13.8, sampling
2.7 s against 2.8: ``bench/compute_thread.py``'s workloads) and two side by side take 2.5x
(training) and 5x (sampling) their time alone, not 30x.

libgomp reads ``GOMP_SPINCOUNT`` once, when it is loaded (with torch), so :func:`configure` runs
when :mod:`backend` is imported, and only sets it where torch is not loaded yet and the user set
neither it nor ``OMP_WAIT_POLICY``.
"""

from __future__ import annotations

import os
import sys

SPIN_COUNT = "10000"
"""``GOMP_SPINCOUNT`` the backend sets (libgomp's default: 300000)."""


def configure() -> bool:
    """Set ``GOMP_SPINCOUNT`` to :data:`SPIN_COUNT` if it can still take effect and the user has
    not chosen; returns whether it was set."""
    if "torch" in sys.modules or "GOMP_SPINCOUNT" in os.environ or "OMP_WAIT_POLICY" in os.environ:
        return False
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    return True
