"""Choose a rung (and its configuration) for a problem.

``kernel="auto"`` takes the highest rung of the ladder that supports the problem's dtype and runs
on the device: the ladder is ordered so that each rung improves on the one before it (the H100
measurements in benchmarks/results/ bear that out for every dtype). A device that no rung of the
dtype supports gets a ValueError naming both.
"""

from __future__ import annotations

from .problem import GemmProblem
from .registry import Rung, for_dtype, get


def choose(problem: GemmProblem, kernel: str = "auto", arch: str | int | None = None) -> Rung:
    """The rung to run: ``kernel`` forced by slug, or the top rung for the dtype (and, when
    ``arch`` is given, the architecture; otherwise the launch checks it)."""
    if not isinstance(kernel, str):
        raise TypeError(f"kernel must be a string (a rung slug or 'auto'), got {type(kernel).__name__}")
    if kernel != "auto":
        rung = get(kernel)
        rung.require(problem.dtype)
        return rung
    candidates = for_dtype(problem.dtype, arch)
    if not candidates:
        raise ValueError(f"no rung supports dtype {problem.dtype} on {arch}")
    return candidates[-1]
