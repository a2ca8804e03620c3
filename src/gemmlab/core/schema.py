"""What a rung is: the schema of the ladder's entries (``Rung``), the launch geometry every rung
shares, and the split-K and stream-K arithmetic of the launches.

Launch geometry is uniform: a 1-D block of ``THREADS`` threads computes one ``BM x BN`` tile of C
(row-major inside the kernel, see kernels/common.cuh); the grid is ``(ceil(N/BN), ceil(M/BM))``,
with the row tiles folded into grid.z past grid.y's limit of 65535 (``Rung.launch``). A rung with
a ``SPLITK`` parameter (> 1) splits K instead: grid.z holds the K slices (``splitk_slices``) and
a reduction kernel sums them. A persistent rung (``Rung.persistent``) launches one block per SM
instead, up to the number of tiles (in clusters of ``CLUSTER`` blocks), and each block loops over
tiles: its grid needs the device's SM count.

The entries themselves are defined beside their family's constraints (core/families/) and listed
in ladder order by core/registry.py, which fills ``LADDER`` (read by the messages that name the
rungs able to do what one cannot).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from .arch import ArchLimits, arch_number
from .config import ConfigLike, ConfigSpec, parse_config
from .parts import PrecisionPart, Reads, Stores, ThinRule, Walk
from .dtypes import get as get_dtype
from .precision import applies, resolve as resolve_precision
from .tensormaps import L2_PROMOTION, L2_PROMOTION_DEFAULT, L2_PROMOTION_SETTINGS
from .splitk import CLUSTER_ARCH

MAX_GRID_Y = 65535
MAX_GRID_Z = 65535
LADDER: list["Rung"] = []   # the rungs in ladder order, filled by core/registry.py
SWITCHES = ("PACK", "EPI_TMA", "SKCLUSTER", "STREAMK", "DEFER", "SPREAD", "SNAKE", "KREV", "BALANCE", "L2PF", "ASYNC",
            "GROUP_K", "ABOX", "WGSKIP")   # parameters that take 0 (off) or 1 (on); every other one is a positive int


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
    # problems with a configuration, and its dynamic shared memory in bytes: each (cfg) or, for a
    # rung with per-precision parts, (cfg, planes); the Rung keeps both as (cfg, planes)
    constraints: Callable[..., list[str]] = lambda cfg: []
    sass_claims: tuple[str, ...] = ()  # SASS opcodes (prefixes) the rung's fast path must contain
    smem: Callable[..., int] = _no_dynamic_smem
    landmark: bool = False             # a landmark of the ladder: the report's size sweep plots it
    kernel: str = "gemm"               # extern "C" entry point
    min_arch: int = 75
    max_arch: int | None = None        # the newest architecture it runs on (None: any newer one)
    space: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # what `gemmlab tune` searches:
                                       # values per parameter (the others stay at their defaults)
    precisions: tuple[str, ...] = ()   # core.precision names it computes in, its default first;
                                       # () means the exact precision of each of its dtypes
    # its features, as parts (core/parts.py): what it reads, how it writes C, how its blocks walk
    # the tiles, what changes per precision, and its rule where it serves thin problems only
    reads: Reads = Reads()
    stores: Stores = Stores()
    walk: Walk = Walk()
    per_precision: Mapping[str, PrecisionPart] = field(default_factory=dict)
    thin_rule: ThinRule | None = None

    def __post_init__(self):
        if not self.precisions:
            object.__setattr__(self, "precisions", tuple(self.dtypes))
        if not self.per_precision:   # one signature for every rung: (cfg, planes), the planes 1 here
            smem, constraints = self.smem, self.constraints
            object.__setattr__(self, "smem", lambda cfg, planes=1: smem(cfg))
            object.__setattr__(self, "constraints", lambda cfg, planes=1: constraints(cfg))
        if self.packs:   # a host-side switch like SPLITK, last among the parameters
            object.__setattr__(self, "params", {**self.params, "PACK": 0})
        if self.tensor_maps:   # host-side too: the L2 promotion of the tensor maps (core/tensormaps.py)
            object.__setattr__(self, "params", {**self.params, "L2PROMO": L2_PROMOTION_DEFAULT})

    @property
    def name(self) -> str:
        """The stable slug (``gemmlab.gemm(..., kernel=rung.name)``)."""
        return self.slug

    # ---- its parts' features, read by name (core/parts.py says what each means) --------------------
    tensor_maps = property(lambda self: self.reads.tensor_maps)
    textures = property(lambda self: self.reads.textures)
    packs = property(lambda self: self.reads.packs)
    k_major = property(lambda self: self.reads.k_major)
    outputs = property(lambda self: self.stores.outputs)
    store_map = property(lambda self: self.stores.store_map)
    store_twin = property(lambda self: self.stores.store_twin)
    persistent = property(lambda self: self.walk.persistent)
    batched = property(lambda self: self.walk.batched)
    grouped = property(lambda self: self.walk.grouped)
    tail_kernel = property(lambda self: self.walk.tail_kernel)
    thin = property(lambda self: self.thin_rule.max_side if self.thin_rule else 0)

    # ---- what it runs on ------------------------------------------------------------------
    def supports(self, dtype: str) -> bool:
        return dtype in self.dtypes

    def runs_on(self, arch: str | int) -> bool:
        """Whether the rung's instructions exist on ``arch`` (``"sm_90a"``, 90)."""
        n = arch_number(arch)
        return n >= self.min_arch and (self.max_arch is None or n <= self.max_arch)

    def writes(self, dtype: str, out: str | None) -> bool:
        """Whether it writes a C of ``out`` (None: the operands' own) from ``dtype`` operands."""
        return out is None or out == dtype or out in self.outputs

    def require(self, dtype: str | None = None, arch: str | int | None = None, precision: str | None = None,
                out: str | None = None) -> None:
        """The one support check: ValueError naming the problem when this rung cannot take
        ``dtype``, cannot write a C of ``out`` (None: the operands' dtype), cannot run on ``arch``
        (``"sm_90a"``, 90) or cannot compute in ``precision``."""
        if dtype is not None:
            get_dtype(dtype)
            if dtype not in self.dtypes:
                raise ValueError(f"kernel {self.slug!r} does not support dtype {dtype}; it supports "
                                 f"{', '.join(self.dtypes)}")
            self.precision_for(dtype, precision)
            if not self.writes(dtype, out):
                writers = [r.slug for r in LADDER if dtype in r.dtypes and out in r.outputs]
                raise ValueError(f"kernel {self.slug!r} writes a C of its operands' dtype only ({dtype}); a {out} C "
                                 f"from {dtype} operands is written by " + (", ".join(writers) or "no rung"))
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
            others = [r.slug for r in LADDER if dtype in r.dtypes and want in r.precisions]
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
        return self._own(precision) in self.reads.register_a

    # ---- precision-dependent sizes -------------------------------------------------------
    def planes_for(self, precision: str | None = None) -> int:
        """Planes per operand the kernel reads in ``precision`` (None: the rung's default): 1, or
        2 where the plan splits the operands (rung 22, 3xtf32)."""
        part = self.per_precision.get(self._own(precision))
        return part.planes if part else 1

    def defaults_for(self, precision: str | None = None) -> dict[str, int]:
        """The default configuration in ``precision`` (None: the rung's default one): ``params``
        with the precision's own defaults on top (rung 22's 3xtf32: BN 128, 2 stages)."""
        part = self.per_precision.get(self._own(precision))
        return {**self.params, **(part.params if part else {})}

    def presets_for(self, precision: str | None = None) -> Mapping[str, Mapping[str, int]]:
        """The presets of the rung in ``precision`` (None: its default one)."""
        part = self.per_precision.get(self._own(precision))
        return part.presets if part and part.presets is not None else self.presets

    def _own(self, precision: str | None) -> str:
        return self.precisions[0] if precision is None else precision

    def smem_bytes(self, cfg: Mapping[str, int], precision: str | None = None) -> int:
        """Dynamic shared memory of a block of ``cfg`` computing in ``precision``."""
        return self.smem(cfg, self.planes_for(precision))

    def smem_for(self, cfg: Mapping[str, int], precision: str | None = None, vec_a: bool = True,
                 vec_b: bool = True) -> int:
        """The same for operands with 16-byte access ``vec_a``, ``vec_b``: with the staging its kernel
        adds for those without (``Reads.staging``)."""
        extra = self.reads.staging(cfg, vec_a, vec_b) if self.reads.staging else 0
        return self.smem_bytes(cfg, precision) + extra

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
            elif key == "L2PROMO" and isinstance(v, int) and not isinstance(v, bool):
                pass   # 0 (by the rows) or bytes: check_config names the values
            elif isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"parameter {key} of rung {self.slug!r} must be a positive int, got {v!r}")
            cfg[key] = v
        problems = self.check_config(cfg, precision)
        if problems:
            where = f" in precision {precision}" if self.planes_for(precision) > 1 else ""
            raise ValueError(f"invalid configuration for rung {self.slug!r}{where} {cfg}: " + "; ".join(problems))
        return cfg

    def check_config(self, cfg: Mapping[str, int], precision: str | None = None) -> list[str]:
        problems = list(self.constraints(cfg, self.planes_for(precision)))
        part = self.per_precision.get(self._own(precision))
        if part is not None and part.constraints is not None and not problems:
            problems += part.constraints(cfg)
        if cfg.get("L2PROMO", L2_PROMOTION_DEFAULT) not in L2_PROMOTION_SETTINGS:
            problems.append(f"L2PROMO={cfg['L2PROMO']} must be one of {', '.join(map(str, L2_PROMOTION))} "
                            f"(bytes the L2 fetches for each 128-byte row a tensor map reads) or 0 (by the rows)")
        t = self.threads(cfg)
        if t < 32 or t > 1024 or t % 32:
            problems.append(f"the block would have {t} threads; it must be a multiple of 32 between 32 and 1024")
        return problems

    def check_resources(self, cfg: Mapping[str, int], limits: ArchLimits, precision: str | None = None,
                        vec_a: bool = True, vec_b: bool = True) -> None:
        """ValueError when a block of this configuration (in ``precision``, on operands of 16-byte
        access ``vec_a``, ``vec_b``) needs more shared memory than ``limits`` (a device's, or an
        architecture's from the table) allow one block."""
        need = self.smem_for(cfg, precision, vec_a, vec_b)
        if need > limits.max_smem_per_block:
            staged = " (with the staging of its operands without 16-byte access)" if need > self.smem_bytes(cfg, precision) else ""
            raise ValueError(f"rung {self.slug!r} with {cfg} needs {need} B of shared memory per block{staged}; "
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
        for switch in ("STREAMK", "DEFER", "KREV") + (() if self.grouped else ("WGSKIP",)):
            if not d.get(switch):
                d.pop(switch, None)
        smem = self.smem_bytes(cfg, precision)
        if smem:
            d["GL_DYN_SMEM"] = smem  # the kernel checks its carve-up fits what the launch gives it
        return d

    def launch(self, M: int, N: int, cfg: Mapping[str, int], K: int | None = None,
               sm_count: int | None = None, precision: str | None = None, batch: int = 1) -> Launch:
        """Column tiles along grid.x; row tiles along grid.y, continued along grid.z past grid.y's
        limit (GL_TILE_ROW in kernels/common.cuh), so no M below 2^31 is refused.
        With SPLITK > 1, grid.z holds the K slices instead: SPLITK of them, or, given ``K``, the
        number ``splitk_slices`` gives (never an empty slice); with SKCLUSTER=1 always SPLITK, the
        compiled cluster's size (a slice past K computes nothing). Split-K and a grid.z of row tiles
        exclude each other: a problem that needs both is refused with a ValueError.
        A persistent rung: ``persistent_grid`` on the device's ``sm_count`` (ValueError without it),
        over ``batch`` problems of M x N for a rung that runs a batch in one launch (``batched``).
        The shared memory is that of ``precision`` (None: the rung's default one)."""
        smem = self.smem_bytes(cfg, precision)
        if batch != 1 and not (self.batched and batch >= 1):
            raise ValueError(f"rung {self.slug!r} launches one problem; a batch of {batch} in one launch is for the "
                             f"rungs that walk batch x tiles: {', '.join(r.slug for r in LADDER if r.batched)}")
        if self.persistent:
            return Launch((self.persistent_grid(M, N, cfg, sm_count, batch), 1, 1), (self.threads(cfg), 1, 1), smem)
        tiles_m = (M + cfg["BM"] - 1) // cfg["BM"]
        if batch > 1:   # the batch along grid.z (GL_BATCHED): the whole of K per block, no stream-K grid
            if cfg.get("SPLITK", 1) > 1:
                raise ValueError(f"rung {self.slug!r}: a batch in one launch takes grid.z, which SPLITK={cfg['SPLITK']} "
                                 f"needs for its K slices: use SPLITK=1")
            if tiles_m > MAX_GRID_Y or batch > MAX_GRID_Z:
                raise ValueError(f"rung {self.slug!r}: a batch of {batch} problems of {tiles_m} row tiles needs a grid "
                                 f"of at most {MAX_GRID_Y} row tiles and {MAX_GRID_Z} elements")
            return Launch(((N + cfg["BN"] - 1) // cfg["BN"], tiles_m, batch), (self.threads(cfg), 1, 1), smem)
        if cfg.get("STREAMK") and K is not None and sm_count and streamk_tail(M, N, K, cfg, sm_count):
            # the whole waves along grid.y, the stream-K tail as its last row (kernels/18_async_simt.cu)
            units = work_units(M, N, cfg)
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

    def persistent_grid(self, M: int, N: int, cfg: Mapping[str, int], sm_count: int | None, batch: int = 1) -> int:
        """The blocks of a persistent launch: one cluster of CLUSTER blocks per CLUSTER SMs, up to
        the units of work (a unit: CLUSTER vertically adjacent tiles of one column tile), so that
        every block is resident at once and loops over its share of the units (the kernel's
        schedule, kernels/schedule.cuh). BALANCE=1: the fewest clusters that take no more waves (every
        cluster then walks the same number of units, or one fewer): 2048 units on 132 SMs are 16
        waves of 128 instead of 15 of 132 and one of 68. With STREAMK=1 only where the balanced
        grid keeps all but a sixteenth of the clusters: the stream-K tail spreads the last wave's
        k tiles over every cluster, and on a balanced grid the clusters it drops idle through the
        whole launch (169 units of 1654 x 3296 would run on 85 of 132 SMs); where few are dropped,
        whole waves need no tail (8192 x 4096: 1024 units on 128). ``batch``: the units of that
        many problems."""
        if not sm_count or sm_count < 1:
            raise ValueError(f"rung {self.slug!r} is persistent (one block per SM, each looping over tiles): "
                             f"its launch needs the device's SM count, got {sm_count!r}")
        cluster = cfg.get("CLUSTER", 1)
        units = work_units(M, N, cfg, batch)
        clusters = max(1, min(units, sm_count // cluster))
        if cfg.get("BALANCE"):
            balanced = _cdiv(units, _cdiv(units, clusters))
            if not cfg.get("STREAMK") or 16 * balanced >= 15 * clusters:
                clusters = balanced
        return clusters * cluster


def work_units(M: int, N: int, cfg: Mapping[str, int], batch: int = 1) -> int:
    """A persistent rung's units of work: CLUSTER vertically adjacent tiles of one column tile (of
    each of ``batch`` problems)."""
    return _cdiv(_cdiv(M, cfg["BM"]), cfg.get("CLUSTER", 1)) * _cdiv(N, cfg["BN"]) * batch


# ---- stream-K (STREAMK=1, rungs 21 and 22: kernels/schedule.cuh) -----------------------------------
def streamk_tail(M: int, N: int, K: int, cfg: Mapping[str, int], blocks: int, batch: int = 1) -> bool:
    """Whether a persistent launch of ``blocks`` blocks (``Rung.launch``'s grid.x) on an M x N x K
    problem splits its last, partial wave of units by k tiles (kernels/schedule.cuh): with
    STREAMK=1, when there are more units than clusters and they are not whole waves, and the split
    units' k tiles count below 2^31 (the kernel's step arithmetic is 32-bit). Otherwise the plan
    launches the STREAMK=0 kernel, which needs no workspace. ``batch``: the units of that many problems."""
    clusters = blocks // cfg.get("CLUSTER", 1)
    units = work_units(M, N, cfg, batch)
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
