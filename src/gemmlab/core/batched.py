"""Batched matmul: operands of three or more dimensions with ``torch.matmul``'s semantics.

a is (..., M, K) and b is (..., K, N); their batch dimensions (all but the last two) broadcast
against each other as NumPy's and PyTorch's do, and the result is (batch..., M, N). Any strides
(transposed views, expanded dimensions of stride 0) are read as they are.

Three ways to run it, decided from the shapes and strides alone (``layout``, ``one_problem``):

* **folded**: where b does not vary over the batch (2-D, or broadcast) and a's batch and row
  dimensions walk memory as one run of rows (a contiguous (B, M, K), or any view whose batch
  strides chain onto its row stride), the batch folds into M: one 2-D GEMM of (B*M, K) @ (K, N)
  into the (B*M, N) result, with ``auto``'s choice for that shape: a model's linear layer on
  (batch, sequence, features) is one GEMM.
* **one launch**: otherwise, where each operand's batch dimensions flatten into one stride (a
  contiguous batch, a transposed or expanded view: ``flat_stride``), one GemmProblem of ``batch``
  elements (element i of each operand i strides after element 0) that a rung walking batch x tiles
  runs in one launch (``Rung.batched``: rung 21, 16-bit operands on sm_90; ``rules.batched_choice``).
* **per batch**: else one 2-D GEMM per batch element, each launched on the element's pointers
  through a plan made once per alignment class (the 16-byte alignment of the three bases; a batch
  stride that is not a whole number of 16-byte vectors alternates it): batch dimensions that do not
  flatten, or a dtype or GPU no batched rung serves.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from .dtypes import get as get_dtype
from .problem import ArrayFacts, GemmProblem, info_2d


@dataclass(frozen=True)
class Layout:
    """How a batched product runs: the broadcast batch shape, the (M, N, K) of each element, each
    operand's batch strides (elements; 0 where it is broadcast) and whether it folds."""

    batch: tuple
    M: int
    N: int
    K: int
    a_strides: tuple
    b_strides: tuple
    folds: bool

    @property
    def count(self) -> int:
        return math.prod(self.batch)


def broadcast_batch(a_batch: tuple, b_batch: tuple) -> tuple:
    """The broadcast of two batch shapes (ValueError naming both where they do not broadcast)."""
    n = max(len(a_batch), len(b_batch))
    a_full, b_full = (1,) * (n - len(a_batch)) + a_batch, (1,) * (n - len(b_batch)) + b_batch
    out = []
    for x, y in zip(a_full, b_full):
        if x != y and 1 not in (x, y):
            raise ValueError(f"batch dimensions {a_batch} of a and {b_batch} of b do not broadcast "
                             f"(matmul broadcasts them as NumPy and PyTorch do)")
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(out)


def _batch_strides(shape: tuple, strides: tuple, batch: tuple) -> tuple:
    """The operand's strides over the broadcast ``batch`` (0 where it has extent 1 or no dimension)."""
    own = len(shape) - 2
    pad = len(batch) - own
    out = []
    for d in range(len(batch)):
        if d < pad:
            out.append(0)
        else:
            out.append(0 if shape[d - pad] == 1 else strides[d - pad])
    return tuple(out)


def _folds(a: ArrayFacts, a_strides: tuple, b_strides: tuple, batch: tuple) -> bool:
    """Whether a's batch and rows are one run of rows (row-major rows of stride lda, each batch
    dimension's stride its inner extent times the stride below it) while b is the same for every
    element."""
    if any(s != 0 for s, n in zip(b_strides, batch) if n > 1):
        return False
    M, K = a.shape[-2:]
    row_stride, col_stride = a.strides[-2:]
    if col_stride != 1 and K > 1:
        return False
    step, inner = (row_stride if M > 1 else max(K, 1)), M
    for s, n in zip(reversed(a_strides), reversed(batch)):
        if n == 1:
            continue
        if s != step * inner:
            return False
        step, inner = s, n
    return True


def layout(a: ArrayFacts, b: ArrayFacts) -> Layout:
    """The Layout of a @ b for operands of which at least one has a batch (errors name the problem)."""
    for name, x in (("a", a), ("b", b)):
        if len(x.shape) < 2:
            raise ValueError(f"{name} must have at least 2 dimensions (..., rows, cols) for a batched matmul, "
                             f"got shape {x.shape}")
    if a.dtype != b.dtype:
        raise TypeError(f"mixed dtypes: a is {a.dtype}, b is {b.dtype}; both must match")
    if a.device != b.device:
        raise ValueError(f"a is on device {a.device} but b is on device {b.device}; both must be on one device")
    M, K = a.shape[-2:]
    K2, N = b.shape[-2:]
    if K != K2:
        raise ValueError(f"shape mismatch: a is {a.shape} and b is {b.shape}; a.shape[-1] must equal b.shape[-2]")
    batch = broadcast_batch(a.shape[:-2], b.shape[:-2])
    sa, sb = _batch_strides(a.shape, a.strides, batch), _batch_strides(b.shape, b.strides, batch)
    return Layout(batch, M, N, K, sa, sb, _folds(a, sa, sb, batch))


def offsets(strides: tuple, batch: tuple):
    """The element offset of each batch element, in row-major order of the batch."""
    for idx in itertools.product(*(range(n) for n in batch)):
        yield sum(i * s for i, s in zip(idx, strides))


def batch_strides(x: ArrayFacts, batch: tuple) -> tuple:
    """The array's strides over the broadcast ``batch`` (0 where it is broadcast)."""
    return _batch_strides(x.shape, x.strides, batch)


