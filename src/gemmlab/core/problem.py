"""From user arrays to a normalized GEMM problem.

A user passes CuPy arrays or PyTorch CUDA tensors (or anything with ``__cuda_array_interface__``).
``describe_array`` reads pointer, shape, strides, dtype and device without copying;
``make_problem`` checks the three operands together and maps them onto the kernels' one contract
(C row-major inside the kernel, see kernels/common.cuh):

* a is (M, K), b is (K, N), c is (M, N); each row-major (C-contiguous, maybe with a leading
  dimension larger than the row) or column-major (F-contiguous, e.g. ``x.T``).
* a column-major C is computed as C^T = B^T A^T: the roles of A and B swap, M and N swap, and
  each operand's layout flips (a row-major (K, N) B read as the column-major (N, K) B^T).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .dtypes import BY_TYPESTR, FP8_FORMATS, VECTOR_BYTES, fp8_format, from_array_name, get as get_dtype


@dataclass(frozen=True)
class ArrayInfo:
    """A 2-D device array as the kernels see it: its facts, not the array."""

    ptr: int
    rows: int
    cols: int
    ld: int            # leading dimension in elements
    col_major: bool
    dtype: str         # "fp32" | "fp16" | "bf16" | "fp8"
    device: int
    lib: str           # "cupy" | "torch" | "cai"
    stream: int | None = None  # CUDA Array Interface v3: the producer's stream to order after
    fmt: str = ""      # an fp8 array's format, "e4m3" or "e5m2" (core/dtypes.py, FP8_FORMATS)
    # No reference to the array itself: problems live on in remembered plans (the fast path), and
    # a library call must not keep a caller's memory alive.

    @property
    def itemsize(self) -> int:
        return get_dtype(self.dtype).itemsize

    @property
    def span_elements(self) -> int:
        """Elements from the first to one past the last element (what a kernel may touch)."""
        if self.rows == 0 or self.cols == 0:
            return 0
        outer, inner = (self.cols, self.rows) if self.col_major else (self.rows, self.cols)
        return (outer - 1) * self.ld + inner

    def vec_ok(self) -> bool:
        """16-byte vector access legal: aligned base and ld a multiple of the vector width."""
        return self.ptr % VECTOR_BYTES == 0 and self.ld % get_dtype(self.dtype).vector_elements == 0


def _lib_of(x) -> str:
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        return "cupy"
    if mod == "torch":
        return "torch"
    if mod == "numpy":
        raise TypeError(
            f"got a NumPy array ({type(x).__name__}) in host memory; gemmlab computes on the GPU: "
            "move it there first, e.g. cupy.asarray(x) or torch.as_tensor(x, device='cuda')"
        )
    if hasattr(x, "__cuda_array_interface__"):
        return "cai"
    raise TypeError(
        f"expected a CuPy array or a PyTorch CUDA tensor, got {type(x).__module__}.{type(x).__name__}"
    )


def _layout(name: str, shape, strides_el) -> tuple[bool, int]:
    """(col_major, ld) for a 2-D strided view, or ValueError when it is neither layout."""
    rows, cols = shape
    s0, s1 = strides_el
    if rows == 0 or cols == 0:  # an empty array touches no memory: any strides will do
        return False, max(cols, 1)
    # A dimension of extent 1 has an arbitrary stride: it never moves.
    if (s1 == 1 or cols == 1) and (rows == 1 or s0 >= max(cols, 1)):
        return False, (s0 if rows > 1 else max(cols, 1))
    if (s0 == 1 or rows == 1) and (cols == 1 or s1 >= max(rows, 1)):
        return True, (s1 if cols > 1 else max(rows, 1))
    raise ValueError(
        f"{name} has strides {tuple(strides_el)} (in elements) for shape {tuple(shape)}: neither row-major "
        "(unit stride along columns) nor column-major (unit stride along rows); pass a contiguous copy"
    )


@dataclass(frozen=True)
class ArrayFacts:
    """What a device array of any number of dimensions is, read without copying: shape and strides
    in elements (``describe_array`` makes a 2-D one an ArrayInfo; core.batched reads N-D ones)."""

    ptr: int
    shape: tuple
    strides: tuple     # in elements
    dtype: str         # "fp32" | "fp16" | "bf16" | "fp8"
    device: int
    lib: str
    stream: int | None = None
    fmt: str = ""      # an fp8 array's format


def array_facts(name: str, x, raw_fp8: str = "") -> ArrayFacts:
    """The facts of a CuPy array, a PyTorch CUDA tensor or a ``__cuda_array_interface__`` object;
    errors name ``name`` and the problem. ``raw_fp8`` (a format of core/dtypes.py's FP8_FORMATS): an
    array of uint8 holds FP8 bytes of that format (CuPy has no FP8 dtype)."""
    lib = _lib_of(x)
    stream = None
    if lib == "torch":  # x is a torch.Tensor: torch is imported already
        if not x.is_cuda:
            raise TypeError(f"{name} is a PyTorch tensor on {x.device}; gemmlab needs CUDA tensors (x.cuda())")
        dt = str(x.dtype).removeprefix("torch.")
        shape, strides, ptr, dev = tuple(x.shape), tuple(x.stride()), x.data_ptr(), x.device.index
    elif lib == "cupy":
        dt = x.dtype.name
        shape, ptr, dev = tuple(x.shape), x.data.ptr, x.device.id
        if any(s % x.dtype.itemsize for s in x.strides):
            raise ValueError(f"{name} has strides {x.strides} bytes that are not whole elements")
        strides = tuple(s // x.dtype.itemsize for s in x.strides)
    else:
        cai = x.__cuda_array_interface__
        typestr = cai["typestr"]
        dt = BY_TYPESTR[typestr].array_name if typestr in BY_TYPESTR else typestr
        shape = tuple(cai["shape"])
        itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 1
        strides = cai.get("strides")
        if strides is None:   # C-contiguous
            strides, step = [], 1
            for n in reversed(shape):
                strides.insert(0, step)
                step *= max(n, 1)
            strides = tuple(strides)
        else:
            strides = tuple(s // itemsize for s in strides)
        stream = _cai_stream(name, cai)
        ptr, dev = cai["data"][0], _device_of_pointer(cai["data"][0])
    if raw_fp8 and dt in ("uint8", "|u1", "<u1"):   # CuPy's name, or a __cuda_array_interface__ typestr
        dt = FP8_FORMATS[raw_fp8]
    try:
        dtype = from_array_name(dt).name
    except TypeError as exc:
        raise TypeError(f"{name} has {exc}") from None
    return ArrayFacts(int(ptr), tuple(int(n) for n in shape), tuple(int(v) for v in strides), dtype, int(dev), lib,
                      stream, fp8_format(dt))


def describe_array(name: str, x, vector: bool = False, raw_fp8: str = "") -> ArrayInfo:
    """The facts of a 2-D device array (``vector``: of a 1-D one, described as its one row;
    ``raw_fp8``: as for ``array_facts``)."""
    f = array_facts(name, x, raw_fp8)
    shape, strides = f.shape, f.strides
    if vector:
        if len(shape) != 1:
            raise ValueError(f"{name} must be 1-D, got {len(shape)}-D with shape {shape}")
        shape, strides = (1, shape[0]), (shape[0] * strides[0], strides[0])
    if len(shape) != 2:
        raise ValueError(f"{name} must be 2-D, got {len(shape)}-D with shape {shape}")
    return info_2d(name, f.ptr, shape, strides, f.dtype, f.device, f.lib, f.stream, f.fmt)


def info_2d(name: str, ptr: int, shape, strides, dtype: str, device: int, lib: str, stream=None,
            fmt: str = "") -> ArrayInfo:
    """The ArrayInfo of a 2-D view (rows, cols) with these element strides at ``ptr``."""
    col_major, ld = _layout(name, shape, strides)
    return ArrayInfo(int(ptr), int(shape[0]), int(shape[1]), int(ld), col_major, dtype, int(device), lib, stream, fmt)


def _cai_stream(name: str, cai: dict) -> int | None:
    """The ``stream`` entry of a CUDA Array Interface (v3): None when the producer needs no
    ordering, 1 the legacy default stream, 2 the per-thread default stream, else a stream handle
    that the launch must wait for. 0 is forbidden by the protocol (ambiguous)."""
    stream = cai.get("stream")
    if stream is None:
        return None
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(f"{name}.__cuda_array_interface__['stream'] must be an int or None, got {stream!r}")
    if stream == 0:
        raise ValueError(f"{name}.__cuda_array_interface__ has stream 0, which the CUDA Array Interface forbids "
                         "(ambiguous): export 1 for the legacy default stream, 2 for per-thread, or the handle")
    return stream


def _device_of_pointer(ptr: int) -> int:
    from .driver import cuda

    driver = cuda()
    err, dev = driver.cuPointerGetAttribute(driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise TypeError(f"pointer {ptr:#x} is not device memory ({err})")
    return int(dev)


@dataclass(frozen=True)
class GemmProblem:
    """The logical problem C = alpha * A @ B + beta * C, in the user's orientation."""

    M: int
    N: int
    K: int
    dtype: str
    a: ArrayInfo
    b: ArrayInfo
    c: ArrayInfo
    alpha: float
    beta: float
    # a batch of ``batch`` problems in one launch (core/batched.py): a, b and c above are element 0,
    # element i of each is i * its stride (elements) further; stride 0: the same for every element
    batch: int = 1
    batch_strides: tuple = (0, 0, 0)

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K * self.batch

    @property
    def out_dtype(self) -> str | None:
        """C's dtype where it is not the operands' (an output dtype, ``Rung.outputs``), else None."""
        return None if self.c.dtype == self.dtype else self.c.dtype

    def _vec(self, x: ArrayInfo, stride: int) -> bool:
        """16-byte access to x in every element: x's own, and a batch stride of whole vectors."""
        return x.vec_ok() and stride >= 0 and (stride * x.itemsize) % VECTOR_BYTES == 0

    def kernel_view(self) -> "KernelProblem":
        """The problem as the kernel computes it: C row-major (transpose identity if needed)."""
        a, b, c = self.a, self.b, self.c
        sa, sb, sc = self.batch_strides
        if not c.col_major:
            return KernelProblem(self.M, self.N, self.K, a.ptr, a.ld, a.col_major, self._vec(a, sa),
                                 b.ptr, b.ld, b.col_major, self._vec(b, sb), c.ptr, c.ld, self._vec(c, sc), self.alpha,
                                 self.beta, batch=self.batch, batch_a=sa, batch_b=sb, batch_c=sc)
        # C^T (N x M, row-major, ld = c.ld) = B^T (N x K) @ A^T (K x M)
        return KernelProblem(self.N, self.M, self.K, b.ptr, b.ld, not b.col_major, self._vec(b, sb),
                             a.ptr, a.ld, not a.col_major, self._vec(a, sa), c.ptr, c.ld, self._vec(c, sc), self.alpha,
                             self.beta, batch=self.batch, batch_a=sb, batch_b=sa, batch_c=sc)


@dataclass(frozen=True)
class KernelProblem:
    """Arguments of the launch contract (kernels/common.cuh), C row-major (``c_col``: column-major,
    only in the transposed problem of a rung that reads A from registers, core/packing.py)."""

    M: int
    N: int
    K: int
    a_ptr: int
    lda: int
    a_col: bool
    vec_a: bool
    b_ptr: int
    ldb: int
    b_col: bool
    vec_b: bool
    c_ptr: int
    ldc: int
    vec_c: bool
    alpha: float
    beta: float
    c_col: bool = False
    batch: int = 1        # problems in the launch (GemmProblem.batch) and each operand's batch stride
    batch_a: int = 0
    batch_b: int = 0
    batch_c: int = 0

    def transposed(self) -> "KernelProblem":
        """The same product as C^T = B^T A^T: N x M, the operands swapped and each in the other
        layout (the same memory), C in the other layout."""
        return replace(self, M=self.N, N=self.M, a_ptr=self.b_ptr, lda=self.ldb, a_col=not self.b_col, vec_a=self.vec_b,
                       b_ptr=self.a_ptr, ldb=self.lda, b_col=not self.a_col, vec_b=self.vec_a, c_col=not self.c_col,
                       batch_a=self.batch_b, batch_b=self.batch_a)


def check_placement(name: str, device: int, lib: str, ref: str, ref_device: int, ref_lib: str) -> None:
    """ValueError when array ``name`` is not on the device of ``ref`` (another array of the call), TypeError
    when it is of another array library (a ``__cuda_array_interface__`` array goes with either)."""
    if device != ref_device:
        raise ValueError(f"{name} is on device {device} but {ref} is on device {ref_device}; all must be on one device")
    if ref_lib != "cai" and lib not in (ref_lib, "cai"):
        raise TypeError(f"{name} is a {lib} array but {ref} is a {ref_lib} array; pass one library's arrays")


def _check_scalar(name: str, v) -> float:
    if isinstance(v, (bool, complex, str, bytes)):
        raise TypeError(f"{name} must be a real number, got {type(v).__name__}")
    try:
        f = float(v)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number, got {v!r}") from exc
    return f


def overlaps(x: ArrayInfo, y: ArrayInfo) -> bool:
    if x.span_elements == 0 or y.span_elements == 0:
        return False
    x0, x1 = x.ptr, x.ptr + x.span_elements * x.itemsize
    y0, y1 = y.ptr, y.ptr + y.span_elements * y.itemsize
    return x0 < y1 and y0 < x1


def check_output_dtype(dtype: str, out: str, name: str = "c") -> None:
    """An output of ``out`` from ``dtype`` operands: any of fp32, fp16 and bf16 from 16-bit and FP8
    operands (their products are summed in FP32 and rounded once to the output's type), fp32 only
    from fp32 operands, never FP8 (TypeError naming the problem otherwise). Which rungs write it is
    the dispatch's."""
    if dtype == "fp32" and out != "fp32":
        raise TypeError(f"{name} is {out} but a and b are fp32; float32 operands write a float32 result only")
    if out == "fp8":
        raise TypeError(f"{name} is fp8; gemmlab writes results in float32, float16 or bfloat16 "
                        f"(FP8 operands: pass a {name} of one of those, or out_dtype=)")


def make_problem(a, b, c, alpha=1.0, beta=0.0) -> GemmProblem:
    """Validate a, b, c and build the problem; every error names what is wrong."""
    return problem_of(describe_array("a", a), describe_array("b", b), describe_array("c", c), alpha, beta)


def problem_of(ai: ArrayInfo, bi: ArrayInfo, ci: ArrayInfo, alpha=1.0, beta=0.0) -> GemmProblem:
    """``make_problem`` of arrays already described (core/scaled.py describes CuPy's FP8 bytes)."""
    if ai.dtype != bi.dtype:
        raise TypeError(f"mixed dtypes: a is {ai.dtype}, b is {bi.dtype}, c is {ci.dtype}; a and b must match")
    check_output_dtype(ai.dtype, ci.dtype, "c")
    devs = {ai.device, bi.device, ci.device}
    if len(devs) != 1:
        raise ValueError(f"arrays on different devices: a on cuda:{ai.device}, b on cuda:{bi.device}, c on cuda:{ci.device}")
    M, K = ai.rows, ai.cols
    if bi.rows != K:
        raise ValueError(f"shape mismatch: a is {M}x{K} but b is {bi.rows}x{bi.cols}; a.shape[1] must equal b.shape[0]")
    N = bi.cols
    if (ci.rows, ci.cols) != (M, N):
        raise ValueError(f"shape mismatch: c is {ci.rows}x{ci.cols} but a @ b is {M}x{N}")
    for name, other in (("a", ai), ("b", bi)):
        if overlaps(ci, other):
            raise ValueError(f"c overlaps {name} in memory; the output must not alias an input")
    for name, x in (("a", ai), ("b", bi), ("c", ci)):
        if x.ld >= 2**31:
            raise ValueError(f"{name} has leading dimension {x.ld}; the kernels take it as a 32-bit int")
    if max(M, N, K) >= 2**31:
        raise ValueError(f"dimensions {M}x{N}x{K} exceed the 32-bit range of the kernels")
    return GemmProblem(M, N, K, ai.dtype, ai, bi, ci, _check_scalar("alpha", alpha), _check_scalar("beta", beta))
