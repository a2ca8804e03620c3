"""A rung's compiled variant: rung + dtype + precision + layouts of A and B + vector legality + tile
config.

This is the unit the compile layer builds and caches, the launch layer loads, and ``inspect``
disassembles. The defines it produces are the contract documented in kernels/common.cuh.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from . import compile as _compile
from .config import ConfigLike
from .dtypes import get as get_dtype
from .epilogue import PLAIN, Epilogue
from .precision import get as get_precision
from .registry import Launch, Rung, get, streamk_tail, workspace_split
from .schema import work_units
from . import packing


FP8_DEFAULT_OUT = "bf16"   # C's dtype for FP8 operands where none is named (torch._scaled_mm's usual)


class SpillError(ValueError):
    """A configuration the registry's rules accept needs more registers than a thread may have."""


@dataclass(frozen=True)
class Variant:
    rung: Rung
    dtype: str = "fp32"
    a_col: bool = False
    b_col: bool = False
    vec_a: bool = True
    vec_b: bool = True
    vec_c: bool = True
    config: tuple[tuple[str, int], ...] = field(default=())  # sorted (name, value) pairs, defaults merged
    tall: bool = False   # more row tiles than grid.y takes: they continue along grid.z (GL_TALL)
    precision: str = ""  # core.precision name; "" (as built by hand): the rung's default for the dtype
    c_col: bool = False  # C column-major: the transposed problem of a rung reading A from registers (GL_C_COL)
    tma_store_only: bool = False   # the rung's store twin (Rung.store_twin): only the TMA store's epilogue
    epilogue: Epilogue = PLAIN     # bias and activation fused into the stores (core/epilogue.py)
    batch: tuple = ()     # a batch in one launch (Rung.batched, GL_BATCHED): (A varies, B varies) over
                          # it, each True or False (a broadcast operand: its 2-D map); () one problem
    formats: tuple = ()   # FP8 operands' formats (A's, B's), "e4m3" or "e5m2" (GL_FP8_A, GL_FP8_B); () e4m3

    def __post_init__(self):
        if not self.precision:
            object.__setattr__(self, "precision", self.rung.precision_for(self.dtype))
        if self.dtype == "fp8" and self.epilogue.out is None:   # FP8 operands write bf16 unless told otherwise
            object.__setattr__(self, "epilogue", replace(self.epilogue, out=FP8_DEFAULT_OUT))

    @classmethod
    def make(cls, rung: Rung | str, dtype: str = "fp32", *, a_col=False, b_col=False,
             vec_a=True, vec_b=True, vec_c=True, config: ConfigLike = None, tall=False,
             precision: str | None = None, c_col=False, epilogue: Epilogue = PLAIN) -> "Variant":
        """``precision`` None: the rung's own default for ``dtype`` (core.registry.Rung.precision_for)."""
        rung = get(rung) if isinstance(rung, str) else rung
        rung.require(dtype, precision=precision)
        precision = rung.precision_for(dtype, precision)
        cfg = rung.config(config, precision)
        return cls(rung, dtype, bool(a_col), bool(b_col), bool(vec_a), bool(vec_b), bool(vec_c),
                   tuple(sorted(cfg.items())), bool(tall), precision, bool(c_col), epilogue=epilogue)

    def for_kernel_problem(self, kp) -> "Variant":
        """This variant for the problem its kernel computes (``core.packing.for_kernel``'s, a
        KernelProblem): the layouts and vector flags of what it reads and writes after copies and
        transposition."""
        return replace(self, a_col=kp.a_col, b_col=kp.b_col, vec_a=kp.vec_a, vec_b=kp.vec_b, vec_c=kp.vec_c,
                       c_col=kp.c_col)

    @property
    def cfg(self) -> dict[str, int]:
        return dict(self.config)

    @property
    def smem(self) -> int:
        """Its block's dynamic shared memory: the rung's for the configuration, with the staging of
        the operands it reads without 16-byte access (``Rung.smem_for``)."""
        return self.rung.smem_for(self.cfg, self.precision, self.vec_a, self.vec_b)

    def defines(self) -> dict[str, int]:
        d = self.rung.defines(self.cfg, self.precision)
        if self.smem:   # the rung's for cfg, with the staging of operands without 16-byte access
            d["GL_DYN_SMEM"] = self.smem
        d.update(
            GL_DTYPE=get_dtype(self.dtype).code,
            GL_A_COL=int(self.a_col), GL_B_COL=int(self.b_col),
            GL_VEC_A=int(self.vec_a), GL_VEC_B=int(self.vec_b), GL_VEC_C=int(self.vec_c),
        )
        if self.tall:   # only then: the cache keys (and SASS) of ordinary variants stay as they were
            d["GL_TALL"] = 1
        if self.c_col:  # likewise
            d["GL_C_COL"] = 1
        if self.tma_store_only:   # likewise
            d["GL_TMA_STORE_ONLY"] = 1
        code = get_precision(self.precision).kernel_code
        if code:        # likewise: the exact path defines nothing
            d["GL_PRECISION"] = code
        d.update(self.epilogue.defines())   # likewise: the plain epilogue defines nothing
        if self.batch:   # likewise
            d.update(GL_BATCHED=1, GL_BATCH_A=int(self.batch[0]), GL_BATCH_B=int(self.batch[1]))
        for name, fmt in zip(("GL_FP8_A", "GL_FP8_B"), self.formats):   # e4m3 (the default) defines nothing
            if fmt == "e5m2":
                d[name] = 1
        return d

    def compile(self, arch: str, before_compile=None) -> _compile.CompiledKernel:
        """The compiled kernel (memory cache, disk cache, else NVRTC; ``before_compile()`` is
        called right before a real NVRTC compile, see ``compile.compile_source``).
        ``SpillError`` when ptxas had to spill registers for it: the API accepts no configuration
        that spills (a spilling tile is never the fast one). ValueError, before any compile, for
        an architecture the rung does not run on (``Rung.require``)."""
        self.rung.require(arch=arch)
        ck = _compile.compile_source(self.rung.source, self.rung.kernel, arch, self.defines(),
                                     before_compile=before_compile)
        if ck.spill_bytes:
            raise SpillError(f"configuration {self.describe()} spills {ck.spill_bytes} bytes of registers to local "
                             f"memory on {ck.arch}; choose a smaller thread tile or fewer threads per block")
        return ck


    def for_geometry(self, geometry: Launch, M: int, N: int, K: int, batch: int = 1) -> "Variant":
        """The variant a launch of ``geometry`` (``Rung.launch`` on this problem, kernel view M x
        ``N`` x K) runs: the split-K one (its C is the FP32 workspace, rows of N floats, so 16-byte
        stores are legal when N % 4 == 0; the cluster split's is C), the tall one (row tiles along
        grid.z), STREAMK=0 where a STREAMK=1 configuration has no partial wave to split
        (``registry.streamk_tail``: the plan then needs no workspace; for rung 18, which is not
        persistent, where ``Rung.launch`` gave the plain grid) or, on a persistent rung, an
        operand the producer's threads copy (stream-K is built for the TMA path: the copy path's
        consumers have 200 registers, too few beside the stream-K walk), or itself."""
        if self.cfg.get("STREAMK"):
            # the grouped rung counts its units on the device, where it decides the tail itself
            tail = (self.vec_a and self.vec_b and (self.rung.grouped or streamk_tail(M, N, K, self.cfg, geometry.grid[0], batch))
                    if self.rung.persistent else geometry.streamk)
            if not tail:
                return self.with_config(STREAMK=0)
        if self.cfg.get("SPLITK", 1) > 1:   # the cluster split (SKCLUSTER=1) writes C itself
            return replace(self, vec_c=N % 4 == 0) if workspace_split(self.cfg) else self
        if geometry.grid[2] > 1 and batch == 1:   # a batch's grid.z holds its elements (GL_BATCHED)
            return replace(self, tall=True)
        return self

    def store_twin(self, N: int) -> "Variant | None":
        """The build of this variant with only the TMA store's epilogue (``Rung.store_twin``), for a
        kernel view of ``N`` columns, or None where it would never run: EPI_TMA=0, a C without 16-byte
        access, rows that are not whole 16-byte chunks (the kernel's tma_store_now; beta is the
        launch's), or an auxiliary output (stored by rows). The full build stays for the other calls
        (beta != 0)."""
        if not (self.rung.store_twin and self.cfg.get("EPI_TMA") and self.vec_c and not self.epilogue.aux
                and N % get_dtype(self.epilogue.out or self.dtype).vector_elements == 0):
            return None
        return replace(self, tma_store_only=True)

    def with_config(self, **values: int) -> "Variant":
        """This variant with some parameters set (no check: callers set values the registry takes)."""
        return replace(self, config=tuple(sorted({**self.cfg, **values}.items())))

    def describe(self) -> str:
        lay = ("col" if self.a_col else "row") + "/" + ("col" if self.b_col else "row") + ("/C col" if self.c_col else "")
        vec = "".join(n for n, v in (("A", self.vec_a), ("B", self.vec_b), ("C", self.vec_c)) if v) or "none"
        cfg = ",".join(f"{k}={v}" for k, v in self.config)
        tall = (", tall grid" if self.tall else "") + (", TMA store only" if self.tma_store_only else "")
        if not self.epilogue.plain:
            tall += f", epilogue {self.epilogue.describe()}"
        if self.batch:
            tall += ", batched" + "".join(f" ({n} broadcast)" for n, v in zip("AB", self.batch) if not v)
        dt = self.dtype if self.precision == self.dtype else f"{self.dtype} as {self.precision}"
        if self.formats:
            dt += " " + "x".join(self.formats)
        return f"{self.rung.slug}[{dt}, A/B {lay}, vec {vec}, {cfg}{tall}]"


