"""Peers: the GEMMs that gemmlab's rungs are measured against.

A peer is a GEMM written by someone else's hands or tools -- not a rung of the ladder -- that
computes C = A @ B on the very operands the rungs get and is timed by the same engine. Its figures
are the bar a rung has to clear, so the benchmark's JSON keeps each peer's figures and the
configuration that produced them (``Peer.describe``).

Two peers, because they bound what is reachable from two sides:

* ``cublas``: NVIDIA's library, ``Lib.matmul(a, b, out=c)`` through PyTorch or CuPy -- the
  reference every ratio in gemmlab is taken against. In fp32 it is held to true FP32 SGEMM (no
  TF32) around every call (``arrays.TrueFP32``).
* ``triton``: an autotuned Triton matmul written here (``measure.triton_gemm``): the standard tiled
  ``tl.dot`` kernel with grouped program order, any shape and any strides, FP32 accumulation,
  ``input_precision="ieee"`` for fp32. It is what a compiler gets from a short, portable kernel
  with a small autotune list; on the H100 such a kernel comes close to cuBLAS, closer in BF16/FP16
  than in strict FP32 (docs/ladder.md, docs/hopper.md). It needs Triton (``pip install triton``) and PyTorch operands.

A peer is used in three steps::

    for peer in peers(None, "fp32", lib):          # the default list for this dtype and library
        ok, why = peer.available("fp32")
        if ok:
            run = peer.prepare(ops, "fp32")        # may compile and autotune (host syncs) and writes ops.c
            run()                                  # launches C = A @ B on the current stream, no host sync
            record["config"] = peer.describe("fp32")

This module imports neither Triton nor PyTorch at import time.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence

from ..analysis.environment import package_version
from ..core.deps import MissingDependencyError, require
from ..core.dtypes import DTYPES
from ..core.dtypes import get as get_dtype
from ..core.precision import resolve as resolve_precision
from .arrays import LIBS, Fp32Mode, Lib, Operands

# ---- the Triton peer's autotune lists ----------------------------------------------------------
# Each entry: tile BLOCK_M x BLOCK_N x BLOCK_K, GROUP_M row-tiles per group of the program order,
# num_warps, num_stages (software pipeline depth: num_stages - 1 tiles of A and B in flight).
# Shared memory per program is about num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * itemsize, kept
# within the H100's 227 KB per block; the accumulator is BLOCK_M * BLOCK_N / (32 * num_warps) FP32
# registers per thread (see the per-list limits below).


def _cfg(bm: int, bn: int, bk: int, warps: int, stages: int, group: int = 8) -> dict:
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group, "num_warps": warps, "num_stages": stages}


# fp32 with input_precision="ieee": FMA on the CUDA cores. Triton's FMA dot keeps the accumulator
# and a K slice of A and B in registers, so only tiles with <= 64 accumulators per thread stay out
# of local memory (checked by compiling for sm_90a: 128x128 with 4 warps, or 128x256/256x128 with
# 16 warps, spill). Large tiles with 8 warps amortize the shared-memory reads; a short K tile
# (16/32) keeps the FP32 stages small enough for 3-5 deep pipelines; 64-wide tiles cover
# small/narrow shapes.
FP32_CONFIGS: tuple[dict, ...] = (
    _cfg(128, 128, 32, 8, 3),
    _cfg(128, 128, 32, 8, 4),
    _cfg(128, 128, 16, 8, 4),
    _cfg(128, 128, 16, 8, 5),
    _cfg(64, 128, 32, 4, 4),
    _cfg(128, 64, 32, 4, 4),
    _cfg(64, 128, 16, 4, 5),
    _cfg(64, 64, 16, 4, 4),
)

# fp16/bf16: tensor cores (wgmma on Hopper, one warpgroup per 4 warps). 128x256 and 256x128 tiles
# with 8 warps and 3 stages are the large-shape winners on the H100; 128x128x64/x32 with 4-8 warps
# and 3-4 stages are the general ones; 64-wide tiles keep small shapes' grids full.
HALF_CONFIGS: tuple[dict, ...] = (
    _cfg(128, 256, 64, 8, 3),
    _cfg(256, 128, 64, 8, 3),
    _cfg(128, 128, 64, 8, 3),
    _cfg(128, 128, 64, 4, 4),
    _cfg(128, 128, 32, 4, 4),
    _cfg(64, 256, 32, 4, 4),
    _cfg(128, 64, 32, 4, 4),
    _cfg(64, 128, 64, 4, 3),
)

TRITON_CONFIGS: dict[str, tuple[dict, ...]] = {"fp32": FP32_CONFIGS, "fp16": HALF_CONFIGS, "bf16": HALF_CONFIGS}

# Autotuned once per value of these arguments; Triton adds the dtypes of A, B and C to the key.
# The strides of A and B are in it so that each layout (row-/column-major, padding) gets its own pick.
TRITON_AUTOTUNE_KEY: tuple[str, ...] = ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn")

MIN_TRITON = (3, 0)   # tl.dot(..., acc, input_precision=...)


def _family(dtype: str) -> str:
    return "fp32" if dtype == "fp32" else "16bit"


_FAMILY_CONFIGS = {"fp32": FP32_CONFIGS, "16bit": HALF_CONFIGS}


def _version_tuple(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def _lib_name(lib: Lib | str) -> str:
    name = lib.name if isinstance(lib, Lib) else str(lib)
    if name not in LIBS:
        raise ValueError(f"unknown array library {name!r}; use one of {', '.join(LIBS)}")
    return name


def _check_operands(ops: Operands, dtype: str) -> tuple[int, int, int]:
    get_dtype(dtype)
    if ops.dtype != dtype:
        raise ValueError(f"operands are {ops.dtype}, not {dtype}")
    (M, K), (K2, N) = tuple(ops.a.shape), tuple(ops.b.shape)
    if K2 != K or tuple(ops.c.shape) != (M, N):
        raise ValueError(f"shapes do not chain: A {tuple(ops.a.shape)}, B {tuple(ops.b.shape)}, C {tuple(ops.c.shape)}")
    return M, N, K


# ---- the abstraction ---------------------------------------------------------------------------

# FP8 products take scales: neither torch.matmul nor the plain Triton matmul multiplies FP8 operands
# (PyTorch's FP8 GEMM is torch._scaled_mm, called by gemmlab.scaled_mm's tests with the same scales)
FP8_NO_PEER = "no plain-GEMM peer multiplies FP8 operands (torch.matmul does not; its FP8 GEMM is torch._scaled_mm)"


class Peer(ABC):
    """A GEMM C = A @ B that the rungs are measured against, on one array library."""

    name: str = ""

    def __init__(self, lib: Lib | str):
        self.lib = _lib_name(lib)

    @abstractmethod
    def available(self, dtype: str) -> tuple[bool, str]:
        """(True, what will run) or (False, why not: one line)."""

    @abstractmethod
    def prepare(self, ops: Operands, dtype: str) -> Callable[[], None]:
        """A zero-argument callable that launches C = A @ B into ``ops.c`` on the array library's
        current stream, without synchronizing the host. Preparing may compile, autotune and run
        the GEMM (writing ops.c) and may synchronize; raises RuntimeError when not available."""

    @abstractmethod
    def describe(self, dtype: str | None = None) -> dict:
        """The peer's configuration for the JSON (JSON-able): for one dtype, or all it has run."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(lib={self.lib!r})"


