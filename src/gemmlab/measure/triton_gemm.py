"""The Triton peer's kernel: C = A @ B, tiled ``tl.dot`` with FP32 accumulation.

This module imports Triton when it is imported: only ``gemmlab.measure.peers`` imports it, lazily,
after checking that Triton is there. The tile configurations and the policy (which list for which
dtype, the autotune key) live in ``peers``; this module holds what needs Triton itself.

The kernel is the standard one of Triton's matmul tutorial, made general:

* grouped ("swizzled") program order: ``GROUP_M`` row-tiles are walked together, so the B panels
  a group reads stay in L2 while the group's programs run;
* any M, N, K >= 1: rows and columns past the edge are read wrapped (``% M``, ``% N``: valid
  addresses, results discarded) and the store is masked; the K tail is loaded under a mask with
  0 as the fill, unless every K tile is full (``EVEN_K``, a heuristic of the launch);
* any strides: A, B and C are addressed through both of their strides, so row- and column-major
  operands and padded leading dimensions all work (Triton specializes strides equal to 1 and
  multiples of 16, so a contiguous dimension is still loaded with wide vector accesses);
* 64-bit offsets only when an operand spans 2^31 elements or more (``INDEX_64``, a heuristic);
* fp32 operands are multiplied with ``input_precision="ieee"`` (strict FP32 on the CUDA cores,
  no TF32); fp16/bf16 operands go to the tensor cores; the accumulator is FP32 in every case and
  is rounded once to C's dtype at the store.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from ..core.deps import require

triton = require("triton")
tl = require("triton.language")

INT32_SPAN = 2**31
MAX_BLOCK = 256            # no configuration has a tile side larger than this


def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, INDEX_64: tl.constexpr):
    # grouped program order: consecutive programs walk GROUP_M row-tiles down one column of tiles
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if INDEX_64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
        offs_k = offs_k.to(tl.int64)
    # rows/columns past the edge read row M % M... (valid memory); their results are never stored
    offs_am = offs_m % M
    offs_bn = offs_n % N
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    a_step = BLOCK_K * stride_ak
    b_step = BLOCK_K * stride_bk
    if INDEX_64:
        a_step = tl.full((), BLOCK_K, tl.int64) * stride_ak
        b_step = tl.full((), BLOCK_K, tl.int64) * stride_bk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if a_ptr.dtype.element_ty == tl.float32:
            acc = tl.dot(a, b, acc, input_precision="ieee", out_dtype=tl.float32)   # strict FP32, no TF32
        else:
            acc = tl.dot(a, b, acc, out_dtype=tl.float32)                            # tensor cores, FP32 acc
        a_ptrs += a_step
        b_ptrs += b_step

    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + (offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn)
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


ARG_NAMES = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K",
             "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")


def even_k(args: Mapping) -> bool:
    """Every K tile is full: the K loop needs no mask."""
    return args["K"] % args["BLOCK_K"] == 0


def index_64(args: Mapping) -> bool:
    """Some element offset the kernel forms may reach 2^31 (int32 would wrap)."""
    M, N, K = args["M"], args["N"], args["K"]
    pad = MAX_BLOCK  # offsets run up to a tile past the edge (C) or a K tile past K (A, B)
    spans = ((M + pad) * abs(args["stride_am"]) + (K + pad) * abs(args["stride_ak"]),
             (K + pad) * abs(args["stride_bk"]) + (N + pad) * abs(args["stride_bn"]),
             (M + pad) * abs(args["stride_cm"]) + (N + pad) * abs(args["stride_cn"]))
    return max(spans) >= INT32_SPAN


def interpreting() -> bool:
    """Triton's CPU interpreter is on (TRITON_INTERPRET=1): kernels run on CPU tensors with NumPy."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    import os

    return os.environ.get("TRITON_INTERPRET", "0") == "1"


class Kernels:
    """The kernel with its launch heuristics, and one autotuned wrapper per configuration list."""

    def __init__(self, configs: Mapping[str, Sequence[Mapping]], key: Sequence[str]):
        jit = triton.jit(matmul_kernel)  # the interpreter or the compiler, as TRITON_INTERPRET says now
        self.kernel = triton.heuristics({"EVEN_K": even_k, "INDEX_64": index_64})(jit)
        self.tuned = {name: triton.autotune(configs=[to_triton_config(c) for c in cfgs], key=list(key))(self.kernel)
                      for name, cfgs in configs.items()}


@functools.cache
def _build(configs_items: tuple, key: tuple, interpret: bool) -> Kernels:
    return Kernels({name: [dict(c) for c in cfgs] for name, cfgs in configs_items}, key)


def kernels(configs: Mapping[str, Sequence[Mapping]], key: Sequence[str]) -> Kernels:
    """The kernels for these configuration lists (built once per list, key and interpreter mode)."""
    items = tuple((name, tuple(tuple(sorted(c.items())) for c in cfgs)) for name, cfgs in configs.items())
    return _build(items, tuple(key), interpreting())


TILE_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")


def to_triton_config(c: Mapping):
    return triton.Config({k: c[k] for k in TILE_KEYS}, num_warps=c["num_warps"], num_stages=c["num_stages"])


def from_triton_config(cfg) -> dict:
    """A triton.Config as the plain dict of the peers' configuration lists."""
    out = {k: cfg.kwargs[k] for k in TILE_KEYS if k in cfg.kwargs}
    out["num_warps"] = cfg.num_warps
    out["num_stages"] = cfg.num_stages
    return out


def launch_args(a, b, c) -> tuple:
    M, K = a.shape
    N = b.shape[1]
    return (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


def grid(M: int, N: int) -> Callable[[Mapping], tuple]:
    return lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)


POINTER_TYPES = {"fp32": "*fp32", "fp16": "*fp16", "bf16": "*bf16"}


def compile_config(config: Mapping, dtype: str, *, capability: int = 90, a_col: bool = False, b_col: bool = False,
                   c_col: bool = False, even_k: bool = True):
    """Compile the kernel ahead of time for one configuration, without a GPU (static checks): the
    contiguous stride of each operand is 1 and the other values are multiples of 16, as Triton
    specializes them at run time for aligned operands. Returns Triton's compiled kernel
    (``.asm["cubin"]``, ``.asm["ptx"]``, ``.metadata.shared``)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = compiler_function()
    unit = {"stride_am" if a_col else "stride_ak", "stride_bk" if b_col else "stride_bn",
            "stride_cm" if c_col else "stride_cn"}
    sig = {"a_ptr": POINTER_TYPES[dtype], "b_ptr": POINTER_TYPES[dtype], "c_ptr": POINTER_TYPES[dtype],
           "M": "i32", "N": "i32", "K": "i32"}
    for s in ARG_NAMES[6:]:
        sig[s] = "constexpr" if s in unit else "i32"
    const = {**{s: 1 for s in unit}, "EVEN_K": even_k, "INDEX_64": False, **{k: config[k] for k in TILE_KEYS}}
    for k in const:
        sig.setdefault(k, "constexpr")
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n, t in sig.items() if t != "constexpr"}
    src = ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", capability, 32),
                          options={"num_warps": config["num_warps"], "num_stages": config["num_stages"]})


@functools.cache
def compiler_function():
    """The kernel as a JITFunction for the compiler, even under TRITON_INTERPRET=1."""
    from triton.runtime.jit import JITFunction

    return JITFunction(matmul_kernel)
