"""Rung 24 (decode) at its edges, checked against float64 under compute-sanitizer.

Without 16-byte access: odd and even leading dimensions (the two-word and the one-word pair
loads), base pointers off 4 bytes, every layout, warps across the wide edge (their loads moved
inside the operand), chunks across the end of K (the guarded loads), a K split in a cluster and
through the workspace, and one operand with 16-byte access whose lane crosses the wide edge.
With the ring in shared memory (ASYNC=1): operands with 16-byte access whose K ends inside a
16-byte unit and whose wide side ends inside a lane's 8 rows (the zero-filled and the guarded
units, the lanes that copy another lane's units), splits in a cluster and through the workspace.
The allocations are unpooled, each the operand's own size, so that a read past an operand's end is
a read past its allocation. Exits 1 when a product is wrong or nothing was checked
(tools/gpu_suite.sh, stage sanitize-decode).

    python tools/check_decode.py
"""

from __future__ import annotations

import itertools
import sys

import cupy as cp

from gemmlab.measure.verify import verify

SHAPES = [  # M, N, K, leading-dimension padding, offset of the base pointer (elements)
    (3, 700, 1537, 0, 0), (517, 11, 2049, 0, 1), (7, 131, 1000, 0, 0), (13, 130, 129, 3, 1), (6, 1170, 486, 0, 0),
    (40, 301, 999, 0, 1), (300, 29, 515, 1, 0), (5, 1001, 640, 7, 0), (1001, 6, 640, 7, 0)]
CONFIGS = ["m8", "n8", "n32", {"BM": 8, "BN": 64, "BK": 128, "WK": 4, "SPLITK": 3, "SKCLUSTER": 1},
           {"BM": 64, "BN": 16, "BK": 128, "WK": 4, "SPLITK": 5}]
# 16-byte access in the layouts where the padding makes it (K + 4 and N + 4 multiples of 8)
ASYNC_SHAPES = [(5, 1004, 300, 4, 0), (1004, 5, 300, 4, 0), (1, 2044, 1020, 4, 0), (20, 1004, 1004, 4, 0)]
ASYNC_CONFIGS = [{"BM": 8, "BN": 64, "BK": 128, "WK": 4, "DEPTH": 3, "ASYNC": 1},
                 {"BM": 8, "BN": 64, "BK": 128, "WK": 4, "DEPTH": 4, "ASYNC": 1, "SPLITK": 3, "SKCLUSTER": 1},
                 {"BM": 64, "BN": 16, "BK": 64, "WK": 2, "DEPTH": 6, "ASYNC": 1, "SPLITK": 5},
                 {"BM": 32, "BN": 128, "BK": 128, "WK": 4, "DEPTH": 3, "ASYNC": 1}]


def main() -> int:
    cp.cuda.set_allocator(None)
    checked = bad = 0
    cases = itertools.chain(itertools.product(CONFIGS, itertools.product((False, True), repeat=2), SHAPES),
                            itertools.product(ASYNC_CONFIGS, itertools.product((False, True), repeat=2), ASYNC_SHAPES))
    for config, (a_col, b_col), (M, N, K, pad, off) in cases:
        r = verify("decode", M, N, K, "bf16", a_col=a_col, b_col=b_col, alpha=1.5, beta=-0.5, ld_pad=pad, offset=off,
                   config=config)
        checked += 1
        if not r.ok:
            bad += 1
            print(r.message(), flush=True)
    print(f"rung 24 at its edges: {checked} checks, {bad} wrong")
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