class CublasPeer(Peer):
    """cuBLAS through the array library: ``Lib.matmul(a, b, out=c)``; fp32 held to true FP32
    SGEMM, or to the TF32 tensor cores when the rungs it is compared with compute in "tf32"
    (``precision``; "3xtf32", FP32-accurate, is compared with strict SGEMM)."""

    name = "cublas"

    def __init__(self, lib: Lib | str, precision: str | None = None):
        super().__init__(lib)
        self.tf32 = precision == "tf32"
        self._precision: dict[str, dict] = {}

    def available(self, dtype: str) -> tuple[bool, str]:
        try:
            get_dtype(dtype)
        except ValueError as exc:
            return False, str(exc)
        if dtype == "fp8":
            return False, FP8_NO_PEER
        if self.lib == "cupy" and dtype == "bf16":
            return False, "CuPy has no bfloat16 arrays: cuBLAS bf16 needs PyTorch (--lib torch)"
        try:
            require(self.lib)
        except MissingDependencyError as exc:
            return False, str(exc)
        return True, f"{self.lib}.matmul(a, b, out=c)"

    def prepare(self, ops: Operands, dtype: str) -> Callable[[], None]:
        ok, why = self.available(dtype)
        if not ok:
            raise RuntimeError(f"cublas peer: {why}")
        _check_operands(ops, dtype)
        L, a, b, c = ops.lib, ops.a, ops.b, ops.c
        guard = Fp32Mode(L, tf32=self.tf32 and dtype == "fp32")
        with guard:
            settings = dict(guard.settings)
        if dtype == "fp32":
            mode = "tf32" if guard.tf32 else "true_fp32"
            self._precision[dtype] = {**settings, mode: "set around every call (arrays.Fp32Mode)"}

            def run() -> None:
                with guard:
                    L.matmul(a, b, out=c)
        else:
            # TF32 does not apply to fp16/bf16; what does is whether cuBLAS may reduce in 16 bits
            self._precision[dtype] = {k: v for k, v in settings.items() if "reduced_precision" in k}

            def run() -> None:
                L.matmul(a, b, out=c)
        return run

    def describe(self, dtype: str | None = None) -> dict:
        out = {"name": self.name, "library": self.lib,
               "library_version": package_version(self.lib),
               "call": f"{self.lib}.matmul(a, b, out=c)"}
        if dtype is not None:
            out["dtype"] = dtype
            out["precision"] = self._precision.get(dtype, {"tf32": self.tf32} if dtype == "fp32" else {})
        else:
            out["precision"] = dict(self._precision)
        return out


