"""Choose a rung (and its configuration) for a problem.

Until ``gemmlab tune`` records per-shape winners, the choice is fixed per dtype: the fastest
rung measured on an H100 (benchmarks/results/), falling back down the ladder when a rung cannot
run on the device.
"""

from __future__ import annotations

from .problem import GemmProblem
from .registry import Rung, get

# Fastest first, per dtype (H100 measurements in benchmarks/results/).
PREFERENCE: dict[str, tuple[str, ...]] = {
    "fp32": ("warp_tiling", "double_buffer", "blocked", "vectorized", "tile_2d", "coalesced"),
    "fp16": ("wmma",),
    "bf16": ("wmma",),
}


def choose(problem: GemmProblem, kernel: str = "auto", arch_number: int | None = None) -> Rung:
    """The rung to run: ``kernel`` forced by slug, or the preferred one for the dtype (and, when
    ``arch_number`` is given, the architecture; otherwise the launch checks it)."""
    if not isinstance(kernel, str):
        raise TypeError(f"kernel must be a string (a rung slug or 'auto'), got {type(kernel).__name__}")
    if kernel != "auto":
        rung = get(kernel)
        if problem.dtype not in rung.dtypes:
            raise ValueError(
                f"kernel {rung.slug!r} does not support dtype {problem.dtype}; it supports {', '.join(rung.dtypes)}"
            )
        return rung
    for slug in PREFERENCE[problem.dtype]:
        rung = get(slug)
        if arch_number is None or arch_number >= rung.min_arch:
            return rung
    raise ValueError(f"no rung supports dtype {problem.dtype} on sm_{arch_number}")
