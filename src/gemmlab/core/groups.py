"""The groups of a grouped launch (rung 26, kernels/26_wgmma_grouped.cu; ``gemmlab.grouped_mm``).

The kernel reads the group sizes on the device; the host knows only how many groups there are, how
far apart their weights lie, and how their rows are given. ``Groups`` holds that, and what the host
derives from it: the grid (sized for the most units any group sizes can make), the weights' 3-D
tensor map and the capacity of the kernel's shared table. A plain call of the grouped rung (verify,
bench, tune) is one group of M rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from .families.hopper import GROUP_CAPS

VECTOR_BYTES = 16
# rung 26's second entry point (kernels/group_maps.cuh): it writes the groups' tensor maps before
# the GEMM of a call over K, and no C
MAPS_KERNEL = "group_maps"
# groups of rows: the rows of a box of a row-major A (kernels/ring.cuh, GL_GROUP_BOX_ROWS), loaded
# up to each tile's group's end
GROUP_BOX_ROWS = 64


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Groups:
    """``count`` groups. Groups of rows (``over_k`` False: the experts' tokens): ``stride`` the
    elements from one group's weights to the next (a multiple of 16 bytes: the third stride of B's
    map); ``rows_per`` 0 where the device holds each group's cumulative end row (``offs``), else
    each group's rows in a padded buffer of ``count`` x ``rows_per`` rows (the masked form, whose
    device ints are counts; with no ints at all, the kernel takes every group as full). Groups over
    K (``over_k``: the weight gradient, GROUP_K=1): the device holds each group's cumulative end k,
    and ``stride`` is the elements from one group's C to the next."""

    count: int
    stride: int
    rows_per: int = 0
    over_k: bool = False

    def __post_init__(self):
        if not 1 <= self.count <= GROUP_CAPS[-1]:
            raise ValueError(f"{self.count} groups; the grouped kernel takes 1 to {GROUP_CAPS[-1]}")
        if self.stride <= 0:
            raise ValueError(f"the group stride is {self.stride} elements; it must be positive")

    @classmethod
    def single(cls, kp, itemsize: int) -> "Groups":
        """A plain problem (kernel view ``kp``) as one full group of its M rows: B's one element
        padded to whole 16-byte vectors for its map's third stride."""
        outer = kp.N if kp.b_col else kp.K
        span = _cdiv(outer * kp.ldb * itemsize, VECTOR_BYTES) * VECTOR_BYTES
        return cls(1, span // itemsize, kp.M)

    @property
    def cap(self) -> int:
        """The shared table's capacity, GROUP_CAP: the least power of two that holds them."""
        return next(c for c in GROUP_CAPS if c >= self.count)

    def units_bound(self, M: int, N: int, cfg) -> int:
        """The most units of work (CLUSTER row tiles of BM x one column tile of BN) the groups can
        make over M rows: each group's ceil(rows / (BM x CLUSTER)) row units sum to at most
        ceil(M / (BM x CLUSTER)) plus one per group past the first (the masked form: exactly
        count x ceil(rows_per / (BM x CLUSTER)); over K: every group all of M)."""
        unit_rows = cfg["BM"] * cfg.get("CLUSTER", 1)
        if self.over_k:
            rows = self.count * _cdiv(M, unit_rows)
        elif self.rows_per:
            rows = self.count * _cdiv(self.rows_per, unit_rows)
        else:
            rows = _cdiv(M, unit_rows) + self.count - 1
        return rows * _cdiv(N, cfg["BN"])

    def grid(self, M: int, N: int, cfg, sm_count: int) -> int:
        """The persistent grid: a cluster per CLUSTER SMs, at most one per unit the groups can make
        (a block past the units the device's sizes make finds none and exits)."""
        cluster = cfg.get("CLUSTER", 1)
        return max(1, min(self.units_bound(M, N, cfg), sm_count // cluster)) * cluster
