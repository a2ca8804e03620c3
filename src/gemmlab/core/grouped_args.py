"""What the grouped calls share (``gemmlab.grouped_mm`` and ``gemmlab.scaled_grouped_mm``, rungs 26
and 27): the group ints on the device (offsets or counts: given on the host and uploaded, or device
arrays), their checks, the output array, the kernel problem of group 0's views with the group
strides, the weights' group stride, and the checks that out aliases no input."""

from __future__ import annotations

from dataclasses import replace

from .deps import require
from .dtypes import get as get_dtype
from .launch import current_stream, stream_capturing
from .problem import ArrayFacts, array_facts, check_placement, info_2d, problem_of


def host_values(x):
    """The ints of host offsets (list, tuple, NumPy array, CPU tensor) as a list, or None for a
    device array."""
    if isinstance(x, (list, tuple)):
        return [int(v) for v in x]
    mod = type(x).__module__.split(".")[0]
    if mod == "numpy":
        if x.dtype.kind not in "iu":
            raise TypeError(f"offsets are {x.dtype}; they must be integers (int32)")
        return [int(v) for v in x.reshape(-1)]
    if mod == "torch" and not x.is_cuda:
        if x.dtype.is_floating_point or x.dtype.is_complex:
            raise TypeError(f"offsets are {x.dtype}; they must be integers (torch.int32)")
        return [int(v) for v in x.reshape(-1).tolist()]
    return None


def _upload(values: list, lib: str, device: int):
    """Host ints as an int32 array of ``lib`` on ``device`` (stream-ordered by the library)."""
    if lib == "torch":
        torch = require("torch")
        return torch.tensor(values, dtype=torch.int32, device=torch.device("cuda", device))
    if lib != "cupy":
        raise TypeError("host offsets are copied to the device by the operands' library (CuPy or PyTorch); with "
                        "other arrays pass them as a device int32 array")
    cupy = require("cupy")
    with cupy.cuda.Device(device):
        return cupy.asarray(values, dtype=cupy.int32)


def _readback(x, lib: str) -> list:
    if lib == "torch":
        return [int(v) for v in x.tolist()]
    return [int(v) for v in x.get().tolist()]


def device_ints(name: str, x, G: int, lib: str, device: int):
    """(array, pointer, host values or None) of a call's group ints: a device int32 array of G
    contiguous elements on the operands' device (TypeError / ValueError naming the problem), or host
    ints uploaded."""
    values = host_values(x)
    if values is not None:
        if len(values) != G:
            raise ValueError(f"{name} has {len(values)} entries; b has {G} groups")
        if any(not -2**31 <= v < 2**31 for v in values):
            raise ValueError(f"{name} holds values outside int32")
        arr = _upload(values, lib, device)
        return arr, int_facts(name, arr).ptr, values
    f = int_facts(name, x)
    if f.shape != (G,):
        raise ValueError(f"{name} has shape {f.shape}; it must be ({G},), one entry per group of b")
    if G > 1 and f.strides[0] != 1:
        raise ValueError(f"{name} has stride {f.strides[0]}; it must be contiguous")
    if f.device != device:
        raise ValueError(f"{name} is on device {f.device} but a is on device {device}; all must be on one device")
    return x, f.ptr, None