def element(p: GemmProblem, pa: int, pb: int, pc: int) -> GemmProblem:
    """The problem ``p`` on another element's pointers."""
    return replace(p, a=replace(p.a, ptr=pa), b=replace(p.b, ptr=pb), c=replace(p.c, ptr=pc))


def check_output(lay: Layout, a: ArrayFacts, b: ArrayFacts, c: ArrayFacts, bias: ArrayFacts | None = None) -> tuple:
    """The output's batch strides, after checking that it has no broadcast batch dimension and
    overlaps neither input (nor the bias) anywhere (ValueError naming the problem)."""
    itemsize = get_dtype(c.dtype).itemsize
    sc = _batch_strides(c.shape, c.strides, lay.batch)
    if any(s == 0 and n > 1 for s, n in zip(sc, lay.batch)):
        raise ValueError(f"out has a batch dimension of stride 0 (strides {c.strides}): every element of the "
                         f"result needs memory of its own")
    out_span = _span(c, sc, lay.batch, itemsize)
    inputs = [("a", a, lay.a_strides), ("b", b, lay.b_strides)] + ([("bias", bias, ())] if bias is not None else [])
    for name, x, st in inputs:
        lo, hi = _span(x, st, lay.batch if st else (), get_dtype(x.dtype).itemsize)
        if lo < out_span[1] and out_span[0] < hi:
            raise ValueError(f"the output overlaps {name} in memory; the output must not alias an input")
    return sc


def _checked_infos(lay: Layout, a: ArrayFacts, b: ArrayFacts, c: ArrayFacts):
    """(a's, b's, the output's element-0 ArrayInfo, the output's batch strides) after
    ``check_output``."""
    sc = check_output(lay, a, b, c)
    ai = info_2d("a", a.ptr, a.shape[-2:], a.strides[-2:], a.dtype, a.device, a.lib, a.stream)
    bi = info_2d("b", b.ptr, b.shape[-2:], b.strides[-2:], b.dtype, b.device, b.lib, b.stream)
    ci = info_2d("out", c.ptr, c.shape[-2:], c.strides[-2:], c.dtype, c.device, c.lib, c.stream)
    return ai, bi, ci, sc


def problems(lay: Layout, a: ArrayFacts, b: ArrayFacts, c: ArrayFacts, alpha: float, beta: float):
    """The 2-D problem of each batch element in row-major order of the batch (c: the (batch..., M, N)
    result), after one check that the output overlaps neither input anywhere."""
    itemsize, c_size = get_dtype(a.dtype).itemsize, get_dtype(c.dtype).itemsize
    ai, bi, ci, sc = _checked_infos(lay, a, b, c)
    for oa, ob, oc in zip(offsets(lay.a_strides, lay.batch), offsets(lay.b_strides, lay.batch),
                          offsets(sc, lay.batch)):
        yield GemmProblem(lay.M, lay.N, lay.K, a.dtype, replace(ai, ptr=ai.ptr + oa * itemsize),
                          replace(bi, ptr=bi.ptr + ob * itemsize), replace(ci, ptr=ci.ptr + oc * c_size), alpha, beta)


def flat_stride(strides: tuple, batch: tuple) -> int | None:
    """The one stride that walks an operand's elements in row-major order of the batch, where its
    batch dimensions flatten into one (each dimension's stride its inner extent times the stride
    below it, dimensions of extent 1 skipped; 0 where it is the same for every element), else None."""
    dims = [(s, n) for s, n in zip(strides, batch) if n > 1]
    if not dims:
        return 0
    step, inner = dims[-1]
    for s, n in reversed(dims[:-1]):
        if s != step * inner:
            return None
        step, inner = s, n
    return dims[-1][0]


def one_problem(lay: Layout, a: ArrayFacts, b: ArrayFacts, c: ArrayFacts) -> GemmProblem | None:
    """The batch as one GemmProblem (``GemmProblem.batch``) for a launch that walks batch x tiles, or
    None where an operand's batch dimensions do not flatten into one stride (``flat_stride``)."""
    ai, bi, ci, sc = _checked_infos(lay, a, b, c)
    flat = [flat_stride(st, lay.batch) for st in (lay.a_strides, lay.b_strides, sc)]
    if None in flat or lay.count >= 2 ** 31:
        return None
    return GemmProblem(lay.M, lay.N, lay.K, a.dtype, ai, bi, ci, 1.0, 0.0, batch=lay.count, batch_strides=tuple(flat))


def _span(x: ArrayFacts, batch_strides: tuple, batch: tuple, itemsize: int) -> tuple[int, int]:
    """[first byte, one past the last byte) that the operand's elements cover over the batch."""
    lo = hi = 0
    for s, n in itertools.chain(zip(batch_strides, batch), zip(x.strides[-2:], x.shape[-2:])):
        if n == 0:
            return x.ptr, x.ptr
        reach = s * (n - 1)
        lo, hi = (lo + reach, hi) if reach < 0 else (lo, hi + reach)
    return x.ptr + lo * itemsize, x.ptr + (hi + 1) * itemsize


def output_folds(c: ArrayFacts, lay: Layout) -> bool:
    """Whether the (batch..., M, N) output's batch and rows are one run of row-major rows (the
    folded GEMM writes it as one (B*M, N) matrix)."""
    sc = _batch_strides(c.shape, c.strides, lay.batch)
    return _folds(c, sc, (0,) * len(lay.batch), lay.batch)
