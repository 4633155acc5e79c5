"""Shared set-up for the benchmarks: a private emulator, data, timing helpers.

Every benchmark measures the methods it compares side by side in one run, on the same
emulator and data, interleaving repetitions so drift on a noisy machine hits all alike,
and prints ratios. Absolute times are printed for context only.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tsstore.local.emulator import Emulator, Mode, start_emulator  # noqa: E402


def emulator(*, max_heap: str | None = None) -> Emulator:
    emu = start_emulator(max_heap=max_heap) if max_heap else start_emulator()
    print(f"# emulator {emu.address} (pid {emu.pid})", file=sys.stderr)
    return emu


def emulator_in(mode: Mode) -> Emulator:
    """An emulator running ``mode`` (one emulator serves one mode)."""
    emu = start_emulator(mode=mode)
    print(f"# emulator {emu.address} in {mode} mode (pid {emu.pid})", file=sys.stderr)
    return emu


def resident_kb() -> int:
    """This process's resident memory now, in KiB (``ru_maxrss`` is the peak of everything before)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * (resource.getpagesize() // 1024)


def measure(
    methods: dict[str, Callable[[], Any]], *, repeats: int, warm_up: bool = True
) -> dict[str, dict[str, float]]:
    """Median wall and client-CPU seconds per method, repetitions interleaved (after one
    warm-up run each, unless the caller ran them already)."""
    wall: dict[str, list[float]] = {name: [] for name in methods}
    cpu: dict[str, list[float]] = {name: [] for name in methods}
    for fn in methods.values() if warm_up else ():  # connections, caches, JIT in the emulator
        fn()
    for _ in range(repeats):
        for name, fn in methods.items():
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    return {name: {"wall": statistics.median(wall[name]), "cpu": statistics.median(cpu[name])} for name in methods}


def verdict(ratio: float, target: float, *, at_most: bool = True) -> str:
    ok = ratio <= target if at_most else ratio >= target
    return f"{'met' if ok else 'NOT met'} (target {'<=' if at_most else '>='} {target}x)"
