"""The ladder: one entry per rung, the single source of truth.

The CLI, the benchmark, the report, the docs table and the tests all read ``RUNGS``; nothing else
lists the rungs by hand. An entry says what the rung is (number, slug, title, one-line summary,
the seed kernels it reproduces), where its source is, which dtypes it takes, its tunable
parameters with defaults, the constraints on them, the launch geometry, and the static claims its
SASS must satisfy (checked in CI by ``tests/test_static_guards.py``).

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

from .arch import LIMITS, ArchLimits, arch_number
from .config import ConfigLike, ConfigSpec, parse_config
from .dtypes import get as get_dtype
from .precision import applies, resolve as resolve_precision
from .tensormaps import L2_PROMOTION, L2_PROMOTION_DEFAULT
from . import decode as _decode
from .splitk import CLUSTER_ARCH, MAX_SPLITK, MAX_SPLITK_CLUSTER

MAX_GRID_Y = 65535
SWITCHES = ("PACK", "EPI_TMA", "SKCLUSTER", "STREAMK", "DEFER", "SPREAD", "SNAKE", "KREV", "BALANCE", "L2PF")   # parameters that take 0 (off) or 1 (on); every other one is a positive int
# the most dynamic shared memory any GPU in the table gives one block (227 KB on sm_90 / sm_100)
MAX_SMEM_PER_BLOCK = max(lim.max_smem_per_block for lim in LIMITS.values())


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


def _splitk_constraints(cfg) -> list[str]:
    v = cfg.get("SPLITK", 1)
    if cfg.get("SKCLUSTER") and not 2 <= v <= MAX_SPLITK_CLUSTER:
        return [f"SKCLUSTER=1 sums the SPLITK slices of a tile in one thread-block cluster: SPLITK={v} must be "
                f"between 2 and {MAX_SPLITK_CLUSTER} (the portable cluster size)"]
    if v > MAX_SPLITK:
        return [f"SPLITK={v} must be at most {MAX_SPLITK} (each slice adds an FP32 copy of C to the workspace "
                f"that the reduction reads)"]
    return []


# ---- constraint helpers ------------------------------------------------------------------------
def _divides(cfg, a: str, b: str) -> list[str]:
    return [] if cfg[b] % cfg[a] == 0 else [f"{a}={cfg[a]} must divide {b}={cfg[b]}"]


def _mult(cfg, a: str, m: int) -> list[str]:
    return [] if cfg[a] % m == 0 else [f"{a}={cfg[a]} must be a multiple of {m}"]


def _float4_split(cfg, threads: int) -> list[str]:
    """The vectorized loaders give every thread a whole number of float4 of each tile."""
    out = []
    if (cfg["BM"] * cfg["BK"]) % (4 * threads):
        out.append(f"BM*BK={cfg['BM'] * cfg['BK']} must be a multiple of 4*THREADS={4 * threads}")
    if (cfg["BK"] * cfg["BN"]) % (4 * threads):
        out.append(f"BK*BN={cfg['BK'] * cfg['BN']} must be a multiple of 4*THREADS={4 * threads}")
    return out


def _scalar_split(cfg, threads: int) -> list[str]:
    """The scalar loaders give every thread a whole number of elements of each tile."""
    out = []
    if (cfg["BM"] * cfg["BK"]) % threads:
        out.append(f"BM*BK={cfg['BM'] * cfg['BK']} must be a multiple of THREADS={threads}")
    if (cfg["BK"] * cfg["BN"]) % threads:
        out.append(f"BK*BN={cfg['BK'] * cfg['BN']} must be a multiple of THREADS={threads}")
    return out


def _tile_1d_threads(cfg) -> int:
    return (cfg["BM"] // cfg["TM"]) * cfg["BN"]


def _thread_tile_threads(cfg) -> int:
    return (cfg["BM"] // cfg["TM"]) * (cfg["BN"] // cfg["TN"])


def _registers(cfg, threads: int, min_blocks: int = 1, prefetch: bool = False) -> list[str]:
    """A TM x TN thread tile must fit the registers a thread may have: 255, or fewer when the
    kernel asks for ``min_blocks`` blocks of ``threads`` per SM (65536 registers). The estimate:
    the accumulators, one fragment of A and of B, ~24 for addresses and loop state, and the
    register prefetch of the next tiles for the double-buffered rungs."""
    cap = min(255, 65536 // (threads * min_blocks) // 8 * 8)
    need = cfg["TM"] * cfg["TN"] + cfg["TM"] + cfg["TN"] + 24
    if prefetch:
        need += (cfg["BM"] * cfg["BK"] + cfg["BK"] * cfg["BN"]) // threads
    return [] if need <= cap else [f"a {cfg['TM']}x{cfg['TN']} thread tile needs about {need} registers per thread; "
                                   f"{threads} threads x {min_blocks} block(s) per SM allow {cap}"]


def _thread_tile_constraints(cfg, min_blocks: int = 1, prefetch: bool = False) -> list[str]:
    out = (_divides(cfg, "TM", "BM") + _divides(cfg, "TN", "BN") + _mult(cfg, "BK", 4) + _mult(cfg, "TN", 4)
           + _mult(cfg, "TM", 4))
    if out:
        return out
    threads = _thread_tile_threads(cfg)
    return _float4_split(cfg, threads) + ([] if threads < 32 else _registers(cfg, threads, min_blocks, prefetch))


def _tile_2d_constraints(cfg) -> list[str]:
    """Scalar loads (no float4 split), and the thread tile within the registers: 256x128 tiles of
    4x8 (1024 threads, 64 registers each) spilled 136 bytes on sm_90a in a tune on the H200
    (benchmarks/results/h200x2_tune_two_workers.json)."""
    out = _divides(cfg, "TM", "BM") + _divides(cfg, "TN", "BN")
    if out:
        return out
    threads = _thread_tile_threads(cfg)
    return _scalar_split(cfg, threads) + ([] if not 32 <= threads <= 1024 else _registers(cfg, threads))


def _double_buffer_constraints(cfg) -> list[str]:
    return _thread_tile_constraints(cfg, min_blocks=2, prefetch=True)


def _warp_threads(cfg) -> int:
    return 32 * (cfg["BM"] // cfg["WM"]) * (cfg["BN"] // cfg["WN"])


def _warp_tile_constraints(cfg) -> list[str]:
    out = _divides(cfg, "WM", "BM") + _divides(cfg, "WN", "BN") + _mult(cfg, "BK", 4)
    out += _divides(cfg, "TM", "WM") + _divides(cfg, "TN", "WN") + _mult(cfg, "TM", 4) + _mult(cfg, "TN", 4)
    if not out:
        lanes = (cfg["WM"] // cfg["TM"]) * (cfg["WN"] // cfg["TN"])
        if lanes != 32:
            out.append(f"(WM/TM)*(WN/TN)={lanes}: a warp tile must hold exactly 32 lanes of TM x TN outputs")
        out += _float4_split(cfg, _warp_threads(cfg))
        if not out and 32 <= _warp_threads(cfg) <= 1024:
            out += _registers(cfg, _warp_threads(cfg), min_blocks=2, prefetch=True)
    return out


def _wmma_threads(cfg) -> int:
    return 32 * (cfg["BM"] // cfg["WM"]) * (cfg["BN"] // cfg["WN"])


def _wmma_smem(cfg) -> int:
    """16_wmma.cu's dynamic shared memory: two stages of 16-bit A and B tiles, rows padded by 8
    (the larger of the two layouts), or the FP32 per-warp epilogue staging [warps][16][WN+4]
    that overlays them. Above 48 KB the launch opts in (cuFuncSetAttribute)."""
    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    ab = 2 * 2 * (max(bm * (bk + 8), bk * (bm + 8)) + max(bk * (bn + 8), bn * (bk + 8)))
    staging = _wmma_threads(cfg) // 32 * 16 * (cfg["WN"] + 4) * 4
    return max(ab, staging)


def _wmma_constraints(cfg) -> list[str]:
    return _divides(cfg, "WM", "BM") + _divides(cfg, "WN", "BN") + _mult(cfg, "WM", 16) + _mult(cfg, "WN", 16) + _mult(cfg, "BK", 16)


# ---- rung 18 (async_simt): cp.async multistage SIMT ------------------------------------------


def _simt_pad(cfg) -> int:
    """18_async_simt.cu's shared row padding: the transposing copies take KC = 8 (or 4, when BK is
    not a multiple of 8) consecutive k per row, and a row stride of 32/KC (mod 32) floats spreads
    a warp's writes over 32 banks."""
    return 32 // (8 if cfg["BK"] % 8 == 0 else 4)