def int_facts(name: str, x) -> ArrayFacts:
    """The facts of a device int32 array (array_facts takes float arrays only)."""
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        if str(x.dtype) != "torch.int32":
            raise TypeError(f"{name} is {x.dtype}; it must be torch.int32")
        return ArrayFacts(x.data_ptr(), tuple(x.shape), tuple(x.stride()), "int32", x.device.index, "torch")
    if mod == "cupy":
        if x.dtype.name != "int32":
            raise TypeError(f"{name} is {x.dtype.name}; it must be int32")
        return ArrayFacts(x.data.ptr, tuple(x.shape), tuple(s // 4 for s in x.strides), "int32", x.device.id, "cupy")
    raise TypeError(f"{name} must be a CuPy or PyTorch int32 array on the device, or host ints; got "
                    f"{type(x).__module__}.{type(x).__name__}")


def check_offsets(values: list, T: int, name: str = "offs") -> None:
    prev = 0
    for g, v in enumerate(values):
        if v < prev:
            raise ValueError(f"{name}[{g}] = {v} is below {name}[{g - 1}] = {prev}" if g else
                             f"{name}[0] = {v} is negative")
        prev = v
    if values and values[-1] != T:
        raise ValueError(f"{name}[-1] = {values[-1]} but a has {T} rows; the last offset must equal the rows "
                         f"(the cumulative end of the last group)")


def check_counts(values: list, rows: int) -> None:
    for g, v in enumerate(values):
        if not 0 <= v <= rows:
            raise ValueError(f"counts[{g}] = {v} is outside 0..{rows} (a has {rows} rows per group)")


def _checked(name, arr, values, lib, device, check, checker) -> None:
    """Run ``checker`` on the group ints: the host values, or the device array read back unless a
    graph is being captured on the call's stream."""
    if not check:
        return
    if values is None:
        if stream_capturing(current_stream(lib, device), device):
            return
        values = _readback(arr, lib)
    checker(values)


def empty(lib: str, dtype: str, device: int, shape: tuple):
    from .api import empty_fn
    return empty_fn(lib, dtype, device, shape)()


def out_array(out, lib, dtype, device, shape, a_facts):
    """The call's out: a new row-major array, or ``out`` after its checks (shape, dtype, device,
    rows of unit stride: the kernel stores rows)."""
    if out is None:
        return empty(lib, dtype, device, shape), None
    fo = array_facts("out", out)
    if fo.shape != shape:
        raise ValueError(f"out has shape {fo.shape} but the grouped product is {shape}")
    if fo.dtype != dtype:
        raise TypeError(f"out is {fo.dtype} but the product is {dtype} (out_dtype); make them agree")
    if fo.device != device:
        raise ValueError(f"out is on device {fo.device} but a is on device {device}; all must be on one device")
    if shape[-1] > 1 and fo.strides[-1] != 1:
        raise ValueError(f"out has strides {fo.strides}; its rows must be contiguous (unit stride along the last "
                         f"dimension)")
    return out, fo


def prepared(name: str, ints, G: int, fa, out, out_name: str, shape: tuple, checker, check: bool):
    """A call's group ints on the device (the array, which the caller holds until its launch is
    enqueued: host ints uploaded are a new array that nothing else keeps, and an allocation before
    the launch could reuse its memory; and its pointer), its out (a new one where none is given) and
    out's facts, the ints checked by ``checker`` where ``check`` says (``_checked``)."""
    arr, ptr, values = device_ints(name, ints, G, fa.lib, fa.device)
    out, fo = out_array(out, fa.lib, out_name, fa.device, shape, fa)
    _checked(name, arr, values, fa.lib, fa.device, check, checker)
    return (arr, ptr), out, fo or array_facts("out", out)


def weights_stride(fb: ArrayFacts, G: int, K: int, N: int, itemsize: int) -> int:
    """B's group stride for its map: its own, or where it is not positive (one group, or expanded
    weights) the element's span, which is never walked past."""
    stride = fb.strides[0]
    if G == 1 or stride <= 0:
        if stride < 0 or (stride == 0 and G > 1):
            raise ValueError(f"b has group stride {stride}; each group's weights must lie at their own memory "
                             f"(pass b.contiguous())")
        inner_span = (K - 1) * abs(fb.strides[1]) + (N - 1) * abs(fb.strides[2]) + 1
        return -(-inner_span * itemsize // 16) * 16 // itemsize
    return stride


def kernel_problem(fa, a_shape, a_strides, fb, b_shape, b_strides, fo, out_shape, out_strides, out_dtype,
                    batch_strides):
    """The kernel's problem: A and B as these 2-D views of a and b (group 0's), C as this view of out
    (its rows contiguous: ``out_array``), with the group strides (B's or, over K, C's) as its batch
    strides, where 16-byte access needs whole vectors from group to group; FP8 operands keep their
    formats."""
    ai = info_2d("a", fa.ptr, a_shape, a_strides, fa.dtype, fa.device, fa.lib, fa.stream, fa.fmt)
    bi = info_2d("b", fb.ptr, b_shape, b_strides, fb.dtype, fb.device, fb.lib, fb.stream, fb.fmt)
    ci = info_2d("out", fo.ptr, out_shape, out_strides, out_dtype, fa.device, fa.lib)
    return replace(problem_of(ai, bi, ci), batch_strides=batch_strides)


def k_contiguous(a, fa: ArrayFacts):
    """The tokens ``a`` with K contiguous: as they are, or a row-major copy (one read and one write of
    them). A group's tiles start at its first row, any row, and a TMA box must start 16-byte
    aligned along the contiguous dimension: rows must not be it."""
    if fa.strides[-1] == 1 or fa.shape[-1] == 1 or fa.shape[-2] <= 1:
        return a, fa
    copy = a.contiguous() if fa.lib == "torch" else require("cupy").ascontiguousarray(a)
    return copy, array_facts("a", copy)


def done_without_launch(out, lib: str, empty: bool, no_k: bool) -> bool:
    """Whether a call is complete without a launch: an empty result, or, with nothing to sum over
    (``no_k``), one of zeros, written here."""
    if not empty and no_k:
        if lib == "torch":
            out.zero_()
        else:
            out.fill(0)
    return empty or no_k


def masked_dims(fa: ArrayFacts, fb: ArrayFacts) -> tuple[int, int, int, int]:
    """(G, M_max, K, N) of the masked form's a (G, M_max, K) and b (G, K, N), both 3-D: ValueError
    where their groups or K differ, or there are no groups."""
    (G, R, K), (G2, K2, N) = fa.shape, fb.shape
    if G2 != G or K2 != K:
        raise ValueError(f"shape mismatch: a is {fa.shape} and b is {fb.shape}")
    if G == 0:
        raise ValueError("a and b have no groups")
    return G, R, K, N


def group_bias(bias, G: int, N: int, fa: ArrayFacts, dtype: str, dtype_is: str) -> ArrayFacts | None:
    """The facts of a grouped call's ``bias`` (None: none): one row of N per group, (G, N) with
    contiguous rows one after another, of ``dtype`` (what ``dtype_is`` says it is) or float32, on
    a's device and of its library. Errors name the problem."""
    if bias is None:
        return None
    f = array_facts("bias", bias)
    if f.shape != (G, N):
        raise ValueError(f"bias has shape {f.shape}; the groups take one row of N per group, ({G}, {N})")
    if f.dtype not in (dtype, "fp32"):
        raise TypeError(f"bias is {f.dtype}; it must be {dtype} ({dtype_is}) or float32")
    if (N > 1 and f.strides[1] != 1) or (G > 1 and f.strides[0] != N):
        raise ValueError(f"bias has strides {f.strides}; its rows must be contiguous and follow one another "
                         f"(pass bias.contiguous())")
    check_placement("bias", f.device, f.lib, "a", fa.device, fa.lib)
    return f


def no_overlap(fa: ArrayFacts, fb: ArrayFacts, fo: ArrayFacts, bias_f: ArrayFacts | None = None) -> None:
    """out must not alias a, any group's weights or the bias (the kernel reads them while it writes)."""
    def span(f):
        itemsize = get_dtype(f.dtype).itemsize
        extent = sum((n - 1) * abs(s) for n, s in zip(f.shape, f.strides)) + 1
        return f.ptr, f.ptr + extent * itemsize
    o = span(fo)
    for name, f in (("a", fa), ("b", fb), ("bias", bias_f)):
        if f is None:
            continue
        lo, hi = span(f)
        if lo < o[1] and o[0] < hi:
            raise ValueError(f"out overlaps {name} in memory; the output must not alias an input")


def expected(expected_rows, R: int) -> int:
    """The masked form's rows per group for its rule: ``expected_rows`` (an int from 0 to M_max,
    TypeError / ValueError otherwise) or M_max where None."""
    if expected_rows is None:
        return R
    if isinstance(expected_rows, bool) or not isinstance(expected_rows, int):
        raise TypeError(f"expected_rows must be an int (the rows a group is expected to hold), got "
                        f"{type(expected_rows).__name__}")
    if not 0 <= expected_rows <= R:
        raise ValueError(f"expected_rows = {expected_rows} is outside 0..{R} (a has {R} rows per group)")
    return max(expected_rows, 1)


def masked_prepared(counts, G: int, R: int, N: int, fa: ArrayFacts, out, out_name: str, check: bool):
    """The masked form's counts on the device and its out (``prepared``'s), or with no counts
    (every group full) no ints and out alone."""
    if counts is None:
        out, fo = out_array(out, fa.lib, out_name, fa.device, (G, R, N), fa)
        return (None, 0), out, fo or array_facts("out", out)
    return prepared("counts", counts, G, fa, out, out_name, (G, R, N), lambda v: check_counts(v, R), check)


def check_runs(G: int, R: int, **arrays: ArrayFacts) -> None:
    """The masked form's arrays (G, R, ...) with their groups one after another: group stride R rows."""
    for name, f in arrays.items():
        if G > 1 and f.strides[0] != R * f.strides[1]:
            raise ValueError(f"{name} has strides {f.strides}: its groups must follow one another (group stride = "
                             f"{R} rows x the row stride); pass a contiguous array")