@dataclass(frozen=True)
class Resolved:
    """What a plan of a rung and configuration runs on a kernel-view problem: the operand copies,
    the problem its kernel computes after them, the launch geometry and the variant."""

    variant: Variant
    packs: tuple
    kp: object            # core.problem.KernelProblem
    geometry: Launch


def resolve(rung: Rung, dtype: str, kp, config: ConfigLike, precision: str | None, sm_count: int,
            vec_a: bool | None = None, vec_b: bool | None = None, epilogue: Epilogue = PLAIN,
            formats: tuple = ()) -> Resolved:
    """The variant a plan runs (``core.launch.Plan``; the tuner and the selection's collection
    compile it ahead from here, so they build what the plan will load): the operands it copies
    first (PACK=1, a k_major rung; core.packing.for_kernel), the geometry on ``sm_count`` SMs and
    the split-K, tall-grid or stream-K build that geometry takes. ``vec_a``/``vec_b``: the vector
    flags where the launch decides them itself (a texture rung), else the problem's. ``formats``:
    FP8 operands' formats in the kernel's order (``Variant.formats``)."""
    v = Variant.make(rung, dtype, a_col=kp.a_col, b_col=kp.b_col, vec_a=kp.vec_a if vec_a is None else vec_a,
                     vec_b=kp.vec_b if vec_b is None else vec_b, vec_c=kp.vec_c, config=config, precision=precision,
                     epilogue=epilogue)
    if formats and formats != ("e4m3", "e4m3"):
        v = replace(v, formats=tuple(formats))
    packs, kp2 = packing.for_kernel(kp, dtype, bool(v.cfg.get("PACK")), rung.k_major, rung.planes_for(v.precision),
                                    rung.reads_register_a(v.precision))
    if kp2 is not kp:
        v, kp = v.for_kernel_problem(kp2), kp2
    if kp.batch > 1:
        _check_batch(rung, v, kp)
        v = replace(v, batch=(kp.batch_a != 0, kp.batch_b != 0))
    geometry = rung.launch(kp.M, kp.N, v.cfg, kp.K, sm_count, v.precision, kp.batch)
    if v.smem != geometry.smem:   # the staging of operands without 16-byte access (Reads.staging)
        geometry = replace(geometry, smem=v.smem)
    return Resolved(v.for_geometry(geometry, kp.M, kp.N, kp.K, kp.batch), packs, kp, geometry)