def _simt_smem(cfg) -> int:
    """STAGES stages of As[BK][BM+PAD] and Bs[BK][BN+PAD], FP32, dynamic (above 48 KB the launch opts in);
    with SKCLUSTER=1 at least the partial tile [BM][BN+4] that overlays them after the main loop."""
    pad = _simt_pad(cfg)
    pipeline = cfg["STAGES"] * cfg["BK"] * (cfg["BM"] + pad + cfg["BN"] + pad) * 4
    return max(pipeline, cfg["BM"] * (cfg["BN"] + 4) * 4) if cfg.get("SKCLUSTER") else pipeline


def _simt_register_estimate(cfg) -> tuple[int, int]:
    """(4-byte copies per thread per stage, registers per thread) as 18_async_simt.cu estimates
    them (COPIES, REG_ESTIMATE): the accumulators, two buffers of fragments, ~48 for indices,
    pointers and loop state, and one per copy."""
    copies = -(-(cfg["BM"] + cfg["BN"]) * cfg["BK"] // _warp_threads(cfg))
    return copies, cfg["TM"] * cfg["TN"] + 2 * (cfg["TM"] + cfg["TN"]) + 48 + copies


def _simt_registers(cfg) -> list[str]:
    """18_async_simt.cu's register estimate (its launch bounds use the same): the accumulators,
    two buffers of A and B fragments, ~48 for indices, pointers and loop state, and ~1 per 4-byte
    copy a thread issues per stage (at most 24). It must fit the 255 registers a thread may have,
    and with more than 256 threads (fewer than 255 registers each) leave 24 of headroom."""
    threads = _warp_threads(cfg)
    copies, need = _simt_register_estimate(cfg)
    if copies > 24:
        return [f"(BM+BN)*BK/THREADS = {copies} copies per thread per stage; at most 24 fit beside the accumulators "
                f"(a smaller BK or more threads)"]
    cap = 255 if threads <= 256 else 65536 // threads - 24
    return [] if need <= cap else [f"a {cfg['TM']}x{cfg['TN']} thread tile with double-buffered fragments and {copies} "
                                   f"copies per stage needs about {need} registers per thread; {threads} threads per "
                                   f"block allow {cap}"]


def _simt_min_blocks(cfg) -> int:
    """The blocks per SM 18_async_simt.cu's launch bounds ask for (MIN_BLOCKS): as many as its
    register estimate plus 24 of headroom allow, 1 to 4."""
    return max(1, min(4, 65536 // (_warp_threads(cfg) * (_simt_register_estimate(cfg)[1] + 24))))


def _simt_streamk(cfg) -> list[str]:
    """STREAMK=1 (18_async_simt.cu's stream-K tail) counts a wave as one block per SM, and writes C
    itself: a tile whose launch bounds allow one block per SM, without split-K."""
    if not cfg.get("STREAMK"):
        return []
    out = _switch_reasons(cfg, STREAMK=_STREAMK)
    if out:
        return out
    if cfg.get("SPLITK", 1) > 1:
        out.append(f"STREAMK=1 splits the last wave by k tiles and SPLITK={cfg['SPLITK']} every tile: use one or the other")
    if not out and _simt_min_blocks(cfg) > 1:
        out.append(f"STREAMK=1 counts a wave as one block per SM; a {cfg['BM']}x{cfg['BN']} tile with {cfg['TM']}x{cfg['TN']} "
                   f"thread tiles runs {_simt_min_blocks(cfg)} blocks per SM (use STREAMK=0)")
    return out


def _simt_constraints(cfg) -> list[str]:
    out = _divides(cfg, "WM", "BM") + _divides(cfg, "WN", "BN") + _divides(cfg, "TM", "WM") + _divides(cfg, "TN", "WN")
    out += _mult(cfg, "TM", 4) + _mult(cfg, "TN", 4) + _mult(cfg, "BK", 4)
    out += [f"{k}={cfg[k]} must be a multiple of 32 (a warp's transposing copy covers whole rows)"
            for k in ("BM", "BN") if cfg[k] % 32]
    if cfg["BK"] > 32:
        out.append(f"BK={cfg['BK']} must be at most 32 (the k loop is fully unrolled: code and registers grow with BK)")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']} must be at least 2 (a stage in flight while one is computed)")
    if out:
        return out
    lanes = (cfg["WM"] // cfg["TM"]) * (cfg["WN"] // cfg["TN"])
    if lanes != 32:
        return [f"(WM/TM)*(WN/TN)={lanes}: a warp tile must hold exactly 32 lanes of TM x TN outputs"]
    if _simt_smem(cfg) > MAX_SMEM_PER_BLOCK:
        what = "the stages or the partial tile" if cfg.get("SKCLUSTER") else f"STAGES*BK*(BM+BN+2*{_simt_pad(cfg)})*4 ="
        out.append(f"{what} {_simt_smem(cfg)} B of shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    if 32 <= _warp_threads(cfg) <= 1024:
        out += _simt_registers(cfg)
        out += [] if out else _simt_streamk(cfg)
    return out


def _mma_threads(cfg) -> int:
    return 32 * (cfg["BM"] // cfg["WM"]) * (cfg["BN"] // cfg["WN"])


def _mma_smem(cfg) -> int:
    """17_mma_sync.cu's dynamic shared memory: STAGES unpadded (swizzled) 16-bit A and B tiles, or
    the FP32 per-warp epilogue staging [warps][16][WN+8] that overlays them, whichever is larger."""
    pipeline = cfg["STAGES"] * (cfg["BM"] * cfg["BK"] + cfg["BK"] * cfg["BN"]) * 2
    staging = _mma_threads(cfg) // 32 * 16 * (cfg["WN"] + 8) * 4
    return max(pipeline, staging)


def _mma_regs(cfg) -> list[str]:
    """A warp tile must fit a thread's registers (255, or 65536 / THREADS for bigger blocks): its
    WM*WN/32 FP32 accumulators, two sets of fragments (WM/16 x 4 + WN/8 x 2 registers each), about
    40 for addresses, copy state and loop counters, and 2 per 16-byte copy a thread issues per
    tile (its 64-bit source address). Fitted to ptxas (NVRTC 13, sm_90a and sm_80, every layout,
    every vector-access combination): 230-254 registers at the default tile (estimate 244); a
    single warp copying 40 chunks per tile spills."""
    acc = cfg["WM"] * cfg["WN"] // 32
    threads = _mma_threads(cfg)
    copies = -(-cfg["BM"] * cfg["BK"] // 8 // threads) - (-cfg["BK"] * cfg["BN"] // 8 // threads)
    need = acc + 2 * (cfg["WM"] // 16 * 4 + cfg["WN"] // 8 * 2) + 40 + 2 * copies
    cap = min(255, 65536 // threads // 8 * 8)
    return [] if need <= cap else [f"a {cfg['WM']}x{cfg['WN']} warp tile with {copies} copies per thread and tile needs "
                                   f"about {need} registers per thread; {threads} threads allow {cap}"]


def _pow2(cfg, a: str, least: int) -> list[str]:
    v = cfg[a]
    return [] if v >= least and v & (v - 1) == 0 else [f"{a}={v} must be a power of two >= {least}"]


def _mma_constraints(cfg) -> list[str]:
    """What 17_mma_sync.cu static_asserts: m16 x n16 pieces per warp, an even number of k16 steps
    per tile (the two fragment register sets alternate), power-of-two widths (the XOR swizzle
    permutes 16-byte chunks inside a row), at least two stages, and shared memory within the
    227 KB a block may have on the largest GPUs (a smaller device refuses it at launch)."""
    out = (_divides(cfg, "WM", "BM") + _divides(cfg, "WN", "BN") + _mult(cfg, "WM", 16) + _mult(cfg, "WN", 16)
           + _mult(cfg, "BK", 32) + _pow2(cfg, "BM", 16) + _pow2(cfg, "BN", 16) + _pow2(cfg, "BK", 32))
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']}: the cp.async pipeline needs at least 2 stages")
    if out:
        return out
    smem = _mma_smem(cfg)
    if smem > MAX_SMEM_PER_BLOCK:
        out.append(f"{cfg['STAGES']} stages of {cfg['BM']}x{cfg['BK']} + {cfg['BK']}x{cfg['BN']} need {smem} B of "
                   f"shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    return out + _mma_regs(cfg)


# ---- rung 19 (wgmma_tma): WGMMA fed by TMA ---------------------------------------------------
def _wgmma_threads(cfg) -> int:
    """BM/WM consumer warpgroups of 128 threads and a producer warpgroup."""
    return 128 * (cfg["BM"] // cfg["WM"]) + 128


def _wgmma_smem(cfg) -> int:
    """19_wgmma_tma.cu's dynamic shared memory: 1024 bytes to align the base to the 128-byte
    swizzle's period, STAGES 16-bit A and B tiles or the FP32 per-warp epilogue staging
    [warps][16][BN+8] that overlays them (the larger), and a full and an empty mbarrier per stage."""
    pipeline = cfg["STAGES"] * (cfg["BM"] + cfg["BN"]) * cfg["BK"] * 2
    staging = cfg["BM"] // cfg["WM"] * 4 * 16 * (cfg["BN"] + 8) * 4
    return 1024 + max(pipeline, staging) + 16 * cfg["STAGES"]


def _wgmma_constraints(cfg, smem=_wgmma_smem) -> list[str]:
    """What 19_wgmma_tma.cu static_asserts: one or two consumer warpgroups of 64 or 128 rows, a
    wgmma N of 64, 128 or 256 (the block's BN), BK in whole 64-element swizzle rows and at most a
    TMA box side (256), at least two stages, at most 128 FP32 accumulators per thread (with 384
    threads a thread may have 168 registers; ptxas used 154 at 128), and shared memory within what
    a block may have."""
    out = []
    if cfg["WM"] not in (64, 128):
        out.append(f"WM={cfg['WM']} must be 64 or 128 (one or two m64 wgmmas per warpgroup)")
    elif cfg["BM"] % cfg["WM"] or cfg["BM"] // cfg["WM"] not in (1, 2):
        out.append(f"BM={cfg['BM']} must be 1 or 2 times WM={cfg['WM']} (one or two consumer warpgroups)")
    if cfg["BN"] not in (64, 128, 256):
        out.append(f"BN={cfg['BN']} must be 64, 128 or 256 (the N of one wgmma)")
    if cfg["BK"] % 64 or cfg["BK"] > 256:
        out.append(f"BK={cfg['BK']} must be a multiple of 64 (a 128-byte swizzle row) and at most 256 (a TMA box side)")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']}: the pipeline needs at least 2 stages")
    if out:
        return out
    acc = cfg["WM"] // 64 * cfg["BN"] // 2
    if acc > 128:
        out.append(f"a {cfg['WM']}x{cfg['BN']} warpgroup tile needs {acc} FP32 accumulators per thread; at most 128 fit")
    if smem(cfg) > MAX_SMEM_PER_BLOCK:
        out.append(f"{cfg['STAGES']} stages of {cfg['BM']}x{cfg['BK']} + {cfg['BK']}x{cfg['BN']} need {smem(cfg)} B "
                   f"of shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    return out


# ---- rung 21 (wgmma_ws): warp-specialized, persistent WGMMA ------------------------------------
def _ws_smem(cfg) -> int:
    """21_wgmma_ws.cu's dynamic shared memory: 1024 bytes to align the base to the 128-byte
    swizzle's period, STAGES 16-bit A and B tiles, the epilogue's own staging (the producer refills
    the stages while the consumers store: each consumer warp has 16 rows x min(BN, 128) 16-bit
    outputs), and a full and an empty mbarrier per stage."""
    staging = cfg["BM"] // cfg["WM"] * 4 * 16 * min(cfg["BN"], 128) * 2
    return 1024 + cfg["STAGES"] * (cfg["BM"] + cfg["BN"]) * cfg["BK"] * 2 + staging + 16 * cfg["STAGES"]


def _cluster_reasons(cfg) -> list[str]:
    """Rungs 21 and 22: clusters of 1 or 2 CTAs along M (the B tile multicast to both)."""
    if cfg.get("CLUSTER", 1) not in (1, 2):
        return [f"CLUSTER={cfg['CLUSTER']} must be 1 or 2 (blocks per cluster along M, sharing B by multicast)"]
    return []


def _switch_reasons(cfg, **meanings: tuple[str, str]) -> list[str]:
    """A reason for each switch of ``meanings`` (name: what 0 and 1 mean) that ``cfg`` sets to
    neither 0 nor 1."""
    return [f"{k}={cfg[k]} must be 0 ({off}) or 1 ({on})" for k, (off, on) in meanings.items()
            if cfg.get(k, 0) not in (0, 1)]


_STREAMK = ("whole tiles only", "the last wave split by k tiles")   # rungs 21 and 22
_KREV = ("every unit's k tiles first to last", "odd waves' units last to first (kernels/ws.cuh)")   # rungs 21 and 22
_BALANCE = ("a cluster per CLUSTER SMs", "the fewest clusters that take no more waves")            # rungs 21 and 22


def _krev_reasons(cfg) -> list[str]:
    """Rungs 21 and 22: KREV=1 takes no stream-K tail (a unit's pieces on several clusters would
    have to agree on its direction; with both, rung 21's DEFER=1 kernel spilled 80 bytes)."""
    if cfg.get("KREV") == 1 and cfg.get("STREAMK") == 1:
        return ["KREV=1 (backward odd waves) takes no stream-K tail: STREAMK must be 0"]
    return []


def _group_reasons(cfg) -> list[str]:
    """Rungs 21 and 22: GROUP row tiles per group of the persistent launch order (ws.cuh), whole
    clusters."""
    group = cfg.get("GROUP", 8)
    if not 1 <= group <= 64 or group % cfg.get("CLUSTER", 1):
        return [f"GROUP={group} must be 1 to 64 row tiles and a multiple of CLUSTER={cfg.get('CLUSTER', 1)} "
                f"(the launch order's groups are whole clusters)"]
    return []


def _ws_constraints(cfg) -> list[str]:
    """Rung 19's (``_wgmma_constraints``, with this rung's shared memory), and what
    21_wgmma_ws.cu adds: exactly two consumer warpgroups (its register split, setmaxnreg 232 for
    them and 40 for the producer, is made for 384 threads), clusters of 1 or 2 blocks, and EPI_TMA
    a switch (its TMA store boxes, 16 rows x 64 outputs, fit every tile and the staging as it is)."""
    out = _wgmma_constraints(cfg, _ws_smem)
    if not out and cfg["BM"] != 2 * cfg["WM"]:
        out.append(f"BM={cfg['BM']} must be 2 x WM={cfg['WM']}: two consumer warpgroups (the register split "
                   f"between them and the producer is made for 384 threads)")
    out += _cluster_reasons(cfg) + _group_reasons(cfg) + _krev_reasons(cfg)
    out += _switch_reasons(cfg, STREAMK=_STREAMK, KREV=_KREV, BALANCE=_BALANCE,
                           EPI_TMA=("staged 16-byte stores", "TMA stores where C allows"),
                           DEFER=("each tile stored at its end",
                                  "held in registers and stored during the next tile's main loop"))
    return out


# ---- rung 22 (wgmma_tf32): TF32 wgmma in rung 21's structure ----------------------------------
_WSTF32_EPI_B = 2 * 2 * 64 * 32 * 4   # 22_wgmma_tf32.cu's EPI_B: two 8 KB chunks per consumer warpgroup


def _wstf32_smem(cfg, planes: int = 1) -> int:
    """22_wgmma_tf32.cu's dynamic shared memory: 1024 bytes to align the base, STAGES FP32 A and B
    tiles (K-major) of ``planes`` planes each (3xtf32: 2, the big and the small TF32 parts), with
    EPI_TMA the TMA store's staging (two 64 x 32 FP32 chunks per consumer warpgroup: 32 KB), and a
    full and an empty mbarrier per stage."""
    return (1024 + cfg["STAGES"] * (cfg["BM"] + cfg["BN"]) * cfg["BK"] * 4 * planes
            + (_WSTF32_EPI_B if cfg.get("EPI_TMA") else 0) + 16 * cfg["STAGES"])


def _wstf32_constraints(cfg, planes: int = 1) -> list[str]:
    """What 22_wgmma_tf32.cu static_asserts: rung 21's (two consumer warpgroups of 64 or 128 rows,
    BN a wgmma N, at most 128 accumulators per thread, clusters of 1 or 2), BK whole 128-byte
    swizzle rows of 32 FP32 up to a TMA box side, and shared memory within a block's. With two
    planes (3xtf32) a stage holds both parts of A and B, and a thread holds its sums and a k tile's
    partial sums: twice the accumulators (a 64 x 128 warpgroup tile at most)."""
    out = []
    if cfg["WM"] not in (64, 128) or cfg["BM"] != 2 * cfg["WM"]:
        out.append(f"BM={cfg['BM']} must be 2 x WM, WM={cfg['WM']} 64 or 128 (two consumer warpgroups)")
    if cfg["BN"] not in (64, 128, 256):
        out.append(f"BN={cfg['BN']} must be 64, 128 or 256 (the N of one wgmma)")
    if cfg["BK"] % 32 or cfg["BK"] > 256:
        out.append(f"BK={cfg['BK']} must be a multiple of 32 (a 128-byte swizzle row of FP32) and at most 256")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']}: the pipeline needs at least 2 stages")
    out += _cluster_reasons(cfg) + _group_reasons(cfg) + _krev_reasons(cfg)
    out += _switch_reasons(cfg, STREAMK=_STREAMK, KREV=_KREV, BALANCE=_BALANCE, EPI_TMA=("8-byte stores from the accumulators",
                                                                       "TMA stores where C allows"))
    if out:
        return out
    if planes * cfg["WM"] // 64 * cfg["BN"] // 2 > 128:
        out.append(f"a {cfg['WM']}x{cfg['BN']} warpgroup tile needs more than 128 FP32 accumulators per thread"
                   + (" with 3xtf32's partial sums beside the sums" if planes > 1 else ""))
    if _wstf32_smem(cfg, planes) > MAX_SMEM_PER_BLOCK:
        out.append(f"{cfg['STAGES']} stages of {cfg['BM']}x{cfg['BK']} + {cfg['BK']}x{cfg['BN']} FP32"
                   + (f" in {planes} planes (3xtf32's TF32 parts)" if planes > 1 else "")
                   + (" and the TMA store's 32 KB staging (EPI_TMA=1)" if cfg.get("EPI_TMA") else "")
                   + f" need {_wstf32_smem(cfg, planes)} B of shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    return out


# ---- rung 20 (tf32_mma): FP32 operands on the tensor cores -------------------------------------


def _tf32_smem(cfg) -> int:
    """20_tf32_mma.cu's dynamic shared memory: STAGES swizzled FP32 tiles of A and B (no padding)."""
    return cfg["STAGES"] * (cfg["BM"] * cfg["BK"] + cfg["BK"] * cfg["BN"]) * 4


def _tf32_regs(cfg) -> list[str]:
    """A warp tile must fit a thread's registers (255, or 65536 / THREADS for bigger blocks) in BOTH
    precisions; 3xTF32 needs more: the WM*WN/32 accumulators, two sets of raw fragments
    (WM/4 + WN/4 registers each) and the big and small parts of one set, about 40 for addresses and
    loop state, and 2 per 16-byte copy a thread issues per tile. Fitted to ptxas (NVRTC 13, sm_90a
    and sm_80, every layout, with and without vector access): 64x32 warp tiles 152-196 registers in
    TF32 and 138-200 in 3xTF32 (estimate 216 with 8 warps, 224 with 4), 32x32 96-128 (estimate
    152); 64x64 warp tiles spill 100-160 bytes in 3xTF32 (estimate 296: refused)."""
    threads = _warp_threads(cfg)
    copies = -(-cfg["BM"] * cfg["BK"] // 4 // threads) - (-cfg["BK"] * cfg["BN"] // 4 // threads)
    need = cfg["WM"] * cfg["WN"] // 32 + 4 * (cfg["WM"] // 4 + cfg["WN"] // 4) + 40 + 2 * copies
    cap = min(255, 65536 // threads // 8 * 8)
    return [] if need <= cap else [f"a {cfg['WM']}x{cfg['WN']} warp tile with {copies} copies per thread and tile needs "
                                   f"about {need} registers per thread in 3xTF32; {threads} threads allow {cap}"]


def _tf32_constraints(cfg) -> list[str]:
    """What 20_tf32_mma.cu static_asserts: warp tiles in groups of 32 rows and columns (the
    permuted fragment map), power-of-two tile widths with rows of at least 8 chunks of 16 bytes
    (the swizzles), BK of 32 or 64 (an even number of k8 steps), a whole number of each row's
    chunks per thread, at least two stages; shared memory within the 227 KB a block may have."""
    out = (_divides(cfg, "WM", "BM") + _divides(cfg, "WN", "BN") + _mult(cfg, "WM", 32) + _mult(cfg, "WN", 32)
           + _pow2(cfg, "BM", 32) + _pow2(cfg, "BN", 32))
    if cfg["BK"] not in (32, 64):
        out.append(f"BK={cfg['BK']} must be 32 or 64 (rows of 8 or 16 chunks, an even number of k8 steps)")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']}: the cp.async pipeline needs at least 2 stages")
    if out:
        return out
    threads, widest = _warp_threads(cfg), max(cfg["BM"], cfg["BN"], cfg["BK"])
    if threads % (widest // 4):
        out.append(f"THREADS={threads} must be a multiple of {widest // 4}, the 16-byte chunks of a {widest}-float "
                   f"shared row (each thread copies whole columns of chunks)")
    smem = _tf32_smem(cfg)
    if smem > MAX_SMEM_PER_BLOCK:
        out.append(f"{cfg['STAGES']} stages of {cfg['BM']}x{cfg['BK']} + {cfg['BK']}x{cfg['BN']} FP32 need {smem} B "
                   f"of shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    return out + (_tf32_regs(cfg) if 32 <= threads <= 1024 else [])


# ---- rung 23 (thin): one side of C at most 32 wide -----------------------------------------------
THIN_MAX = 32           # the widest thin side the kernel takes (its 4-k chunks x 8 k groups)


def thin_sides(cfg) -> tuple[int, int]:
    """(thin, wide) sides of a thin tile: N is the thin one when BN <= BM, else M (23_thin.cu)."""
    return min(cfg["BM"], cfg["BN"]), max(cfg["BM"], cfg["BN"])


def _thin_smem(cfg) -> int:
    """23_thin.cu's dynamic shared memory, the larger of its two uses: STAGES stages of the wide
    operand's BR x BK tile (rows padded by 16 floats in the layout that pads) and the thin one's
    BK x NS tile (rows of NS + 4 floats when NS/4 is even), or after the K loop the THREADS/4
    slots of BR x NS partial sums (+4 floats each), FP32."""
    ns, br = thin_sides(cfg)
    q_ld = ns + (0 if (ns // 4) % 2 else 4)
    pipe = cfg["STAGES"] * cfg["BK"] * (br + (16 if br % 32 == 0 else 0) + q_ld) * 4
    red = cfg["THREADS"] // 4 * (br * ns + 4) * 4
    return max(pipe, red)


def _thin_constraints(cfg) -> list[str]:
    """What 23_thin.cu static_asserts: a thin side of 4..32 in steps of 4, a wide side of 16 or 32
    rows (whole 16-row groups; 64 rows spilled under NVRTC 13.0 on the H100), whole 4-k chunks of each K tile per thread (BK a multiple of THREADS), at most
    128 partial sums per thread, at least 2 stages; shared memory within a block's."""
    ns, br = thin_sides(cfg)
    out = []
    if ns % 4 or ns > THIN_MAX:
        out.append(f"the thin side min(BM, BN)={ns} must be a multiple of 4, at most {THIN_MAX}")
    if br % 16 or br > 32:
        out.append(f"the wide side max(BM, BN)={br} must be 16 or 32 (4 row groups of float4; 64-row tiles, 16 rows "
                   f"per thread, spilled 8-16 bytes under NVRTC 13.0)")
    if cfg["BK"] % cfg["THREADS"]:
        out.append(f"BK={cfg['BK']} must be a multiple of THREADS={cfg['THREADS']} (each thread takes whole 4-k "
                   f"chunks of every K tile)")
    if br // 4 * ns > 128:
        out.append(f"a {cfg['BM']}x{cfg['BN']} tile gives each thread {br // 4}x{ns} = {br // 4 * ns} partial sums; "
                   f"at most 128 fit the registers")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']} must be at least 2 (a stage in flight while one is computed)")
    if not out and _thin_smem(cfg) > MAX_SMEM_PER_BLOCK:
        out.append(f"the tile needs {_thin_smem(cfg)} B of shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    return out


def thin_rule_config(rung: Rung, M: int, N: int) -> dict[str, int]:
    """The thin tile for a kernel-view M x N (one of them at most ``rung.thin``): the thin side the
    smallest of 4, 8, 16, 32 that holds it, the wide side 32 rows (16 beside a thin side of 32: at
    most 128 partial sums per thread), the rung's other defaults."""
    thin = min(M, N)
    ns = next(s for s in (4, 8, 16, 32) if s >= min(thin, THIN_MAX))
    br = min(32, 512 // ns)
    bm, bn = (br, ns) if N <= M else (ns, br)
    return rung.config({"BM": bm, "BN": bn})


# ---- the ladder --------------------------------------------------------------------------------
_SIMPLE32 = {"BM": 32, "BN": 32, "THREADS": 1024}
_SMEM32 = {"BM": 32, "BN": 32, "BK": 32, "THREADS": 1024}


def _square_tile(cfg) -> list[str]:
    """Rungs 4-7: square BM = BN = BK tiles, one thread per element of C (one load per tile)."""
    out = [] if cfg["BM"] == cfg["BN"] == cfg["BK"] else [f"BM, BN and BK must be equal (got {cfg['BM']}, {cfg['BN']}, {cfg['BK']})"]
    return out + ([] if cfg["THREADS"] == cfg["BM"] * cfg["BN"] else [f"THREADS={cfg['THREADS']} must be BM*BN={cfg['BM'] * cfg['BN']}"])


# ---- the tuner's search spaces (gemmlab tune) --------------------------------------------------
# Powers of two around each rung's defaults. The constraints above prune the product before any
# compile; the ranges keep every pruned space at a few hundred tile configurations at most (an
# exhaustive run stays in minutes) while holding seed 001's sweep (bm, bk, bn, rm, rn) for the
# thread-tiled rungs. The split-K rungs try each tile with every SPLITK of SPLITK_SPACE (x5: the
# auto strategy then samples with TPE; the SPLITK values > 1 share one compiled kernel per tile).
def _p2(lo: int, hi: int) -> tuple[int, ...]:
    """Powers of two from 2**lo to 2**hi."""
    return tuple(2 ** i for i in range(lo, hi + 1))


_SPACE_SIMPLE = {"BM": _p2(3, 5), "BN": _p2(3, 5), "THREADS": (64, 128, 256, 512, 1024)}
_SPACE_SQUARE = {"BM": _p2(3, 5), "BN": _p2(3, 5), "BK": _p2(3, 5), "THREADS": (64, 256, 1024)}
_SPACE_VEC = {"BM": _p2(5, 8), "BN": _p2(5, 8), "BK": _p2(2, 4), "TM": _p2(2, 3), "TN": _p2(2, 3)}

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
        params=_SMEM32, constraints=_square_tile,
        space=_SPACE_SQUARE,
        landmark=True,
    ),
    Rung(
        5, "smem_padded", "Shared-memory tiling, padded rows",
        "The shared tile rows are 33 floats wide, so a warp reading a column hits 32 different banks (no bank conflicts).",
        ("000 gemm_32x32_v4", "Alcanderian sgemm_2"), "05_smem_padded.cu",
        params=_SMEM32, constraints=_square_tile,
        space=_SPACE_SQUARE,
    ),
    Rung(
        6, "ldg", "Read-only data path (__ldg)",
        "A and B are const __restrict__ and read with __ldg, through the read-only (texture) cache.",
        ("003 ldg", "Alcanderian sgemm_3"), "06_ldg.cu",
        params=_SMEM32, constraints=_square_tile, sass_claims=("LDG.E.CONSTANT",),
        space=_SPACE_SQUARE,
    ),
    Rung(
        7, "texture", "Texture objects (tex1Dfetch<float>)",
        "A and B are read through 1-D texture objects over linear memory, the pre-Kepler way to the read-only cache.",
        ("003 texture",), "07_texture.cu",
        params=_SMEM32, constraints=_square_tile, textures=1, sass_claims=("TLD",),
        space=_SPACE_SQUARE,
    ),
    Rung(
        8, "reg_accum", "Accumulators in registers",
        "The partial sums live in registers (4 per thread, one output row per warp iteration; the seed's column in column-major) instead of a shared-memory output tile.",
        ("004 sgemm_shared",), "08_reg_accum.cu",
        params={"BM": 32, "BN": 32, "BK": 32, "THREADS": 256},
        space={"BM": _p2(3, 7), "BK": _p2(3, 6), "THREADS": (64, 128, 256, 512, 1024)},
        constraints=lambda c: ([] if c["BN"] == 32 else ["BN must be 32 (lane -> column of C)"])
        + ([] if c["BM"] % max(1, c["THREADS"] // 32) == 0 else [f"THREADS/32={c['THREADS'] // 32} warps must divide BM={c['BM']}"])
        + _scalar_split(c, c["THREADS"]),
    ),
    Rung(
        9, "tile_1d", "1D thread tiling",
        "Each thread computes TM outputs of one column, reusing each B value from shared memory TM times in a register.",
        ("002 gemm_v03",), "09_tile_1d.cu",
        params={"BM": 64, "BN": 64, "BK": 8, "TM": 8},
        space={"BM": _p2(5, 7), "BN": _p2(5, 7), "BK": _p2(3, 5), "TM": _p2(2, 4)},
        threads=_tile_1d_threads,
        constraints=lambda c: _divides(c, "TM", "BM") + _scalar_split(c, _tile_1d_threads(c)),
    ),
    Rung(
        10, "tile_2d", "2D thread tiling",
        "Each thread computes a TM x TN register tile: TM+TN shared loads feed TM*TN FMAs (outer product).",
        ("002 gemm_v04", "004 sgemm 2x2 tile", "003 BEAST THR_M x THR_N"), "10_tile_2d.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        presets={"2x2": {"BM": 32, "BN": 32, "BK": 32, "TM": 2, "TN": 2}},
        space={"BM": _p2(5, 8), "BN": _p2(5, 8), "BK": _p2(3, 4), "TM": _p2(1, 3), "TN": _p2(1, 3)},
        threads=_thread_tile_threads,
        constraints=_tile_2d_constraints,
        landmark=True,
    ),
    Rung(
        11, "vectorized", "Vectorized float4, A transposed in shared memory",
        "Global loads are 128-bit (LDG.E.128) and A is stored transposed so the inner loop reads A and B as float4 (LDS.128).",
        ("000 gemm_32x32_v5", "002 gemm_v05", "003 ldg(float4)"), "11_vectorized.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        threads=_thread_tile_threads, constraints=_thread_tile_constraints,
        sass_claims=("LDG.E.128", "LDS.128"), space=_SPACE_VEC,
        landmark=True,
    ),
    Rung(
        12, "vec_texture", "Vectorized through texture<float4>",
        "The float4 loads of the vectorized rung go through tex1Dfetch<float4> texture objects instead of LDG.",
        ("003 texture<float4>",), "12_vec_texture.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        threads=_thread_tile_threads, constraints=_thread_tile_constraints, textures=4,
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
        threads=_thread_tile_threads, constraints=_thread_tile_constraints,
        sass_claims=("LDG.E.128", "LDS.128"),
    ),
    Rung(
        14, "double_buffer", "Double buffering + register prefetch",
        "Two shared tiles (ping-pong) and a register prefetch of the next tile overlap global loads with math: one barrier per tile.",
        ("001 sgemm 128x128x8 prefetch", "000 TWO_BUFFER"), "14_double_buffer.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
        threads=_thread_tile_threads, constraints=_double_buffer_constraints,
        space={"BM": _p2(5, 8), "BN": _p2(5, 8), "BK": _p2(2, 5), "TM": _p2(2, 4), "TN": _p2(2, 4)},  # seed 001's sweep
        sass_claims=("LDG.E.128", "LDS.128"),
    ),
    Rung(
        15, "warp_tiling", "Warp tiling",
        "Block tile -> warp tile (WM x WN) -> thread tile: each warp reads a compact sub-tile of shared memory, improving register reuse and locality.",
        ("002 gemm_v06",), "15_warp_tiling.cu",
        params={"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "TM": 8, "TN": 8, "SPLITK": 1},
        threads=_warp_threads, constraints=lambda c: _warp_tile_constraints(c) + _splitk_constraints(c),
        space={"BM": _p2(5, 8), "BN": _p2(5, 8), "BK": _p2(3, 5), "WM": _p2(4, 7), "WN": _p2(4, 7), "TM": _p2(2, 3), "TN": _p2(2, 3),
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
        threads=_wmma_threads, constraints=_wmma_constraints, smem=_wmma_smem,
        space={"BM": _p2(5, 8), "BN": _p2(5, 8), "BK": _p2(4, 5), "WM": _p2(4, 6), "WN": _p2(4, 6)},
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
        threads=_mma_threads, constraints=lambda c: _mma_constraints(c) + _splitk_constraints(c), smem=_mma_smem,
        sass_claims=("HMMA.16816", "LDSM", "LDGSTS"), min_arch=80,
        packs=True,
        space={"BM": _p2(6, 8), "BN": _p2(6, 8), "BK": (32, 64), "WM": _p2(5, 7), "WN": _p2(5, 7), "STAGES": (2, 3, 4, 5),
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
        threads=_warp_threads, constraints=lambda c: _simt_constraints(c) + _splitk_constraints(c), smem=_simt_smem,
        sass_claims=("LDGSTS", "LDS.128", "FFMA"), min_arch=80, tail_kernel="gemm_sk_tail",
        packs=True,
        space={"BM": _p2(6, 8), "BN": _p2(6, 8), "BK": (8, 16, 32), "WM": _p2(5, 7), "WN": _p2(5, 7),
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
        threads=_wgmma_threads, constraints=lambda c: _wgmma_constraints(c) + _splitk_constraints(c), smem=_wgmma_smem,
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
        threads=_warp_threads, constraints=_tf32_constraints, smem=_tf32_smem,
        sass_claims=("HMMA.1688.F32.TF32", "LDSM", "LDGSTS"), min_arch=80,
        packs=True,
        space={"BM": _p2(6, 8), "BN": _p2(6, 8), "BK": (32, 64), "WM": (32, 64), "WN": (32, 64), "STAGES": (2, 3, 4)},
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
        threads=_wgmma_threads, constraints=_ws_constraints, smem=_ws_smem,
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
        threads=_wgmma_threads, constraints=_wstf32_constraints, smem=_wstf32_smem,
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
        constraints=lambda c: _thin_constraints(c) + _splitk_constraints(c), smem=_thin_smem,
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
        threads=_decode.threads, constraints=lambda c: _decode.constraints(c) + _splitk_constraints(c), smem=_decode.smem,
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
