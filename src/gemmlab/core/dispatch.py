"""Choose a rung (and its configuration) for a problem.

``kernel="auto"`` takes the highest rung of the ladder that supports the problem's dtype, computes
it in the precision asked for (None: the dtype's exact one, so "auto" never trades accuracy for
speed unasked) and runs on the device: the ladder is ordered so that each rung improves on the one
before it (the H100 measurements in benchmarks/results/ bear that out for every dtype). A device
that no rung of the dtype and precision supports gets a ValueError naming them.
"""

from __future__ import annotations

from .problem import GemmProblem
from .registry import Rung, for_dtype, get


def choose(problem: GemmProblem, kernel: str = "auto", arch: str | int | None = None,
           precision: str | None = None) -> Rung:
    """The rung to run: ``kernel`` forced by slug (ValueError when it cannot compute the dtype in
    ``precision``; None: its own default), or the top rung for the dtype and precision (and,
    when ``arch`` is given, the architecture; otherwise the launch checks it)."""
    if not isinstance(kernel, str):
        raise TypeError(f"kernel must be a string (a rung slug or 'auto'), got {type(kernel).__name__}")
    if kernel != "auto":
        rung = get(kernel)
        rung.require(problem.dtype, precision=precision)
        return rung
    candidates = for_dtype(problem.dtype, arch, precision)
    if not candidates:
        what = problem.dtype if precision is None else f"{problem.dtype} in precision {precision}"
        raise ValueError(f"no rung supports {what} on {arch}")
    return candidates[-1]