def _check_batch(rung: Rung, v: Variant, kp) -> None:
    """What a batch in one launch needs beyond a rung that walks batch x tiles (``Rung.launch`` refuses
    the others): units that the kernel's 32-bit schedule counts (ValueError). Its operand copies,
    PACK=1, are a batch's too (core/packing.py)."""
    units = work_units(kp.M, kp.N, v.cfg, kp.batch)
    if units >= 2 ** 31:
        raise ValueError(f"a batch of {kp.batch} problems of {kp.M}x{kp.N} is {units} units of work; the kernel's "
                         f"schedule counts them in 32 bits")


# A fused epilogue's arithmetic, or a batch's arguments (GL_BATCHED), beside a rung's accumulators can
# pass the registers a thread may have where the plain build fits (rung 21's stream-K fixup with a
# row bias: 8 bytes under NVRTC 13; by activation, bias and NVRTC version; batched with stream-K and
# DEFER=1: 84 bytes with CLUSTER=1 under NVRTC 13, with both cluster sizes under the H200 machine's):
# then the same tile storing each tile at its end (rung 21's deferred tile held beside the functor's
# arithmetic: GELU (erf) and SiLU do not fit, ReLU, GELU (tanh) and a bias alone do), then without the
# stream-K tail.
FUSED_FALLBACKS = ({"DEFER": 0}, {"STREAMK": 0})


def fused_configs(rung: Rung, config: ConfigLike, precision: str | None) -> list:
    """The configurations a plan with a fused epilogue tries, in order (core.launch.Plan): ``config``
    itself, then each of FUSED_FALLBACKS that changes it."""
    base = rung.config(config, precision)
    out: list = [config]
    seen = base
    for change in FUSED_FALLBACKS:
        cfg = {**base, **{k: v for k, v in change.items() if k in base}}
        if cfg != seen:
            out.append(cfg)
            seen = cfg
    return out


# ---- the split-K reduction (kernels/splitk_reduce.cu): not a rung, one kernel per dtype ----------
REDUCE_SOURCE, REDUCE_KERNEL = "splitk_reduce.cu", "splitk_reduce"
REDUCE_THREADS = 128     # GL_REDUCE_THREADS in the kernel: one output column per thread


def compile_reduce(dtype: str, arch: str, before_compile=None, epilogue: Epilogue = PLAIN) -> _compile.CompiledKernel:
    """The split-K reduction kernel for ``dtype`` (its output type) on ``arch``, with the epilogue
    the partial products left out (their rung's bias and activation), cached like a variant."""
    return _compile.compile_source(REDUCE_SOURCE, REDUCE_KERNEL, arch,
                                   {"GL_DTYPE": get_dtype(dtype).code, **epilogue.defines()},
                                   before_compile=before_compile)
