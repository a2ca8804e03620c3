"""What the CPU tests of the selection share: a GemmProblem made of facts only (pointers, shapes,
layouts, no arrays), so the dispatch can be asked about any problem without a GPU."""

from __future__ import annotations

from gemmlab.core.problem import ArrayInfo, GemmProblem


def problem(M, N, K, dtype="fp32", a_col=False, b_col=False, c_col=False, lib="cupy") -> GemmProblem:
    """A stand-in M x N x K problem: dense operands (leading dimension the contiguous side), each
    row- or column-major, at one 16-byte-aligned address, alpha 1 and beta 0."""
    def info(rows, cols, col):
        return ArrayInfo(0x10000, rows, cols, rows if col else cols, col, dtype, 0, lib)

    return GemmProblem(M, N, K, dtype, info(M, K, a_col), info(K, N, b_col), info(M, N, c_col), 1.0, 0.0)
