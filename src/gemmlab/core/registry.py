"""The ladder: one entry per rung, the single source of truth.

The CLI, the benchmark, the report, the docs table and the tests all read ``RUNGS``; nothing else
lists the rungs by hand. An entry says what the rung is (number, slug, title, one-line summary,
the seed kernels it reproduces), where its source is, which dtypes it takes, its tunable
parameters with defaults, the constraints on them, the launch geometry, and the static claims its
SASS must satisfy (checked in CI by ``tests/test_static_guards.py``). Each kernel family's thread
counts, shared memory and constraints live beside one another in ``core/families/`` (simt,
tensor, hopper, thin; rung 24's in core/decode.py); this module holds the schema, the launch and
split arithmetic and the table.

Launch geometry is uniform: a 1-D block of ``THREADS`` threads computes one ``BM x BN`` tile of C
(row-major inside the kernel, see kernels/common.cuh); the grid is ``(ceil(N/BN), ceil(M/BM))``, with the row tiles folded into grid.z past
grid.y's limit of 65535 (``Rung.launch``). A rung with a ``SPLITK`` parameter (> 1) splits K
instead: grid.z holds the K slices (``splitk_slices``) and a reduction kernel sums them. A
persistent rung (``Rung.persistent``) launches one block per SM instead, up to the number of
tiles (in clusters of ``CLUSTER`` blocks), and each block loops over tiles: its grid needs the
device's SM count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from .arch import ArchLimits, arch_number
from .config import ConfigLike, ConfigSpec, parse_config
from .dtypes import get as get_dtype
from .precision import applies, resolve as resolve_precision
from .tensormaps import L2_PROMOTION, L2_PROMOTION_DEFAULT
from . import decode as _decode
from .splitk import CLUSTER_ARCH, MAX_SPLITK, MAX_SPLITK_CLUSTER  # noqa: F401 (re-exported)
from .families.common import MAX_SMEM_PER_BLOCK, divides, p2, scalar_split, splitk_constraints, warp_threads
from .families.hopper import (wgmma_constraints, wgmma_smem, wgmma_threads, ws_constraints, ws_smem, wstf32_constraints,
                              wstf32_smem)
from .families.simt import (double_buffer_constraints, simt_constraints, simt_smem, square_tile, thread_tile_constraints,
                            thread_tile_threads, tile_1d_threads, tile_2d_constraints, warp_tile_constraints)
from .families.tensor import (mma_constraints, mma_smem, mma_threads, tf32_constraints, tf32_smem, wmma_constraints,
                              wmma_smem, wmma_threads)
from .families.thin import THIN_MAX, thin_constraints, thin_rule_config, thin_sides, thin_smem  # noqa: F401 (re-exported)

MAX_GRID_Y = 65535
SWITCHES = ("PACK", "EPI_TMA", "SKCLUSTER", "STREAMK", "DEFER", "SPREAD", "SNAKE", "KREV", "BALANCE", "L2PF")   # parameters that take 0 (off) or 1 (on); every other one is a positive int


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int = 0  # dynamic shared memory, bytes
    streamk: bool = False  # a non-persistent rung's stream-K launch (rung 18, STREAMK=1): grid (G, dp/G + 1)
                           # for G blocks a wave, run as two kernels: the dp whole tiles on (G, dp/G),
                           # then the rung's tail_kernel on (G, 1)


def _threads_given(cfg: Mapping[str, int]) -> int:
    return cfg["THREADS"]


def _no_dynamic_smem(cfg: Mapping[str, int]) -> int:
    return 0


@dataclass(frozen=True)
class Rung:
    number: int
    slug: str
    title: str
    summary: str                       # one line: what this rung adds
    seeds: tuple[str, ...]             # seed kernels it reproduces, e.g. "002 gemm_v00"
    source: str                        # file in gemmlab/kernels/
    dtypes: tuple[str, ...] = ("fp32",)
    params: Mapping[str, int] = field(default_factory=dict)        # tunables and their defaults
    presets: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # named configs
    threads: Callable[[Mapping[str, int]], int] = _threads_given   # block size from the config
    constraints: Callable[[Mapping[str, int]], list[str]] = lambda cfg: []
    textures: int = 0                  # A and B read through texture objects: texel width in floats
                                       # when 16-byte access is legal (1: float, 4: float4); 0: no textures
    sass_claims: tuple[str, ...] = ()  # SASS opcodes (prefixes) the rung's fast path must contain
    smem: Callable[[Mapping[str, int]], int] = _no_dynamic_smem  # dynamic shared memory, bytes
    landmark: bool = False             # a landmark of the ladder: the report's size sweep plots it
    kernel: str = "gemm"               # extern "C" entry point
    tail_kernel: str = ""              # a non-persistent rung's stream-K tail, a second entry point that
                                       # its STREAMK=1 variant launches after ``kernel`` (Launch.streamk)
    min_arch: int = 75
    max_arch: int | None = None        # the newest architecture it runs on (None: any newer one)
    tensor_maps: bool = False          # A and B also passed as TMA tensor maps (core/tensormaps.py),
                                       # for each operand whose 16-byte access is legal
    store_map: bool = False            # and C as a third one (its EPI_TMA switch: 1 = store C through
                                       # TMA where C has 16-byte access and beta == 0, 0 = never)
    store_box: int = 16                # the outer side of C's store box (its inner side is one
                                       # 128-byte swizzle row): what the kernel's epilogue stages
    store_twin: bool = False           # a second build of each EPI_TMA=1 variant with only the TMA store's
                                       # epilogue (Variant.tma_store_only, GL_TMA_STORE_ONLY), which a plan
                                       # launches for the calls the TMA store serves (beta == 0, rows of
                                       # whole 16-byte chunks, C with a map)
    persistent: bool = False           # one block per SM (up to the tiles), looping over the tiles:
                                       # launch() needs the SM count; CLUSTER blocks per cluster
    space: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # what `gemmlab tune` searches:
                                       # values per parameter (the others stay at their defaults)
    precisions: tuple[str, ...] = ()   # core.precision names it computes in, its default first;
                                       # () means the exact precision of each of its dtypes
    packs: bool = False                # it has 16-byte fast paths, and so a PACK parameter (0 or 1,
                                       # default 0): copy an operand they cannot read first (core/packing.py)
    k_major: bool = False              # its kernel reads K-major, 16-byte-legal A and B only (row-major A,
                                       # column-major B): the plan always copies the others first,
                                       # transposing an MN-major one (core/packing.py)
    register_a: tuple[str, ...] = ()   # precisions in which its kernel also reads a column-major (MN-major)
                                       # A, into registers (rung 22, tf32: wgmma's register-A form); the
                                       # plan then computes a row-major-A-and-B problem transposed instead
                                       # of copying B (core/packing.py, for_kernel)
    planes: Mapping[str, int] = field(default_factory=dict)   # precision -> planes per operand its kernel
                                       # reads (rung 22, 3xtf32: 2, the big and small TF32 parts the plan's
                                       # split pack writes); 1 for any other. A rung with this table has
                                       # smem and constraints callables taking (cfg, planes)
    precision_params: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # precision -> the
                                       # defaults that differ in it (a stage holding two planes needs a smaller tile)
    precision_presets: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)  # precision
                                       # -> its presets, instead of ``presets``
    thin: int = 0                      # a rung for thin problems only (rung 23): the rule gives it the
                                       # problems whose M or N (kernel view) is at most this, and never
                                       # takes it as the top rung of its dtype; 0: an ordinary rung
    thin_rule: Callable[..., tuple[dict, str] | None] | None = None   # a thin rung's own choice of configuration,
                                       # (M, N, K, sm_count, arch, a_col, b_col, vec_a, vec_b) -> (overrides, why)
                                       # in the kernel view, or None where it declines the problem; None:
                                       # thin_rule_config

    def __post_init__(self):
        if not self.precisions:
            object.__setattr__(self, "precisions", tuple(self.dtypes))
        if self.packs:   # a host-side switch like SPLITK, last among the parameters
            object.__setattr__(self, "params", {**self.params, "PACK": 0})
        if self.tensor_maps:   # host-side too: the L2 promotion of the tensor maps (core/tensormaps.py)
            object.__setattr__(self, "params", {**self.params, "L2PROMO": L2_PROMOTION_DEFAULT})

    @property
    def name(self) -> str:
        """The stable slug (``gemmlab.gemm(..., kernel=rung.name)``)."""
        return self.slug

    # ---- what it runs on ------------------------------------------------------------------
    def supports(self, dtype: str) -> bool:
        return dtype in self.dtypes

    def runs_on(self, arch: str | int) -> bool:
        """Whether the rung's instructions exist on ``arch`` (``"sm_90a"``, 90)."""
        n = arch_number(arch)
        return n >= self.min_arch and (self.max_arch is None or n <= self.max_arch)

    def require(self, dtype: str | None = None, arch: str | int | None = None, precision: str | None = None) -> None:
        """The one support check: ValueError naming the problem when this rung cannot take
        ``dtype``, cannot run on ``arch`` (``"sm_90a"``, 90) or cannot compute in ``precision``."""
        if dtype is not None:
            get_dtype(dtype)
            if dtype not in self.dtypes:
                raise ValueError(f"kernel {self.slug!r} does not support dtype {dtype}; it supports "
                                 f"{', '.join(self.dtypes)}")
            self.precision_for(dtype, precision)
        if arch is not None and not self.runs_on(arch):
            span = (f"sm_{self.min_arch} or newer" if self.max_arch is None else
                    f"sm_{self.min_arch}" if self.max_arch == self.min_arch else
                    f"sm_{self.min_arch} to sm_{self.max_arch}")
            raise ValueError(f"kernel {self.slug!r} needs {span}; this is sm_{arch_number(arch)}")

    def precision_for(self, dtype: str, precision: str | None = None) -> str:
        """The precision this rung computes ``dtype`` operands in: ``precision``, or with None its
        own default for the dtype (its first one that applies). ValueError when it cannot."""
        own = [p for p in self.precisions if applies(p, dtype)]
        if precision is None:
            return own[0]
        want = resolve_precision(dtype, precision)
        if want not in own:
            others = [r.slug for r in RUNGS if dtype in r.dtypes and want in r.precisions]
            raise ValueError(f"kernel {self.slug!r} does not compute {dtype} in precision {want!r}; it provides "
                             f"{', '.join(own)}" + (f" (precision {want!r}: {', '.join(others[-3:])})" if others else ""))
        return want

    def compiles(self, a_col: bool, b_col: bool, vec_a: bool, vec_b: bool, precision: str | None = None,
                 c_col: bool = False) -> bool:
        """Whether the kernel has a variant for these operand layouts and vector flags (and C
        column-major, ``c_col``) in ``precision`` (None: the rung's default): every one with a
        row-major C, except for a ``k_major`` rung (column-major B, both operands 16-byte legal,
        and a row-major A, or in a ``register_a`` precision a column-major one, then with C either
        way: the transposed problem writes C column-major)."""
        if not self.k_major:
            return not c_col
        if not (b_col and vec_a and vec_b):
            return False
        return (a_col and self.reads_register_a(precision)) or (not a_col and not c_col)

    def reads_register_a(self, precision: str | None = None) -> bool:
        """Whether the kernel reads a column-major A into registers in ``precision`` (None: the
        rung's default; rung 22 in tf32)."""
        return self._own(precision) in self.register_a

    # ---- precision-dependent sizes -------------------------------------------------------
    def planes_for(self, precision: str | None = None) -> int:
        """Planes per operand the kernel reads in ``precision`` (None: the rung's default): 1, or
        2 where the plan splits the operands (rung 22, 3xtf32)."""
        return self.planes.get(self._own(precision), 1)

    def defaults_for(self, precision: str | None = None) -> dict[str, int]:
        """The default configuration in ``precision`` (None: the rung's default one): ``params``
        with the precision's own defaults on top (rung 22's 3xtf32: BN 128, 2 stages)."""
        return {**self.params, **self.precision_params.get(self._own(precision), {})}

    def presets_for(self, precision: str | None = None) -> Mapping[str, Mapping[str, int]]:
        """The presets of the rung in ``precision`` (None: its default one)."""
        return self.precision_presets.get(self._own(precision), self.presets)

    def _own(self, precision: str | None) -> str:
        return self.precisions[0] if precision is None else precision

    def smem_bytes(self, cfg: Mapping[str, int], precision: str | None = None) -> int:
        """Dynamic shared memory of a block of ``cfg`` computing in ``precision``."""
        return self.smem(cfg, self.planes_for(precision)) if self.planes else self.smem(cfg)

    # ---- configuration -------------------------------------------------------------------
    def config(self, overrides: ConfigLike = None, precision: str | None = None) -> dict[str, int]:
        """Defaults (of ``precision``; None: the rung's default one) merged with a configuration in
        any form of ``core.config`` (a preset name, a mapping, ``"KEY=VALUE,..."``, JSON, or a list
        of those); ValueError if invalid."""
        spec = parse_config(overrides)
        cfg = self.defaults_for(precision)
        presets = self.presets_for(precision)
        if spec is None:
            spec = ConfigSpec()
        if spec.preset is not None:
            if spec.preset not in presets:
                raise ValueError(
                    f"rung {self.slug!r} has no preset {spec.preset!r}" + (f" in precision {precision}" if precision else "")
                    + f"; presets: {sorted(presets) or 'none'}"
                )
            cfg.update(presets[spec.preset])
        by_upper = {k.upper(): k for k in self.params}
        for k, v in spec.values.items():
            key = k if k in self.params else by_upper.get(str(k).upper())
            if key is None:
                raise ValueError(f"rung {self.slug!r} has no parameter {k!r}; parameters: {sorted(self.params)}")
            if key in SWITCHES:
                if isinstance(v, bool) or not isinstance(v, int) or v not in (0, 1):
                    raise ValueError(f"parameter {key} of rung {self.slug!r} is a switch: 0 or 1, got {v!r}")
            elif isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"parameter {key} of rung {self.slug!r} must be a positive int, got {v!r}")
            cfg[key] = v
        problems = self.check_config(cfg, precision)
        if problems:
            where = f" in precision {precision}" if self.planes_for(precision) > 1 else ""
            raise ValueError(f"invalid configuration for rung {self.slug!r}{where} {cfg}: " + "; ".join(problems))
        return cfg

    def check_config(self, cfg: Mapping[str, int], precision: str | None = None) -> list[str]:
        problems = list(self.constraints(cfg, self.planes_for(precision)) if self.planes else self.constraints(cfg))
        if cfg.get("L2PROMO", L2_PROMOTION_DEFAULT) not in L2_PROMOTION:
            problems.append(f"L2PROMO={cfg['L2PROMO']} must be one of {', '.join(map(str, L2_PROMOTION))} "
                            f"(bytes the L2 fetches for each 128-byte row a tensor map reads)")
        t = self.threads(cfg)
        if t < 32 or t > 1024 or t % 32:
            problems.append(f"the block would have {t} threads; it must be a multiple of 32 between 32 and 1024")
        return problems

    def check_resources(self, cfg: Mapping[str, int], limits: ArchLimits, precision: str | None = None) -> None:
        """ValueError when a block of this configuration (in ``precision``) needs more shared memory
        than ``limits`` (a device's, or an architecture's from the table) allow one block."""
        need = self.smem_bytes(cfg, precision)
        if need > limits.max_smem_per_block:
            raise ValueError(f"rung {self.slug!r} with {cfg} needs {need} B of shared memory per block; "
                             f"{limits.arch} allows at most {limits.max_smem_per_block} B")
        if cfg.get("SKCLUSTER") and arch_number(limits.arch) < CLUSTER_ARCH:
            raise ValueError(f"rung {self.slug!r} with SKCLUSTER=1 sums its K slices in a thread-block cluster, "
                             f"which needs sm_{CLUSTER_ARCH} or newer; this is {limits.arch} (use SKCLUSTER=0)")

    def defines(self, cfg: Mapping[str, int], precision: str | None = None) -> dict[str, int]:
        d = dict(cfg)
        d["THREADS"] = self.threads(cfg)
        # the slice count is gridDim.z, not a define: SPLITK = 2, 4, ... share one compiled kernel,
        # and SPLITK = 1 compiles exactly what the rung compiled before it had the parameter
        # SKCLUSTER=1: the slices are a cluster's blocks, its size a define (GL_SPLITK_CLUSTER)
        split = d.pop("SPLITK", 1)
        if d.pop("SKCLUSTER", 0) and split > 1:
            d["GL_SPLITK_CLUSTER"] = split
        elif split > 1:
            d["GL_SPLITK"] = 1
        d.pop("PACK", None)   # the plan packs before the launch: the kernel is the same
        d.pop("L2PROMO", None)   # so does the tensor maps' L2 promotion: the host encodes it
        d.pop("BALANCE", None)   # and a persistent launch's grid (persistent_grid): the kernel reads gridDim
        # switches added to a rung after it was measured: off, each compiles what the rung compiled
        # before it (no define; the same cache keys and SASS)
        for switch in ("STREAMK", "DEFER", "KREV"):
            if not d.get(switch):
                d.pop(switch, None)
        smem = self.smem_bytes(cfg, precision)
        if smem:
            d["GL_DYN_SMEM"] = smem  # the kernel checks its carve-up fits what the launch gives it
        return d

    def launch(self, M: int, N: int, cfg: Mapping[str, int], K: int | None = None,
               sm_count: int | None = None, precision: str | None = None) -> Launch:
        """Column tiles along grid.x; row tiles along grid.y, continued along grid.z past grid.y's
        limit (GL_TILE_ROW in kernels/common.cuh), so no M below 2^31 is refused.
        With SPLITK > 1, grid.z holds the K slices instead: SPLITK of them, or, given ``K``, the
        number ``splitk_slices`` gives (never an empty slice); with SKCLUSTER=1 always SPLITK, the
        compiled cluster's size (a slice past K computes nothing). Split-K and a grid.z of row tiles
        exclude each other: a problem that needs both is refused with a ValueError.
        A persistent rung: ``persistent_grid`` on the device's ``sm_count`` (ValueError without it).
        The shared memory is that of ``precision`` (None: the rung's default one)."""
        smem = self.smem_bytes(cfg, precision)
        if self.persistent:
            return Launch((self.persistent_grid(M, N, cfg, sm_count), 1, 1), (self.threads(cfg), 1, 1), smem)
        tiles_m = (M + cfg["BM"] - 1) // cfg["BM"]
        if cfg.get("STREAMK") and K is not None and sm_count and streamk_tail(M, N, K, cfg, sm_count):
            # the whole waves along grid.y, the stream-K tail as its last row (kernels/18_async_simt.cu)
            units = _units(M, N, cfg)
            dp = units - _streamk_split(units, sm_count)
            if dp // sm_count + 1 <= MAX_GRID_Y:
                return Launch((sm_count, dp // sm_count + 1, 1), (self.threads(cfg), 1, 1), smem, streamk=True)
        split = cfg.get("SPLITK", 1)
        if split > 1:
            if tiles_m > MAX_GRID_Y:
                raise ValueError(f"rung {self.slug!r}: SPLITK={split} puts the K slices along grid.z, but M={M} has "
                                 f"{tiles_m} row tiles of BM={cfg['BM']}, more than grid.y's {MAX_GRID_Y}, and needs "
                                 f"grid.z for them: use SPLITK=1 (this many row tiles fill the GPU without a split)")
            gz = split if K is None or cfg.get("SKCLUSTER") else splitk_slices(K, cfg["BK"], split)
            return Launch(((N + cfg["BN"] - 1) // cfg["BN"], tiles_m, gz), (self.threads(cfg), 1, 1), smem)
        gz = (tiles_m + MAX_GRID_Y - 1) // MAX_GRID_Y
        gy = (tiles_m + gz - 1) // gz      # balanced slices: fewer than gz surplus tiles in all
        grid = ((N + cfg["BN"] - 1) // cfg["BN"], gy, gz)
        return Launch(grid, (self.threads(cfg), 1, 1), smem)

    def streamk_warps(self, cfg: Mapping[str, int]) -> int:
        """The warps of a block that publish a stream-K piece, one flag each: a warp-specialized
        persistent rung's consumer warps (ws.cuh: all but the producer warpgroup's 4), else every
        warp of the block (rung 18)."""
        warps = self.threads(cfg) // 32
        return warps - 4 if self.persistent else warps

    def persistent_grid(self, M: int, N: int, cfg: Mapping[str, int], sm_count: int | None) -> int:
        """The blocks of a persistent launch: one cluster of CLUSTER blocks per CLUSTER SMs, up to
        the units of work (a unit: CLUSTER vertically adjacent tiles of one column tile), so that
        every block is resident at once and loops over its share of the units (the kernel's
        Schedule, kernels/ws.cuh). BALANCE=1: the fewest clusters that take no more waves (every
        cluster then walks the same number of units, or one fewer): 2048 units on 132 SMs are 16
        waves of 128 instead of 15 of 132 and one of 68."""
        if not sm_count or sm_count < 1:
            raise ValueError(f"rung {self.slug!r} is persistent (one block per SM, each looping over tiles): "
                             f"its launch needs the device's SM count, got {sm_count!r}")
        cluster = cfg.get("CLUSTER", 1)
        units = _units(M, N, cfg)
        clusters = max(1, min(units, sm_count // cluster))
        if cfg.get("BALANCE"):
            clusters = _cdiv(units, _cdiv(units, clusters))
        return clusters * cluster


def _units(M: int, N: int, cfg: Mapping[str, int]) -> int:
    """A persistent rung's units of work: CLUSTER vertically adjacent tiles of one column tile."""
    return _cdiv(_cdiv(M, cfg["BM"]), cfg.get("CLUSTER", 1)) * _cdiv(N, cfg["BN"])


# ---- stream-K (STREAMK=1, rungs 21 and 22: kernels/ws.cuh) -----------------------------------------
def streamk_tail(M: int, N: int, K: int, cfg: Mapping[str, int], blocks: int) -> bool:
    """Whether a persistent launch of ``blocks`` blocks (``Rung.launch``'s grid.x) on an M x N x K
    problem splits its last, partial wave of units by k tiles (kernels/ws.cuh, Schedule): with
    STREAMK=1, when there are more units than clusters and they are not whole waves, and the split
    units' k tiles count below 2^31 (the kernel's step arithmetic is 32-bit). Otherwise the plan
    launches the STREAMK=0 kernel, which needs no workspace."""
    clusters = blocks // cfg.get("CLUSTER", 1)
    units = _units(M, N, cfg)
    if not cfg.get("STREAMK") or units <= clusters or units % clusters == 0:
        return False
    return _streamk_split(units, clusters) * _cdiv(K, cfg["BK"]) < 2 ** 31


def _streamk_split(units: int, clusters: int) -> int:
    """The units the stream-K tail splits by k tiles: the partial last wave, and one whole wave
    more when the partial one is under half full (each cluster then gets at least half a unit)."""
    rem = units % clusters
    return rem if 2 * rem >= clusters else rem + clusters


def streamk_workspace(cfg: Mapping[str, int], blocks: int, warps: int) -> tuple[int, int]:
    """(byte offset of the flags, bytes in all) of the stream-K workspace of ``blocks`` blocks:
    one BM x BN tile of FP32 per block (the piece it may publish), then one int flag per block
    and publishing warp (``Rung.streamk_warps``), which the plan zeroes before each launch."""
    flags = blocks * cfg["BM"] * cfg["BN"] * 4
    return flags, flags + blocks * warps * 4


# ---- split-K (its limits: core/splitk.py) -------------------------------------------------------
SPLITK_SPACE = (1, 2, 4, 8, 16)    # what the tuner tries


def workspace_split(cfg: Mapping[str, int]) -> bool:
    """Whether ``cfg`` splits K through the workspace: FP32 partials, then the reduction kernel
    (SPLITK > 1 without SKCLUSTER, whose slices sum in their cluster and write C themselves)."""
    return cfg.get("SPLITK", 1) > 1 and not cfg.get("SKCLUSTER")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def splitk_slices(K: int, bk: int, splitk: int) -> int:
    """The K slices a split-K launch uses for SPLITK = ``splitk``: with t = ceil(K/bk) tiles of
    K and p = ceil(t/splitk) tiles per slice (the kernel's arithmetic, kernels/common.cuh), the
    ceil(t/p) slices that hold at least one tile. The kernel recomputes p from this count and gets
    the same p, so every slice is non-empty and the last one may be shorter."""
    tiles = max(1, _cdiv(K, bk))
    return _cdiv(tiles, _cdiv(tiles, splitk))


def splitk_slice(K: int, bk: int, slices: int, z: int) -> tuple[int, int]:
    """(first k, length) of slice ``z`` of ``slices``, as the kernel computes it (gl_splitk_slice)."""
    per = _cdiv(_cdiv(K, bk), slices) * bk
    k0 = per * z
    return k0, max(0, min(per, K - k0))


# ---- the ladder (each family's thread counts, shared memory and constraints: core/families/) ----
_SIMPLE32 = {"BM": 32, "BN": 32, "THREADS": 1024}
_SMEM32 = {"BM": 32, "BN": 32, "BK": 32, "THREADS": 1024}


# ---- the tuner's search spaces (gemmlab tune) --------------------------------------------------
# Powers of two around each rung's defaults. The constraints (core/families/) prune the product before any
# compile; the ranges keep every pruned space at a few hundred tile configurations at most (an
# exhaustive run stays in minutes) while holding seed 001's sweep (bm, bk, bn, rm, rn) for the
# thread-tiled rungs. The split-K rungs try each tile with every SPLITK of SPLITK_SPACE (x5: the
# auto strategy then samples with TPE; the SPLITK values > 1 share one compiled kernel per tile).
_SPACE_SIMPLE = {"BM": p2(3, 5), "BN": p2(3, 5), "THREADS": (64, 128, 256, 512, 1024)}
_SPACE_SQUARE = {"BM": p2(3, 5), "BN": p2(3, 5), "BK": p2(3, 5), "THREADS": (64, 256, 1024)}
_SPACE_VEC = {"BM": p2(5, 8), "BN": p2(5, 8), "BK": p2(2, 4), "TM": p2(2, 3), "TN": p2(2, 3)}

RUNGS: tuple[Rung, ...] = (
    Rung(
        1, "naive", "Naive, non-coalesced",
        "One thread per C element; threadIdx.x walks the rows of C, so a warp's loads of B and stores of C stride by a row.",
        ("002 gemm_v00", "000 gemm_32x32_v0"), "01_naive.cu",
        params=_SIMPLE32,
        space=_SPACE_SIMPLE,
        constraints=lambda c: [] if c["BM"] * c["BN"] == c["THREADS"] else [f"THREADS={c['THREADS']} must be BM*BN={c['BM'] * c['BN']} (one thread per element of C)"],
    ),
    Rung(
        2, "coalesced", "Naive, coalesced",
        "threadIdx.x walks the columns of C: a warp reads one row of B and writes one row of C contiguously (coalesced).",
        ("002 gemm_v01", "000 gemm_32x32_v1", "000 gemm_32x32_v2"), "02_coalesced.cu",
        params=_SIMPLE32,
        space=_SPACE_SIMPLE,
        constraints=lambda c: [] if c["BM"] * c["BN"] == c["THREADS"] else [f"THREADS={c['THREADS']} must be BM*BN={c['BM'] * c['BN']}"],
    ),
    Rung(
        3, "warp_shuffle", "Naive with warp-shuffle broadcast",
        "Each lane loads one A value of a 32-wide slice and the warp broadcasts it with __shfl_sync instead of 32 loads.",
        ("004 sgemm_naive",), "03_warp_shuffle.cu",
        params={"BM": 32, "BN": 32, "THREADS": 256},
        space={"THREADS": (32, 64, 128, 256, 512, 1024)},
        constraints=lambda c: ([] if c["BM"] == 32 and c["BN"] == 32 else ["BM and BN must be 32 (the warp width)"])
        + ([] if 32 % max(1, c["THREADS"] // 32) == 0 else [f"THREADS/32={c['THREADS'] // 32} warps must divide the 32 rows"]),
    ),
    Rung(
        4, "smem", "Shared-memory tiling 32x32",
        "A block stages 32x32 tiles of A and B in shared memory; each global element is loaded once per block instead of 32 times.",
        ("000 gemm_32x32_v3", "002 gemm_v02", "Alcanderian sgemm_1"), "04_smem.cu",
        params=_SMEM32, constraints=square_tile,
        space=_SPACE_SQUARE,
        landmark=True,
    ),
    Rung(
        5, "smem_padded", "Shared-memory tiling, padded rows",
        "The shared tile rows are 33 floats wide, so a warp reading a column hits 32 different banks (no bank conflicts).",
        ("000 gemm_32x32_v4", "Alcanderian sgemm_2"), "05_smem_padded.cu",
        params=_SMEM32, constraints=square_tile,
        space=_SPACE_SQUARE,
    ),
    Rung(
        6, "ldg", "Read-only data path (__ldg)",
        "A and B are const __restrict__ and read with __ldg, through the read-only (texture) cache.",
        ("003 ldg", "Alcanderian sgemm_3"), "06_ldg.cu",
        params=_SMEM32, constraints=square_tile, sass_claims=("LDG.E.CONSTANT",),
        space=_SPACE_SQUARE,
    ),
    Rung(
        7, "texture", "Texture objects (tex1Dfetch<float>)",
        "A and B are read through 1-D texture objects over linear memory, the pre-Kepler way to the read-only cache.",
        ("003 texture",), "07_texture.cu",
        params=_SMEM32, constraints=square_tile, textures=1, sass_claims=("TLD",),
        space=_SPACE_SQUARE,
    ),
    Rung(
        8, "reg_accum", "Accumulators in registers",
        "The partial sums live in registers (4 per thread, one output row per warp iteration; the seed's column in column-major) instead of a shared-memory output tile.",
        ("004 sgemm_shared",), "08_reg_accum.cu",
        params={"BM": 32, "BN": 32, "BK": 32, "THREADS": 256},
        space={"BM": p2(3, 7), "BK": p2(3, 6), "THREADS": (64, 128, 256, 512, 1024)},
        constraints=lambda c: ([] if c["BN"] == 32 else ["BN must be 32 (lane -> column of C)"])
        + ([] if c["BM"] % max(1, c["THREADS"] // 32) == 0 else [f"THREADS/32={c['THREADS'] // 32} warps must divide BM={c['BM']}"])
        + scalar_split(c, c["THREADS"]),
    ),
    Rung(
        9, "tile_1d", "1D thread tiling",
        "Each thread computes TM outputs of one column, reusing each B value from shared memory TM times in a register.",
        ("002 gemm_v03",), "09_tile_1d.cu",
        params={"BM": 64, "BN": 64, "BK": 8, "TM": 8},
        space={"BM": p2(5, 7), "BN": p2(5, 7), "BK": p2(3, 5), "TM": p2(2, 4)},
        threads=tile_1d_threads,
        constraints=lambda c: divides(c, "TM", "BM") + scalar_split(c, tile_1d_threads(c)),
    ),
    Rung(
        10, "tile_2d", "2D thread tiling",
        "Each thread computes a TM x TN register tile: TM+TN shared loads feed TM*TN FMAs (outer product).",
        ("002 gemm_v04", "004 sgemm 2x2 tile", "003 BEAST THR_M x THR_N"), "10_tile_2d.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        presets={"2x2": {"BM": 32, "BN": 32, "BK": 32, "TM": 2, "TN": 2}},
        space={"BM": p2(5, 8), "BN": p2(5, 8), "BK": p2(3, 4), "TM": p2(1, 3), "TN": p2(1, 3)},
        threads=thread_tile_threads,
        constraints=tile_2d_constraints,
        landmark=True,
    ),
    Rung(
        11, "vectorized", "Vectorized float4, A transposed in shared memory",
        "Global loads are 128-bit (LDG.E.128) and A is stored transposed so the inner loop reads A and B as float4 (LDS.128).",
        ("000 gemm_32x32_v5", "002 gemm_v05", "003 ldg(float4)"), "11_vectorized.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        threads=thread_tile_threads, constraints=thread_tile_constraints,
        sass_claims=("LDG.E.128", "LDS.128"), space=_SPACE_VEC,
        landmark=True,
    ),
    Rung(
        12, "vec_texture", "Vectorized through texture<float4>",
        "The float4 loads of the vectorized rung go through tex1Dfetch<float4> texture objects instead of LDG.",
        ("003 texture<float4>",), "12_vec_texture.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        threads=thread_tile_threads, constraints=thread_tile_constraints, textures=4,
        space=_SPACE_VEC,
        sass_claims=("TLD", "LDS.128"),  # tex1Dfetch on linear memory compiles to TLD.LZ (seed 003's SASS too), not TEX
    ),
    Rung(
        13, "blocked", "64x64 / 128x128 register-blocked tiles",
        "Each thread's 8x8 (or 4x4) outputs are 2x2 strided 4x4 blocks, so every LDS.128 of a warp is conflict-free; #pragma unroll on the inner loop.",
        ("000 gemm_64x64", "000 gemm_128x128", "fynv g_fgemm"), "13_blocked.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        presets={"64x64": {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}, "128x128": {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}},
        space=_SPACE_VEC,
        threads=thread_tile_threads, constraints=thread_tile_constraints,
        sass_claims=("LDG.E.128", "LDS.128"),
    ),
    Rung(
        14, "double_buffer", "Double buffering + register prefetch",
        "Two shared tiles (ping-pong) and a register prefetch of the next tile overlap global loads with math: one barrier per tile.",
        ("001 sgemm 128x128x8 prefetch", "000 TWO_BUFFER"), "14_double_buffer.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        threads=thread_tile_threads, constraints=double_buffer_constraints,
        space={"BM": p2(5, 8), "BN": p2(5, 8), "BK": p2(2, 5), "TM": p2(2, 4), "TN": p2(2, 4)},  # seed 001's sweep
        sass_claims=("LDG.E.128", "LDS.128"),
    ),
    Rung(
        15, "warp_tiling", "Warp tiling",
        "Block tile -> warp tile (WM x WN) -> thread tile: each warp reads a compact sub-tile of shared memory, improving register reuse and locality.",
        ("002 gemm_v06",), "15_warp_tiling.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "TM": 8, "TN": 8, "SPLITK": 1},
        threads=warp_threads, constraints=lambda c: warp_tile_constraints(c) + splitk_constraints(c),
        space={"BM": p2(5, 8), "BN": p2(5, 8), "BK": p2(3, 5), "WM": p2(4, 7), "WN": p2(4, 7), "TM": p2(2, 3), "TN": p2(2, 3),
               "SPLITK": SPLITK_SPACE},
        sass_claims=("LDG.E.128", "LDS.128"),
        landmark=True,
    ),
    Rung(
        16, "wmma", "Tensor cores through WMMA",
        "FP16/BF16 inputs on the tensor cores with nvcuda::wmma 16x16x16 fragments, FP32 accumulation, output in the input dtype.",
        ("002 gemm_v07",), "16_wmma.cu", dtypes=("fp16", "bf16"),
        params={"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32},
        # tiny problems: four warps of 16x16, many small blocks (the selection model's option)
        presets={"32x32": {"BM": 32, "BN": 32, "BK": 32, "WM": 16, "WN": 16}},
        threads=wmma_threads, constraints=wmma_constraints, smem=wmma_smem,
        space={"BM": p2(5, 8), "BN": p2(5, 8), "BK": p2(4, 5), "WM": p2(4, 6), "WN": p2(4, 6)},
        sass_claims=("HMMA",), min_arch=80,
    ),
    Rung(
        17, "mma_sync", "Tensor cores through mma.sync, ldmatrix and cp.async",
        "mma.sync m16n8k16 on ldmatrix fragments from XOR-swizzled (unpadded) shared tiles, filled by a STAGES-deep cp.async pipeline that bypasses the registers.",
        ("002 future work after gemm_v07",), "17_mma_sync.cu", dtypes=("fp16", "bf16"),
        params={"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 4, "SPLITK": 1},   # the faster of the two presets on the H100
        presets={"128x128": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 4},
                 "128x256": {"BM": 128, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "STAGES": 3},
                 # small problems: 4 warps of 32x32, a light launch (on-line tuning's candidate)
                 "64x64": {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32, "STAGES": 3}},
        threads=mma_threads, constraints=lambda c: mma_constraints(c) + splitk_constraints(c), smem=mma_smem,
        sass_claims=("HMMA.16816", "LDSM", "LDGSTS"), min_arch=80,
        packs=True,
        space={"BM": p2(6, 8), "BN": p2(6, 8), "BK": (32, 64), "WM": p2(5, 7), "WN": p2(5, 7), "STAGES": (2, 3, 4, 5),
               "SPLITK": SPLITK_SPACE},
    ),
    Rung(
        18, "async_simt", "cp.async multistage SIMT, 128x256 tiles",
        "cp.async (LDGSTS) copies global to shared with no register staging through a STAGES-deep pipeline; 128x256 block tiles, 16x8 thread tiles, fragments double-buffered in registers.",
        ("CUTLASS SIMT sgemm (MmaMultistage)", "A100 cp.async 128x256x8 SGEMM", "RTX 4090 register-blocked SGEMM"),
        "18_async_simt.cu",
        params={"BM": 128, "BN": 256, "BK": 8, "WM": 64, "WN": 64, "TM": 16, "TN": 8, "STAGES": 4, "SPLITK": 1, "SKCLUSTER": 0, "SPREAD": 1, "SNAKE": 1,
                "STREAMK": 0},
        presets={
            "128x256": {"BM": 128, "BN": 256, "BK": 8, "WM": 64, "WN": 64, "TM": 16, "TN": 8, "STAGES": 4},
            "256x128": {"BM": 256, "BN": 128, "BK": 8, "WM": 64, "WN": 64, "TM": 8, "TN": 16, "STAGES": 4},
            "128x128": {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "TM": 8, "TN": 8, "STAGES": 4},
            "small": {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "STAGES": 3},
            "skinny": {"BM": 32, "BN": 128, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "STAGES": 3},
            "tall": {"BM": 128, "BN": 32, "BK": 16, "WM": 32, "WN": 32, "TM": 8, "TN": 4, "STAGES": 3},   # N ~ 16
        },
        threads=warp_threads, constraints=lambda c: simt_constraints(c) + splitk_constraints(c), smem=simt_smem,
        sass_claims=("LDGSTS", "LDS.128", "FFMA"), min_arch=80, tail_kernel="gemm_sk_tail",
        packs=True,
        space={"BM": p2(6, 8), "BN": p2(6, 8), "BK": (8, 16, 32), "WM": p2(5, 7), "WN": p2(5, 7),
               "TM": (4, 8, 16), "TN": (4, 8, 16), "STAGES": (2, 3, 4), "SPLITK": SPLITK_SPACE,
               "SKCLUSTER": (0, 1), "SPREAD": (0, 1), "SNAKE": (0, 1), "STREAMK": (0, 1)},
    ),
    Rung(
        19, "wgmma_tma", "Hopper WGMMA fed by TMA",
        "wgmma.mma_async reads A and B from 128-byte-swizzled shared memory through matrix descriptors; one thread's TMA boxes fill a STAGES-deep ring guarded by mbarriers.",
        ("issue 10, section 1.2 (Hopper WGMMA + TMA)",), "19_wgmma_tma.cu", dtypes=("fp16", "bf16"),
        params={"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4, "SPLITK": 1},
        presets={"128x256": {"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4},
                 "128x128": {"BM": 128, "BN": 128, "BK": 64, "WM": 64, "STAGES": 6},
                 "256x128": {"BM": 256, "BN": 128, "BK": 64, "WM": 128, "STAGES": 4}},
        threads=wgmma_threads, constraints=lambda c: wgmma_constraints(c) + splitk_constraints(c), smem=wgmma_smem,
        sass_claims=("HGMMA", "UTMALDG", "SYNCS"), min_arch=90, max_arch=90, tensor_maps=True,
        packs=True,
        space={"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (64, 128), "WM": (64, 128), "STAGES": (2, 3, 4, 5, 6),
               "SPLITK": SPLITK_SPACE},
    ),
    Rung(
        20, "tf32_mma", "FP32 on the tensor cores: TF32 and 3xTF32 through mma.sync",
        "FP32 operands rounded to TF32 (or split into two TF32 parts, three products: FP32-accurate) for mma.sync m16n8k8; fragments by ldmatrix or LDS.128 through a permuted map, swizzled cp.async pipeline.",
        ("CUTLASS FastF32 3xTF32 (a_big b_big + a_big b_small + a_small b_big)",), "20_tf32_mma.cu",
        precisions=("tf32", "3xtf32"),
        params={"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32, "STAGES": 4},
        presets={"128x128": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32, "STAGES": 4},
                 "128x64": {"BM": 128, "BN": 64, "BK": 32, "WM": 64, "WN": 32, "STAGES": 4},
                 "64x64": {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32, "STAGES": 4}},
        threads=warp_threads, constraints=tf32_constraints, smem=tf32_smem,
        sass_claims=("HMMA.1688.F32.TF32", "LDSM", "LDGSTS"), min_arch=80,
        packs=True,
        space={"BM": p2(6, 8), "BN": p2(6, 8), "BK": (32, 64), "WM": (32, 64), "WN": (32, 64), "STAGES": (2, 3, 4)},
    ),
    Rung(
        21, "wgmma_ws", "Warp-specialized persistent WGMMA: setmaxnreg, tile scheduler, clusters",
        "A producer warpgroup (setmaxnreg.dec) runs TMA ahead into the next tile while two consumer warpgroups (setmaxnreg.inc) multiply and store their tile through their own shared staging (stmatrix, then TMA stores; 16-byte rows where TMA cannot or beta != 0); one block per SM loops over the tiles; clusters of 2 along M share B by TMA multicast.",
        ("CUTLASS sm90 warp-specialized persistent GEMM (TMA, cooperative consumers, 2x1 cluster)",), "21_wgmma_ws.cu",
        dtypes=("fp16", "bf16"),
        # GROUP 16 (rung 22's reason): 0.1826 against 0.1845 ms at fp16 4096^3, 0.1778 against 0.1799
        # bf16; 1.4306 against 1.4508 at fp16 8192^3, 1.3738 against 1.3892 bf16, one run each
        # (h100_tune_wgmma_ws_group_*.json)
        # DEFER 1: the tile held in registers and stored during the next, 0.1821 against 0.1845 ms at
        # fp16 4096^3, 0.1783 against 0.1806 bf16; 1.4186 against 1.4321 at fp16 8192^3, 1.3633
        # against 1.3769 bf16, one run each (h100_tune_wgmma_ws_defer_*.json)
        # BALANCE 1: the fewest clusters that take no more waves (persistent_grid), 1.3307 against
        # 1.3471 ms at bf16 8192^3 (1.033x against 1.020x cuBLAS), fp16 1.032x against 1.017x, 4096^3
        # +1.5% / +0.8% (h100_tune_balance_*_s18.json); the LLM suites with it: h100_llm_suite_*_s18.json
        params={"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4, "CLUSTER": 2, "EPI_TMA": 1, "GROUP": 16,
                "STREAMK": 0, "DEFER": 1, "KREV": 0, "BALANCE": 1},
        presets={"128x256": {"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4, "CLUSTER": 2},
                 "128x256_nocluster": {"BM": 128, "BN": 256, "BK": 64, "WM": 64, "STAGES": 4, "CLUSTER": 1},
                 # DEFER 0 with 128x128 tiles: 0.1688 against 0.1788 ms at fp16 1024x14336x4096, 0.1657
                 # against 0.1728 bf16 (h100_tune_wgmma_ws_defer_*_1024x14336x4096.json; cause not found)
                 "128x128": {"BM": 128, "BN": 128, "BK": 64, "WM": 64, "STAGES": 6, "CLUSTER": 2, "DEFER": 0},
                 "256x128": {"BM": 256, "BN": 128, "BK": 64, "WM": 128, "STAGES": 4, "CLUSTER": 2}},
        threads=wgmma_threads, constraints=ws_constraints, smem=ws_smem,
        sass_claims=("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG"), min_arch=90, max_arch=90,
        tensor_maps=True, store_map=True, store_twin=True,
        persistent=True,
        packs=True,
        space={"BN": (128, 256), "BK": (64, 128), "STAGES": (2, 3, 4, 5, 6), "CLUSTER": (1, 2), "EPI_TMA": (0, 1),
               "GROUP": (8, 16), "STREAMK": (0, 1), "DEFER": (0, 1), "KREV": (0, 1), "BALANCE": (0, 1)},
    ),
    Rung(
        22, "wgmma_tf32", "FP32 on Hopper's wgmma: TF32 in the warp-specialized persistent structure",
        "wgmma.mma_async m64nNk8 .tf32 reads K-major FP32 tiles (TMA, 128-byte swizzle) in rung 21's persistent, warp-specialized, clustered loop; TF32 wgmma has no transpose, so the plan runs row-major A and B transposed (C^T = B^T A^T) with the MN-major operand read into registers (wgmma's register-A form), and copies a row-major B only beside a column-major A. 3xtf32: a split pass writes each operand's TF32 big and small parts as two K-major planes, and three wgmmas per k8 step fill a k tile's partial sums, added in FP32. The epilogue stores through TMA from a 32 KB staging where C allows and beta == 0 (EPI_TMA), else 8-byte stores from the accumulators.",
        ("CUTLASS sm90 TF32 GEMM (tfloat32_t, both operands K-major)",), "22_wgmma_tf32.cu",
        precisions=("tf32", "3xtf32"),
        # tf32 without a cluster: the register-A path (row-major A and B) ran 0.3446 ms at 4096^3 and
        # 2.721 at 8192^3 with CLUSTER=1 against 0.3495 / 2.770 with CLUSTER=2, same sitting
        # (h100_tune_wgmma_tf32_rs_*.json); the K-major path was within 0.2% either way
        # GROUP 16: a wave's patch of tiles 16 x 8.25 instead of 8 x 16.5 reads a fifth less from DRAM
        # (Nsight Compute at 4096^3: 352 MB against 428 MB, h100_profile_wgmma_tf32_rs_*_4096.json);
        # 0.3446 ms against 0.3468 at 4096^3, within 0.1% at 8192^3 (h100_tune_wgmma_tf32_group_*.json)
        # EPI_TMA 1: the TMA store epilogue, +3.4-3.8% at K = 1024 (8192x8192x1024, 4096x4096x1024),
        # level at 4096^3, -0.9% at 8192^3 (its power draw lowers the clock there: the shipped table
        # keeps EPI_TMA=0 at 8192^3); h100_tune_wgmma_tf32_epi_*_s14.json. With its staging made
        # conflict-free (session 15) it takes cuBLAS's cycles at 8192^3 but 42% more L2 lookups, a
        # lower clock and 1.5-3.6% more time (h100_tune_wgmma_tf32_{epi,cluster,epiwait}_8192_s15*.json)
        # 256x128 (BM 256, WM 128; first measured in session 15, the tuner had run the preset as
        # 128x128 before): 0.96x at 8192^3 and 0.99x at 4096^3 against 0.986x / 1.00x for 128x256
        # (h100_tune_wgmma_tf32_tiles_*_s15.json)
        # BALANCE 1 (rung 21's reason): at 8192^3 0.985x -> 1.001x cuBLAS-TF32 sampled and 0.993x ->
        # 1.002x sustained, 4096^3 1.006x -> 1.014x (one run, h100_balance_tf32_s18.json); DRAM reads
        # 2.57 -> 2.21 GB at 8192^3 (benchmarks/profiles/h100_l2probe_tf32_8192_balance_s18.json)
        params={"BM": 128, "BN": 256, "BK": 32, "WM": 64, "STAGES": 4, "CLUSTER": 1, "GROUP": 16, "STREAMK": 0,
                "EPI_TMA": 1, "KREV": 0, "BALANCE": 1},
        # 3xtf32: a stage holds both TF32 planes of A and B, and the warps hold a k tile's partial
        # sums beside the sums: 128x128 tiles (BN 256 would need 256 accumulators), 2 stages of 64 KB
        # (3 stages ran 1.86x cuBLAS SGEMM at 8192^3, 2 stages 2.35x: h100_wgmma_3xtf32_*.json)
        planes={"3xtf32": 2},
        precision_params={"3xtf32": {"BN": 128, "STAGES": 2, "CLUSTER": 2, "GROUP": 8}},
        precision_presets={"3xtf32": {
            "128x128": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "STAGES": 3, "CLUSTER": 2},
            "128x128_nocluster": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "STAGES": 3, "CLUSTER": 1},
            "128x64": {"BM": 128, "BN": 64, "BK": 32, "WM": 64, "STAGES": 4, "CLUSTER": 2}}},
        presets={"128x256": {"BM": 128, "BN": 256, "BK": 32, "WM": 64, "STAGES": 4, "CLUSTER": 2},
                 "128x256_nocluster": {"BM": 128, "BN": 256, "BK": 32, "WM": 64, "STAGES": 4, "CLUSTER": 1},
                 "128x128": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "STAGES": 6, "CLUSTER": 2},
                 "256x128": {"BM": 256, "BN": 128, "BK": 32, "WM": 128, "STAGES": 4, "CLUSTER": 2}},
        threads=wgmma_threads, constraints=wstf32_constraints, smem=wstf32_smem,
        sass_claims=("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG"), min_arch=90, max_arch=90,
        tensor_maps=True, store_map=True, store_box=32, persistent=True, k_major=True, register_a=("tf32",),
        space={"BN": (128, 256), "BK": (32, 64), "STAGES": (2, 3, 4, 5, 6), "CLUSTER": (1, 2), "GROUP": (8, 16),
               "STREAMK": (0, 1), "EPI_TMA": (0, 1), "KREV": (0, 1), "BALANCE": (0, 1)},
    ),
    Rung(
        23, "thin", "Thin GEMM: the wide operand streamed once, K split over the warps",
        "For C with a side of at most 32: BR x NS tiles, the wide operand copied once by 16-byte cp.async in its own layout, the thin one read by broadcast, each warp a share of every K tile, the partial sums added in shared memory in a fixed order.",
        ("beyond the seeds: issue 9's few-output-tile shapes (16x4096x4096, 4096x16x4096)",), "23_thin.cu",
        params={"BM": 32, "BN": 16, "BK": 128, "THREADS": 128, "STAGES": 3, "SPLITK": 1},
        presets={"tall": {"BM": 32, "BN": 16, "BK": 128, "THREADS": 128, "STAGES": 3},
                 "wide": {"BM": 16, "BN": 32, "BK": 128, "THREADS": 128, "STAGES": 3},
                 # 8 warps: two per scheduler (Nsight Compute at 4096x16x4096 with 4 warps: 2.52
                 # cycles between a warp's issues, 40% of them issuing, DRAM 65% busy)
                 "tall256": {"BM": 32, "BN": 16, "BK": 256, "THREADS": 256, "STAGES": 3},
                 "wide256": {"BM": 16, "BN": 32, "BK": 256, "THREADS": 256, "STAGES": 3},
                 "tall8": {"BM": 32, "BN": 8, "BK": 128, "THREADS": 128, "STAGES": 3},
                 "wide8": {"BM": 8, "BN": 32, "BK": 128, "THREADS": 128, "STAGES": 3}},
        constraints=lambda c: thin_constraints(c) + splitk_constraints(c), smem=thin_smem,
        sass_claims=("LDGSTS", "LDS.128", "FFMA"), min_arch=80, thin=16,
        space={"BM": (4, 8, 16, 32), "BN": (4, 8, 16, 32), "BK": (64, 128, 256),
               "THREADS": (64, 128, 256), "STAGES": (2, 3, 4, 6), "SPLITK": SPLITK_SPACE},
    ),
    Rung(
        24, "decode", "Decode: thin 16-bit GEMM streaming the wide operand into mma.sync fragments",
        "For 16-bit C with a side of at most 32 (LLM decoding): each thread's 16-byte loads of the wide operand are its mma.sync fragments (the k order permuted to match, byte permutes where it is contiguous along its wide side), no shared memory in the K loop, K split over the warps of a block and the blocks of a cluster, the partial sums added in a fixed order.",
        ("beyond the seeds: issue 40's decode shapes (M of 1 to 32 against 4096-14336 x 4096-14336 weights)",),
        "24_decode.cu", dtypes=("fp16", "bf16"),
        # the default tile: N thin (16), as the bench's thin shape 4096x16x4096 is; decode's M-thin
        # tiles are the presets m8 and m32 (auto's rule sizes both, core/decode.py)
        params={"BM": 64, "BN": 16, "BK": 128, "WK": 4, "DEPTH": 2, "L2PF": 0, "SPLITK": 1, "SKCLUSTER": 0},
        presets={"m8": {"BM": 8, "BN": 64, "BK": 128, "WK": 4, "DEPTH": 2},
                 "m32": {"BM": 32, "BN": 64, "BK": 128, "WK": 4, "DEPTH": 2},
                 "n8": {"BM": 64, "BN": 8, "BK": 128, "WK": 4, "DEPTH": 2},
                 "n32": {"BM": 64, "BN": 32, "BK": 128, "WK": 4, "DEPTH": 2},
                 "m8_deep": {"BM": 8, "BN": 64, "BK": 256, "WK": 8, "DEPTH": 4}},
        threads=_decode.threads, constraints=lambda c: _decode.constraints(c) + splitk_constraints(c), smem=_decode.smem,
        sass_claims=("HMMA.16816", "LDG.E.128"), min_arch=80, thin=_decode.THIN16_MAX, thin_rule=_decode.rule,
        space={"BM": (8, 16, 32, 64, 128), "BN": (8, 16, 32, 64, 128), "BK": (128, 256, 512), "WK": (1, 2, 4, 8),
               "DEPTH": (2, 3, 4, 5), "L2PF": (0, 1), "SPLITK": SPLITK_SPACE, "SKCLUSTER": (0, 1)},
    ),
)

_BY_SLUG = {r.slug: r for r in RUNGS}


def kernels() -> tuple[Rung, ...]:
    """The rungs in ladder order."""
    return RUNGS


def landmarks() -> tuple[Rung, ...]:
    """The ladder's landmark rungs (the report's size sweep)."""
    return tuple(r for r in RUNGS if r.landmark)


def for_dtype(dtype: str, arch: str | int | None = None, precision: str | None = None,
              thin: bool | None = None) -> tuple[Rung, ...]:
    """The rungs that take ``dtype`` and compute it in ``precision`` (None: the dtype's exact one)
    (and run on ``arch`` when given), in ladder order; ``thin`` True / False: only the thin rungs
    (``Rung.thin``) / only the others, None: all."""
    get_dtype(dtype)
    want = resolve_precision(dtype, precision)
    return tuple(r for r in RUNGS if dtype in r.dtypes and want in r.precisions and (arch is None or r.runs_on(arch))
                 and (thin is None or bool(r.thin) == thin))


def get(name: str) -> Rung:
    """A rung by slug (``"warp_tiling"``) or number (``"15"``)."""
    if isinstance(name, Rung):
        return name
    if not isinstance(name, str):
        raise TypeError(f"kernel must be a rung slug (str), got {type(name).__name__}")
    key = name.strip()
    if key in _BY_SLUG:
        return _BY_SLUG[key]
    if key.isdigit():
        for r in RUNGS:
            if r.number == int(key):
                return r
    raise ValueError(f"unknown kernel {name!r}; available: {', '.join(r.slug for r in RUNGS)}")
