"""Operand packing: the PACK parameter of the rungs with 16-byte fast paths (17-21).

An operand whose base is not 16-byte aligned, or whose leading dimension is not a multiple of 16
bytes, cannot take a rung's 16-byte path (cp.async of 16 bytes, TMA): its variant copies it 2 or 4
bytes at a time (``GL_VEC_A`` / ``GL_VEC_B`` = 0, kernels/common.cuh). With ``PACK=1`` a plan copies
each such operand first, on the same stream, into the stream's workspace (core/workspace.py):
same layout, leading dimension rounded up to a multiple of 32 bytes, base 256-byte aligned
(kernels/pack.cu); the GEMM then runs the variant with that operand's vector flag on, reading the
copy. An operand that is already legal is read where it is.

A ``k_major`` rung (core/registry.py; rung 22, whose TF32 wgmma has no transpose) reads K-major
operands only: its plans always pack, with or without PACK, every operand that is MN-major (column-
major A, row-major B) -- transposed, by the ``pack_t`` kernel -- or without 16-byte access.

A ``k_major`` rung that reads a column-major A into registers in a precision (``Rung.register_a``:
rung 22 in tf32, wgmma's register-A form) copies less: column-major A is read where it is, and a
problem whose A and B are both row-major (B MN-major) is computed transposed, C^T = B^T A^T
(``kernel_layout``): B^T is then the column-major A, A^T the K-major B, and C is written
column-major; only a column-major A with a row-major B still has its B transposed by a copy.

A rung that reads an operand as two planes in a precision (``Rung.planes``: rung 22 in 3xtf32) gets
a split pack of BOTH operands, whatever their layout and alignment: one launch per operand reads it
once and writes the big TF32 parts hi = tf32(x) and then the small ones lo = tf32(x - hi), two
K-major planes of the same shape one after the other (kernels/pack.cu, GL_PACK_SPLIT; ``split_tf32``
is its host model).

This module is the pure part: which operands a problem packs (``plan_packs``), the problem the
GEMM then sees (``packed_view``), the workspace's layout when a plan packs and splits K
(``layout``), and the pack kernel (``compile_pack``, ``grid``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import compile as _compile
from .dtypes import VECTOR_BYTES, get as get_dtype
from .problem import KernelProblem
from .schema import MAX_GRID_Y, MAX_GRID_Z
from .tensormaps import ROW_ALIGNMENT

SOURCE, KERNEL, KERNEL_T = "pack.cu", "pack", "pack_t"
ROWS = 4              # GL_PACK_ROWS in the kernel: rows (warps) per block of 32 * ROWS threads
TILE_T, THREADS_T = 32, 256   # pack_t: GL_PACK_T x GL_PACK_T tiles, blocks of 256 threads
ALIGN = 256           # bytes: each region of the workspace starts on this boundary


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


@dataclass(frozen=True)
class Pack:
    """One operand to copy (the kernel's view: C row-major, ``operand`` "A" or "B"): ``outer``
    rows of ``inner`` contiguous elements, row i at i * ``ld`` in the user's array and at
    i * ``ld_packed`` in the copy, which starts ``offset`` bytes into the workspace. ``transpose``:
    the copy is the transpose instead, ``inner`` rows of ``outer`` elements, row c at c *
    ``ld_packed`` (the other layout: an MN-major operand made K-major)."""

    operand: str
    outer: int
    inner: int
    ld: int
    ld_packed: int
    itemsize: int
    offset: int = 0
    transpose: bool = False
    planes: int = 1       # 2: the split pack, hi then lo planes (3xTF32), each rows_packed x ld_packed
    batch: int = 1        # copies of a batch's elements in one launch (GL_PACK_BATCHED), element z of the
    batch_stride: int = 0  # source batch_stride elements after element 0, of the copy element_stride after

    @property
    def rows_packed(self) -> int:
        """Rows of the copy: ``inner`` when transposed, else ``outer``."""
        return self.inner if self.transpose else self.outer

    @property
    def plane_bytes(self) -> int:
        """Bytes from one plane of the copy to the next (the kernel's rows * ldp elements; a
        multiple of 16 bytes, as a tensor map's stride must be)."""
        return self.rows_packed * self.ld_packed * self.itemsize

    @property
    def element_stride(self) -> int:
        """Elements from one batch element's copy to the next (its rows_packed x ld_packed: a whole
        number of 16-byte vectors, as a tensor map's stride must be)."""
        return self.rows_packed * self.ld_packed

    @property
    def nbytes(self) -> int:
        """Bytes of the copy in the workspace, all planes and batch elements (rounded up to ``ALIGN``)."""
        return _round_up(self.planes * self.plane_bytes * self.batch, ALIGN)

    @property
    def traffic(self) -> int:
        """Bytes the pack kernel reads and writes."""
        return (self.outer * self.inner * self.itemsize + self.planes * self.plane_bytes) * self.batch

    @property
    def kernel(self) -> str:
        """The entry point of kernels/pack.cu that makes this copy."""
        return KERNEL_T if self.transpose else KERNEL

    @property
    def threads(self) -> int:
        """Threads per block of ``kernel``."""
        return THREADS_T if self.transpose else 32 * ROWS

    def grid(self) -> tuple[int, int, int]:
        """pack: one lane per 16-byte chunk of a row along x; ROWS rows per block along y (rows past
        grid.y's limit are strided over by the kernel). pack_t: one TILE_T-square tile per block,
        source columns along x, source rows (with the padding) along y, strided past grid.y's limit."""
        if self.transpose:
            return (-(-self.inner // TILE_T), min(-(-self.ld_packed // TILE_T), MAX_GRID_Y), 1)
        chunks = self.ld_packed * self.itemsize // VECTOR_BYTES
        return (-(-chunks // 32), min(-(-self.outer // ROWS), MAX_GRID_Y), self.batch)   # a batch's elements along z

    def __str__(self) -> str:
        return (f"{self.operand}: ld {self.ld} -> {self.ld_packed}" + (" transposed" if self.transpose else "")
                + (" split into TF32 hi + lo" if self.planes > 1 else "")
                + (f" x {self.batch} batch elements" if self.batch > 1 else ""))


def packed_ld(inner: int, dtype: str) -> int:
    """The copy's leading dimension: ``inner`` rounded up to rows of a whole number of
    ``ROW_ALIGNMENT`` bytes (two 16-byte vectors). Rows of an odd number of vectors start every other
    TMA box row in the middle of a sector pair, which doubles the L2's requests: the rungs read
    operands with such rows more slowly (core/tensormaps.py), and the copy costs nothing more."""
    return _round_up(inner, ROW_ALIGNMENT // get_dtype(dtype).itemsize)


def _pack(operand: str, rows: int, cols: int, ld: int, col_major: bool, dtype: str, transpose: bool = False,
          planes: int = 1) -> Pack:
    outer, inner = (cols, rows) if col_major else (rows, cols)
    ldp = packed_ld(outer if transpose else inner, dtype)
    if ldp >= 2**31:
        raise ValueError(f"operand {operand} would be packed with leading dimension {ldp}; the kernels take it "
                         f"as a 32-bit int: use PACK=0")
    if planes > 1 and dtype != "fp32":
        raise ValueError(f"the split pack splits fp32 operands into TF32 parts, not {dtype}")
    return Pack(operand, outer, inner, ld, ldp, get_dtype(dtype).itemsize, transpose=transpose, planes=planes)


def _batched(p: Pack, batch: int, stride: int) -> Pack:
    """The pack of every element of a batch (one copy when the operand is broadcast, stride 0)."""
    if batch <= 1 or stride == 0:
        return p
    if batch > MAX_GRID_Z:
        raise ValueError(f"a batch of {batch} operand copies needs grid.z, at most {MAX_GRID_Z}: use PACK=0")
    return replace(p, batch=batch, batch_stride=stride)


def kernel_layout(a_col: bool, b_col: bool, k_major: bool, register_a: bool = False) -> tuple[bool, bool, bool]:
    """(A column-major, B column-major, C column-major) of the problem a kernel computes for
    operands in these layouts (the kernel's view: C row-major) once ``for_kernel`` has transposed
    it (``register_a``: row-major A and B become C^T = B^T A^T) and copied what it copies (a
    ``k_major`` rung's MN-major operands: K-major copies, a column-major A only without
    ``register_a``)."""
    c_col = False
    if k_major and register_a and not a_col and not b_col:
        a_col, b_col, c_col = True, True, True
    if k_major:
        a_col, b_col = a_col and register_a, True
    return a_col, b_col, c_col


def plan_packs(kp: KernelProblem, dtype: str, k_major: bool = False, planes: int = 1,
               register_a: bool = False) -> tuple[Pack, ...]:
    """The operands of ``kp`` (the kernel's view) without 16-byte access, and with ``k_major`` the
    MN-major ones too (column-major A unless the kernel reads it into registers, ``register_a``;
    row-major B: transposed), as packs laid out one after the other from offset 0 of the
    workspace; () when none needs a copy. ``planes`` 2 (3xTF32): both operands, each split into
    its two TF32 planes (MN-major ones transposed with ``k_major``)."""
    a_t, b_t = k_major and kp.a_col and not register_a, k_major and not kp.b_col
    split = planes > 1
    if kp.batch > 1 and (a_t or b_t or split):
        raise ValueError("a batch in one launch copies its operands as they are: no transposing or split copies")
    packs = []
    if not kp.vec_a or a_t or split:
        packs.append(_batched(_pack("A", kp.M, kp.K, kp.lda, kp.a_col, dtype, a_t, planes), kp.batch, kp.batch_a))
    if not kp.vec_b or b_t or split:
        packs.append(_batched(_pack("B", kp.K, kp.N, kp.ldb, kp.b_col, dtype, b_t, planes), kp.batch, kp.batch_b))
    offset, out = 0, []
    for p in packs:
        out.append(replace(p, offset=offset))
        offset += p.nbytes
    return tuple(out)


def for_kernel(kp: KernelProblem, dtype: str, pack: bool, k_major: bool,
               planes: int = 1, register_a: bool = False) -> tuple[tuple[Pack, ...], KernelProblem]:
    """What a plan copies first and the problem its kernel then computes: with PACK=1 (``pack``)
    the operands without 16-byte access, for a ``k_major`` rung those and the MN-major ones, with
    ``planes`` 2 (3xTF32) both operands split; ((), kp) when nothing is copied. With
    ``register_a`` (and ``k_major``) a problem with row-major A and B is first transposed
    (``KernelProblem.transposed``: its C column-major), so B^T is read into registers and nothing
    is transposed by a copy. The plan and the tuner's compile ahead both read it, so the tuner
    compiles the variant the plan will run."""
    register_a = register_a and planes == 1
    if kernel_layout(kp.a_col, kp.b_col, k_major, register_a)[2]:   # C column-major: the transposed problem
        kp = kp.transposed()
    packs = plan_packs(kp, dtype, k_major, planes, register_a) if pack or k_major or planes > 1 else ()
    return packs, (packed_view(kp, packs) if packs else kp)


def packed_view(kp: KernelProblem, packs: tuple[Pack, ...]) -> KernelProblem:
    """The problem the GEMM computes after ``packs``: the packed leading dimensions and vector
    flags on, a transposed operand in the other layout. The pointers stay the user's (each launch
    packs from them)."""
    for p in packs:
        stride = p.element_stride if p.batch > 1 else 0   # a batch's copies, one after the other
        if p.operand == "A":
            kp = replace(kp, lda=p.ld_packed, vec_a=True, a_col=kp.a_col != p.transpose, batch_a=stride)
        else:
            kp = replace(kp, ldb=p.ld_packed, vec_b=True, b_col=kp.b_col != p.transpose, batch_b=stride)
    return kp


def layout(packs: tuple[Pack, ...], split_bytes: int) -> tuple[int, int]:
    """(offset of the split-K partial products, bytes to allocate) of a workspace holding
    ``packs`` (at their offsets) and then ``split_bytes`` of partial products (0: no split),
    from its first ``ALIGN``-byte boundary (``base``): the allocation has room to round up to it."""
    split_offset = sum(p.nbytes for p in packs)
    return split_offset, split_offset + _round_up(split_bytes, ALIGN) + (ALIGN if packs else 0)


def base(ptr: int) -> int:
    """The first ``ALIGN``-byte boundary at or after a workspace's pointer (cuMemAlloc's are on
    one already; a stream-ordered allocation is promised less)."""
    return _round_up(ptr, ALIGN)


def describe(packs: tuple[Pack, ...]) -> str:
    """``"packs A: ld 4093 -> 4096, B: ld 4093 -> 4096"`` ("" when nothing is packed; a transposed
    one reads ``"B: ld 4096 -> 4096 transposed"``)."""
    return "packs " + ", ".join(map(str, packs)) if packs else ""


def compile_pack(dtype: str, arch: str, before_compile=None, kernel: str = KERNEL,
                 split: bool = False, batched: bool = False) -> _compile.CompiledKernel:
    """The pack kernel (``kernel``: ``KERNEL`` or the transposing ``KERNEL_T``) for ``dtype`` on
    ``arch``, cached like a variant; ``split``: its split version (two TF32 planes, GL_PACK_SPLIT);
    ``batched``: a batch's copies in one launch (GL_PACK_BATCHED)."""
    defines = {"GL_DTYPE": get_dtype(dtype).code}
    if split:   # only then: the plain pack's cache key stays as it was
        defines["GL_PACK_SPLIT"] = 1
    if batched:   # likewise
        defines["GL_PACK_BATCHED"] = 1
    return _compile.compile_source(SOURCE, kernel, arch, defines, before_compile=before_compile)


TF32_DROP = 0xFFFFE000    # the bits of an FP32 a TF32 keeps: sign, exponent, 10 fraction bits


def tf32_round(x):
    """numpy model of cvt.rna.tf32.f32 on float32 ``x`` (round to nearest, ties away from zero:
    half a TF32 ulp added to the magnitude's bits, the low 13 dropped; a carry past the largest
    exponent gives inf). NaN and inf stay as they are."""
    import numpy as np

    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(TF32_DROP)).view(np.float32)
    return np.where(np.isfinite(x), rounded, x)


def split_tf32(x):
    """numpy model of the split pack (kernels/pack.cu, common.cuh gl_split) on float32 ``x``:
    (hi, lo), both TF32-representable, hi = tf32(x), lo = tf32(x - hi) (x - hi exact in FP32)."""
    import numpy as np

    x = np.asarray(x, dtype=np.float32)
    hi = tf32_round(x)
    with np.errstate(invalid="ignore", over="ignore"):
        lo = tf32_round((x - hi).astype(np.float32))
    return hi, lo