class TritonPeer(Peer):
    """The autotuned Triton matmul of ``measure.triton_gemm`` on PyTorch operands."""

    name = "triton"

    def __init__(self, lib: Lib | str):
        super().__init__(lib)
        self._tuned: list[dict] = []   # one record per prepare: shape, strides, chosen config, timings

    def available(self, dtype: str) -> tuple[bool, str]:
        try:
            get_dtype(dtype)
        except ValueError as exc:
            return False, str(exc)
        if dtype == "fp8":
            return False, FP8_NO_PEER
        if self.lib != "torch":
            return False, (f"the Triton peer needs PyTorch operands (--lib torch); "
                           f"the operands are {self.lib} arrays")
        try:
            triton = require("triton")
        except MissingDependencyError as exc:
            return False, str(exc)
        version = getattr(triton, "__version__", "0")
        if _version_tuple(version) < MIN_TRITON:
            return False, (f"Triton {version} is too old: the Triton peer needs Triton >= "
                           f"{'.'.join(map(str, MIN_TRITON))} (pip install -U triton)")
        try:
            torch = require("torch")
        except MissingDependencyError as exc:
            return False, str(exc)
        if not torch.cuda.is_available():
            return False, "PyTorch sees no CUDA device: the Triton peer runs on the GPU"
        return True, f"Triton {version}, autotuned over {len(TRITON_CONFIGS[dtype])} configurations"

    def prepare(self, ops: Operands, dtype: str) -> Callable[[], None]:
        ok, why = self.available(dtype)
        if not ok:
            raise RuntimeError(f"triton peer: {why}")
        M, N, K = _check_operands(ops, dtype)
        if ops.lib.name != "torch":
            raise RuntimeError("triton peer: the operands must be PyTorch tensors")
        if M == 0 or N == 0:
            return lambda: None
        tg = _triton_gemm()
        kernel = tg.kernels(_FAMILY_CONFIGS, TRITON_AUTOTUNE_KEY).tuned[_family(dtype)]
        args = tg.launch_args(ops.a, ops.b, ops.c)
        grid = tg.grid(M, N)

        launch = kernel[grid]

        def run() -> None:
            launch(*args)

        kernel.configs_timings = None
        run()   # compiles every configuration and autotunes for this key (synchronizes), then runs
        require("torch").cuda.synchronize()
        timings = getattr(kernel, "configs_timings", None) or {}
        self._tuned.append({
            "dtype": dtype, "M": M, "N": N, "K": K,
            "strides": {"a": list(ops.a.stride()), "b": list(ops.b.stride()), "c": list(ops.c.stride())},
            "config": tg.from_triton_config(kernel.best_config),
            "autotune_ms": [{"config": tg.from_triton_config(cfg), "ms": _median(t)} for cfg, t in timings.items()],
        })
        return run

    def describe(self, dtype: str | None = None) -> dict:
        out = {"name": self.name, "library": self.lib,
               "triton_version": package_version("triton"), "torch_version": package_version("torch"),
               "kernel": "gemmlab.measure.triton_gemm.matmul_kernel: tiled tl.dot, grouped program order "
                         "(GROUP_M), masked edges, any strides, FP32 accumulation",
               "autotune_key": list(TRITON_AUTOTUNE_KEY) + ["dtypes of A, B, C"]}
        tuned = [t for t in self._tuned if dtype is None or t["dtype"] == dtype]
        if dtype is not None:
            out["dtype"] = dtype
            out["input_precision"] = "ieee" if dtype == "fp32" else "tensor cores, fp32 accumulation"
            out["configs"] = [dict(c) for c in TRITON_CONFIGS[dtype]]
        else:
            out["input_precision"] = {d: ("ieee" if d == "fp32" else "tensor cores, fp32 accumulation")
                                      for d in DTYPES}
            out["configs"] = {d: [dict(c) for c in TRITON_CONFIGS[d]] for d in DTYPES}
        out["best_config"] = dict(tuned[-1]["config"]) if tuned else None
        out["tuned"] = tuned
        return out


def _median(t) -> float | None:
    """do_bench's answer for a configuration: [median, p20, p80] in ms, or one number."""
    try:
        v = float(t[0] if isinstance(t, (list, tuple)) else t)
    except (TypeError, ValueError, IndexError):
        return None
    return v if math.isfinite(v) else None   # configurations that failed to compile time as inf


def _triton_gemm():
    """The kernel module (imports Triton)."""
    from . import triton_gemm

    return triton_gemm


def triton_matmul(a, b, c, *, config: Mapping | None = None) -> None:
    """C = A @ B with the Triton kernel on PyTorch tensors of any strides (CUDA tensors, or CPU
    tensors under TRITON_INTERPRET=1): autotuned over the dtype's list when ``config`` is None,
    else launched with that one configuration (a dict like the entries of ``TRITON_CONFIGS``)."""
    tg = _triton_gemm()
    M, K = a.shape
    K2, N = b.shape
    if K2 != K or tuple(c.shape) != (M, N):
        raise ValueError(f"shapes do not chain: A {tuple(a.shape)}, B {tuple(b.shape)}, C {tuple(c.shape)}")
    if M == 0 or N == 0:
        return
    dtype = get_dtype_of(a)
    ks = tg.kernels(_FAMILY_CONFIGS, TRITON_AUTOTUNE_KEY)
    args = tg.launch_args(a, b, c)
    if config is None:
        ks.tuned[_family(dtype)][tg.grid(M, N)](*args)
    else:
        tiles = {k: config[k] for k in tg.TILE_KEYS}
        ks.kernel[tg.grid(M, N)](*args, **tiles, num_warps=config["num_warps"], num_stages=config["num_stages"])


def get_dtype_of(t) -> str:
    """gemmlab's dtype name of a PyTorch tensor (``torch.float32`` -> ``fp32``)."""
    from ..core.dtypes import from_array_name

    return from_array_name(str(t.dtype).split(".")[-1]).name


# ---- the registry ------------------------------------------------------------------------------

PEERS: dict[str, type[Peer]] = {"cublas": CublasPeer, "triton": TritonPeer}
PEER_NAMES: tuple[str, ...] = tuple(PEERS)


def triton_importable() -> bool:
    try:
        require("triton")
    except MissingDependencyError:
        return False
    return True


def default_peer_names(dtype: str, lib: Lib | str) -> list[str]:
    """The peers timed when none are named: cuBLAS always; Triton when it imports and the
    operands are PyTorch tensors."""
    get_dtype(dtype)
    names = ["cublas"]
    if _lib_name(lib) == "torch" and triton_importable():
        names.append("triton")
    return names


def peers(names: Sequence[str] | str | None, dtype: str, lib: Lib | str, precision: str | None = None) -> list[Peer]:
    """The peers named (in order, duplicates dropped; a string may list them with commas), or the
    default list (``default_peer_names``) when ``names`` is None. A named peer is returned even
    when it is not available here: ask ``available(dtype)`` and report its reason. ``precision``:
    what the rungs compute in (cuBLAS runs with TF32 for "tf32"; the Triton peer stays at its
    own precision, strict FP32 for fp32)."""
    get_dtype(dtype)
    precision = resolve_precision(dtype, precision)
    lib_name = _lib_name(lib)
    if names is None:
        names = default_peer_names(dtype, lib_name)
    elif isinstance(names, str):
        names = [n for n in names.split(",")]
    wanted: list[str] = []
    for raw in names:
        n = str(raw).strip().lower()
        if n not in PEERS:
            raise ValueError(f"unknown peer {raw!r}; choose from {', '.join(PEER_NAMES)}")
        if n not in wanted:
            wanted.append(n)
    return [CublasPeer(lib_name, precision) if n == "cublas" else PEERS[n](lib_name) for n in wanted]
