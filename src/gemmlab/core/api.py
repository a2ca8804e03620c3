"""Public API: ``gemm`` (in place, BLAS semantics) and ``matmul`` (returns a new array)."""

from __future__ import annotations

import logging
from dataclasses import replace
import threading
from collections import OrderedDict

from . import autotune, batched, dispatch, epilogue as _epilogue, fastpath, rules, textures, workspace
from .deps import require
from .driver import device_info
from .launch import Plan, current_stream, stream_capturing
from .dtypes import get as get_dtype
from .problem import array_facts, check_output_dtype, overlaps, describe_array, make_problem

log = logging.getLogger("gemmlab")


def _scale_in_place(c, beta: float) -> None:
    """c <- beta * c without a kernel (used when K == 0); beta == 0 writes zeros (NaN never leaks)."""
    if not hasattr(c, "mul_"):  # CuPy, or any __cuda_array_interface__ array through a CuPy view
        c = require("cupy").asarray(c)
    if beta == 0.0:
        c.fill_(0) if hasattr(c, "fill_") else c.fill(0)
    elif beta != 1.0:
        c.mul_(beta) if hasattr(c, "mul_") else c.__imul__(beta)


def _epilogue_in_place(c, beta: float, bias, activation, aux=None) -> None:
    """c <- act(beta * c + bias) without a product (K == 0): the epilogue alone, computed by c's
    array library in float64 with the verification's formulas (core/epilogue.py, reference) and
    rounded once to c's type, the pre-activation into ``aux`` where given; beta == 0 reads nothing
    of c (NaN never leaks)."""
    torch_c = hasattr(c, "mul_")
    xp = require("torch") if torch_c else require("cupy")
    if not torch_c:
        c = xp.asarray(c)
    wide = (lambda x: x.double()) if torch_c else (lambda x: xp.asarray(x).astype(xp.float64))
    x = wide(c) * beta if beta != 0.0 else xp.zeros_like(c, dtype=xp.float64)
    if bias is not None:
        x = x + wide(bias)
    if aux is not None:
        if torch_c:
            aux.copy_(x)
        else:
            xp.asarray(aux)[...] = x.astype(c.dtype)
    x = _epilogue.reference(x, activation, xp)
    if torch_c:
        c.copy_(x)
    else:
        c[...] = x.astype(c.dtype)


def _device_for(problem, kernel):
    """The device's facts when ``auto`` chooses (a named rung is checked at launch)."""
    return device_info(problem.c.device) if kernel == "auto" else None


def _choose(problem, kernel, config, precision, operands) -> dispatch.Choice:
    """``dispatch.decide``'s choice, or with on-line tuning on (core/autotune.py) and ``auto``
    choosing, at a signature's first call, the fastest of its candidates measured on ``operands``."""
    device = _device_for(problem, kernel)
    st = autotune.settings()
    tune = autotune.tuner()
    if not st.enabled or tune is None or kernel != "auto" or config is not None \
            or dispatch.tuned_exactly(problem, device, precision):
        return dispatch.decide(problem, kernel, config, device, precision)
    kp = problem.kernel_view()
    key = (problem.dtype, precision, kp.M, kp.N, kp.K, kp.a_col, kp.b_col, device.name)
    if not autotune.claim(key):     # tuned in this process already (or by another thread now)
        return dispatch.decide(problem, kernel, config, device, precision)
    if stream_capturing(current_stream(problem.c.lib, problem.c.device), problem.c.device):
        autotune.release(key)
        choice = dispatch.decide(problem, kernel, config, device, precision)
        return dispatch.Choice(choice.rung, choice.config, choice.source,
                               choice.reason + "; not tuned on-line: the stream is capturing a CUDA graph", choice.entry)
    try:
        tuned = tune(problem, device, precision, operands, st)
    except Exception:
        autotune.release(key)       # measured nothing usable: the next call may try again
        raise
    return tuned if tuned is not None else dispatch.decide(problem, kernel, config, device, precision)


def _epilogue_of(problem, bias, activation):
    """(Epilogue, the bias's description or None) of a call, after checking bias and activation
    against the problem (core/epilogue.py; the errors name the problem)."""
    act = _epilogue.check_activation(activation)
    info = _epilogue.check_bias(bias, problem.N, problem.dtype, problem.c.device, problem.c.lib, problem.c.dtype)
    if info is not None and overlaps(info, problem.c):
        raise ValueError("bias overlaps c in memory; the output must not alias an input")
    return _epilogue.make(act, info, problem.dtype, problem.c.col_major, problem.out_dtype), info


def _ptr(info) -> int:
    return info.ptr if info is not None else 0


def _aux_of(problem, aux, activation, bias_info) -> int:
    """The auxiliary output's pointer (0 without one) after its checks (core/epilogue.py,
    check_aux): an output beside c, so it must not overlap c or any input (``bias_info``: the
    bias's description from ``_epilogue_of``, or None)."""
    info = _epilogue.check_aux(aux, activation, problem.c, problem.batch)
    if info is None:
        return 0
    inputs = [problem.a, problem.b, problem.c] + ([bias_info] if bias_info is not None else [])
    for name, x in zip(("a", "b", "c", "bias"), inputs):
        if overlaps(info, x):
            raise ValueError(f"aux overlaps {name} in memory; the outputs must not alias each other or an input")
    return info.ptr


def plan(a, b, c, *, alpha=1.0, beta=0.0, bias=None, activation: str | None = None, aux=None, kernel: str = "auto",
         config=None, precision: str | None = None) -> Plan:
    """A prepared launch of one rung on these operands; ``plan(...).run()`` launches it. Its repr
    (and ``.choice``) says which rung and configuration run, and why (``core.dispatch``);
    ``precision``, ``bias``, ``activation`` and ``aux`` as for ``gemm``. The plan holds a, b, c,
    the bias and aux (``.operands``) while you hold it: ``run()`` launches on them."""
    problem = make_problem(a, b, c, alpha, beta)
    epi, bias_info = _epilogue_of(problem, bias, activation)
    bias_ptr, aux_ptr = _ptr(bias_info), _aux_of(problem, aux, activation, bias_info)
    if aux is not None:
        epi = replace(epi, aux=True)
    if 0 in (problem.M, problem.N, problem.K):
        dispatch.decide(problem, kernel, config, _device_for(problem, kernel), precision)   # its refusals first
        raise ValueError(f"empty problem {problem.M}x{problem.N}x{problem.K}: nothing to launch")
    choice = _choose(problem, kernel, config, precision, (a, b, c))
    p = Plan(problem, choice.rung, choice.config, choice=choice, precision=precision, epilogue=epi, bias_ptr=bias_ptr,
             aux_ptr=aux_ptr)
    p.operands = (a, b, c) + tuple(x for x in (bias, aux) if x is not None)
    return p


def gemm(a, b, c, *, alpha=1.0, beta=0.0, bias=None, activation: str | None = None, aux=None, kernel: str = "auto",
         config=None, precision: str | None = None):
    """c <- act(alpha * (a @ b) + beta * c + bias), in place; returns c.

    a (M, K), b (K, N), c (M, N): CuPy arrays or PyTorch CUDA tensors, a and b of one dtype
    (float32, float16 or bfloat16), c of theirs or, with 16-bit operands, of float32 or the other
    16-bit type (an output dtype, ``matmul``'s ``out_dtype``), each row- or column-major. The
    kernel runs on the current stream of c's library. With beta == 0, c is not read. ``kernel`` is a rung slug (see
    ``gemmlab.kernels()``) or "auto"; ``config`` a preset name or dict of tile parameters.
    ``precision`` (``gemmlab.core.precision``): for float32 operands "fp32" (exact FP32 on the
    CUDA cores), "tf32" (TF32 tensor cores) or "3xtf32" (three TF32 products: FP32-accurate on
    the tensor cores); float16/bfloat16 take only their own (the default). None: the dtype's
    exact precision under "auto", a named rung's own default (tf32_mma: "tf32").
    ``bias``: None or a contiguous 1-D array of length N (one value per column of c) in the
    operands' dtype or float32, added before the activation; ``activation``: None, "relu",
    "gelu" (erf), "gelu_tanh" or "silu". Both run inside the GEMM's own stores (every rung
    fuses them; core/epilogue.py), in FP32, with one rounding to c's type (also an output dtype).
    ``aux``: None or an array like c (shape, dtype, strides) that receives the pre-activation
    alpha * (a @ b) + beta * c + bias from the same stores (the saved input of the activation's
    backward, as cuBLASLt's GELU_AUX epilogue); only with an activation, for one matrix product.
    A call whose operands match an earlier call's (shapes, strides, dtype, device, alignment),
    with the same kernel, config and precision, reuses that call's plan: microseconds of host time.
    What gemmlab remembers of a call holds no reference to a, b or c: their memory is freed when
    you drop them, as after ``torch.matmul``.
    """
    fused = bias is not None or activation is not None or aux is not None
    if (fastpath.run_fused(a, b, c, bias, activation, kernel, config, precision, alpha, beta, aux) if fused
            else fastpath.run(a, b, c, kernel, config, precision, alpha, beta)):
        return c
    problem = make_problem(a, b, c, alpha, beta)
    epi, bias_info = _epilogue_of(problem, bias, activation)
    bias_ptr, aux_ptr = _ptr(bias_info), _aux_of(problem, aux, activation, bias_info)
    if aux is not None:
        epi = replace(epi, aux=True)
    if 0 in (problem.M, problem.N, problem.K):
        dispatch.choose(problem, kernel, None, precision)   # rejects unknown names, dtypes and precisions first
        if problem.M and problem.N:
            if epi.plain:
                _scale_in_place(c, problem.beta)
            else:
                _epilogue_in_place(c, problem.beta, bias, activation, aux)
        return c
    choice = _choose(problem, kernel, config, precision, (a, b, c))
    plan = Plan(problem, choice.rung, choice.config, choice=choice, precision=precision, epilogue=epi,
                bias_ptr=bias_ptr, aux_ptr=aux_ptr)
    plan.run()
    fastpath.remember((a, b, c), kernel, config, plan, problem, precision,
                      (activation, bias, aux) if fused else None)
    return c


def _allocator(a, b, out_dtype: str | None = None):
    """(a function returning an uninitialized (M, N) result for a @ b in a's library, of
    ``out_dtype`` (None: the operands' dtype), that library) after checking the two operands (the
    errors name the problem). The function holds no reference to a or b."""
    ai, bi = describe_array("a", a), describe_array("b", b)
    if ai.dtype != bi.dtype:
        raise TypeError(f"mixed dtypes: a is {ai.dtype}, b is {bi.dtype}; both must match")
    if ai.cols != bi.rows:
        raise ValueError(f"shape mismatch: a is {ai.rows}x{ai.cols} but b is {bi.rows}x{bi.cols}; a.shape[1] must equal b.shape[0]")
    if out_dtype is not None:
        check_output_dtype(ai.dtype, out_dtype, "out_dtype")
    return empty_fn(ai.lib, out_dtype or ai.dtype, ai.device, (ai.rows, bi.cols)), ai.lib


def empty_fn(lib: str, dtype: str, device: int, shape: tuple):
    """A function returning an uninitialized array of ``shape`` in the library ``lib`` (TypeError
    for a bare ``__cuda_array_interface__`` operand: matmul then needs out=)."""
    if lib == "torch":
        torch = require("torch")
        tdtype, tdevice = getattr(torch, get_dtype(dtype).array_name), torch.device("cuda", device)
        return lambda: torch.empty(shape, dtype=tdtype, device=tdevice)
    if lib == "cupy":
        cupy = require("cupy")
        cdtype, current = get_dtype(dtype).array_name, cupy.cuda.runtime.getDevice

        def empty():
            if current() == device:
                return cupy.empty(shape, dtype=cdtype)
            with cupy.cuda.Device(device):
                return cupy.empty(shape, dtype=cdtype)
        return empty
    raise TypeError("matmul without out= needs CuPy or PyTorch inputs to allocate the result; pass out=")


def matmul(a, b, *, bias=None, activation: str | None = None, out_dtype=None, kernel: str = "auto", out=None,
           aux=None, config=None, precision: str | None = None):
    """act(a @ b + bias) as a new array of the inputs' library (or into ``out``); ``precision``,
    ``bias`` and ``activation`` as for ``gemm``. A call like an earlier one (shapes, strides,
    dtype, device, alignment, kernel, config, precision) allocates and launches without
    re-checking anything the earlier call checked.

    ``out_dtype``: the result's dtype where it is not the operands' (float32, float16 or bfloat16,
    as a name or the library's dtype; ``out``'s dtype where out is given, which it must then match):
    from float16 or bfloat16 operands any of the three, the FP32 sums rounded once to it in the
    GEMM's own stores (no second pass); float32 operands give float32 only. Every 16-bit rung
    writes it (``Rung.outputs``), so ``auto`` plans it as it plans the operands' own type.

    ``aux``: as for ``gemm``, an array like the result that receives the pre-activation (2-D
    operands only).

    Operands of three or more dimensions, (..., M, K) @ (..., K, N), multiply as ``torch.matmul``
    does: the batch dimensions broadcast, any strides (core/batched.py says how it runs)."""
    out_name = None if out_dtype is None else _epilogue.out_dtype_name(out_dtype)   # the common call: no lookup
    if aux is not None and (_ndim(a) > 2 or _ndim(b) > 2):
        raise ValueError("aux is written for a single matrix product; a batch does not take one")
    if _ndim(a) > 2 or _ndim(b) > 2:
        return _batched_matmul(a, b, bias, activation, kernel, out, config, precision, out_name)
    if out is not None and out_name is not None and describe_array("out", out).dtype != out_name:
        raise TypeError(f"out is {describe_array('out', out).dtype} but out_dtype is {out_name}; pass one or make "
                        f"them agree")
    if out is not None or bias is not None or activation is not None or aux is not None:
        if out is None:
            allocate, _ = _allocator(a, b, out_name)
            out = allocate()
        return gemm(a, b, out, alpha=1.0, beta=0.0, bias=bias, activation=activation, aux=aux, kernel=kernel,
                    config=config, precision=precision)
    c = fastpath.product(a, b, kernel, config, precision, out_name)
    if c is not None:
        return c
    allocate, lib = _allocator(a, b, out_name)
    c = gemm(a, b, allocate(), alpha=1.0, beta=0.0, kernel=kernel, config=config, precision=precision)
    fastpath.remember_product(a, b, c, kernel, config, allocate, lib, precision, out_name)
    return c


def _ndim(x) -> int:
    shape = getattr(x, "shape", None)
    if shape is None:
        shape = getattr(x, "__cuda_array_interface__", {}).get("shape", ())
    return len(shape)


_warned: set = set()


def _warn_per_element(lay, dtype: str) -> None:
    """Say once per batch shape that it runs a launch per element (logger ``gemmlab``, WARNING): far
    slower than torch.bmm on batches of small problems."""
    key = (lay.batch, lay.M, lay.N, lay.K, dtype)
    if key not in _warned:
        _warned.add(key)
        log.warning("batched matmul %s x %dx%dx%d %s runs one GEMM launch per batch element (%d launches): the "
                    "batch does not fold into M, and no rung runs it in one launch (batch dimensions that do not "
                    "flatten into one stride, or a kernel, precision or GPU that no batched rung serves)",
                    "x".join(map(str, lay.batch)), lay.M, lay.N, lay.K, dtype, lay.count)


_BATCH_PLANS: "OrderedDict[tuple, object]" = OrderedDict()   # the one-launch plans by call signature
_BATCH_PLANS_KEPT = 64
_batch_lock = threading.Lock()


def batch_plans() -> list:
    """The plans the one-launch batched path keeps, the most recently made or used last (``repr``
    says what each runs and why): what ``matmul`` ran a batch with."""
    with _batch_lock:
        return list(_BATCH_PLANS.values())


def _one_launch(fa, fb, fc, lay, bias, activation, kernel, config, precision) -> bool:
    """The batch in one launch of a rung that walks batch x tiles (core/batched.py, one_problem;
    rules.batched_choice), through a plan kept per call signature (shapes, strides, dtype, device,
    the bases' 16-byte alignment, epilogue, kernel, config, precision), so that a repeated call costs
    a dict lookup and a launch on its own pointers. False, launching nothing, where no such rung
    serves the call or the batch dimensions do not flatten."""
    bias_facts = None if bias is None else array_facts("bias", bias)
    key = (fa.shape, fa.strides, fb.shape, fb.strides, fc.shape, fc.strides, fa.dtype, fc.dtype, fa.device,
           not fa.ptr & 15, not fb.ptr & 15, not fc.ptr & 15, activation,
           None if bias_facts is None else (bias_facts.shape, bias_facts.strides, bias_facts.dtype, not bias_facts.ptr & 15),
           kernel, repr(config), precision)
    with _batch_lock:
        plan = _BATCH_PLANS.get(key)
        if plan is not None:
            _BATCH_PLANS.move_to_end(key)
    if plan is None:
        problem = batched.one_problem(lay, fa, fb, fc)
        if problem is None:
            return False
        choice = rules.batched_choice(problem, kernel, config, device_info(problem.c.device), precision)
        if choice is None:
            return False
        epi, _ = _epilogue_of(problem, bias, activation)
        plan = Plan(problem, choice.rung, choice.config, choice=choice, precision=precision, epilogue=epi,
                    bias_ptr=0)
        with _batch_lock:
            _BATCH_PLANS[key] = plan
            while len(_BATCH_PLANS) > _BATCH_PLANS_KEPT:
                _BATCH_PLANS.popitem(last=False)
    else:   # what the key does not hold: where the arrays lie
        batched.check_output(lay, fa, fb, fc, bias_facts)
        if bias_facts is not None and bias_facts.device != fa.device:
            raise ValueError(f"bias is on device {bias_facts.device} but a is on device {fa.device}; all must be on "
                             f"one device")
    bias_ptr = 0 if bias_facts is None else bias_facts.ptr
    # the kernel's view: a column-major result is computed transposed, a and b trade places
    if plan.problem.c.col_major:
        plan.launch(fb.ptr, fa.ptr, fc.ptr, 1.0, 0.0, None, bias_ptr)
    else:
        plan.launch(fa.ptr, fb.ptr, fc.ptr, 1.0, 0.0, None, bias_ptr)
    return True


def _batched_matmul(a, b, bias, activation, kernel, out, config, precision, out_dtype=None):
    """``matmul`` of operands with batch dimensions (core/batched.py): one folded 2-D GEMM where the
    batch folds into M, else one launch of a rung that walks batch x tiles (``_one_launch``), else
    one 2-D GEMM per batch element through a plan per alignment class."""
    fa, fb = array_facts("a", a), array_facts("b", b)
    lay = batched.layout(fa, fb)
    shape = lay.batch + (lay.M, lay.N)
    if out_dtype is not None:
        check_output_dtype(fa.dtype, out_dtype, "out_dtype")
    if out is None:
        out = empty_fn(fa.lib, out_dtype or fa.dtype, fa.device, shape)()
    fc = array_facts("out", out)
    if fc.shape != shape:
        raise ValueError(f"out has shape {fc.shape} but a @ b is {shape}")
    if out_dtype is not None and fc.dtype != out_dtype:
        raise TypeError(f"out is {fc.dtype} but out_dtype is {out_dtype}; pass one or make them agree")
    check_output_dtype(fa.dtype, fc.dtype, "out")
    if fc.device != fa.device:
        raise ValueError(f"out is on device {fc.device} but a is on device {fa.device}; all must be on one device")
    if lay.count == 0 or lay.M == 0 or lay.N == 0:
        return out
    if lay.folds and batched.output_folds(fc, lay) and hasattr(a, "reshape") and hasattr(out, "reshape"):
        # views, not copies: the strides chain (batched.layout, output_folds)
        b2 = b[(0,) * (len(fb.shape) - 2)] if len(fb.shape) > 2 else b
        gemm(a.reshape(lay.count * lay.M, lay.K), b2, out.reshape(lay.count * lay.M, lay.N), bias=bias,
             activation=activation, kernel=kernel, config=config, precision=precision)
        return out
    if lay.K == 0:   # a @ b of no k: zeros, or act(bias)
        if bias is None and activation is None:
            _scale_in_place(out, 0.0)
        else:
            batched.check_output(lay, fa, fb, fc, None if bias is None else array_facts("bias", bias))
            _epilogue.check_activation(activation)
            if bias is not None:
                _epilogue.check_bias(bias, lay.N, fa.dtype, fa.device, fc.lib)
            _epilogue_in_place(out, 0.0, bias, activation)
        return out
    if lay.K and lay.count > 1 and _one_launch(fa, fb, fc, lay, bias, activation, kernel, config, precision):
        return out
    # one plan per alignment class, made from the class's first element; every element then launches
    # on its own pointers (kernel view order: a column-major out swaps a and b)
    _warn_per_element(lay, fa.dtype)
    problems = batched.problems(lay, fa, fb, fc, 1.0, 0.0)
    first = next(problems)
    epi, bias_info = _epilogue_of(first, bias, activation)
    bias_ptr = _ptr(bias_info)
    plans: dict = {}
    swap = first.c.col_major
    itemsize, c_size = first.a.itemsize, first.c.itemsize
    ld_ok = (first.a.ld % (16 // itemsize) == 0, first.b.ld % (16 // itemsize) == 0,
             first.c.ld % (16 // c_size) == 0)
    sc = batched.batch_strides(fc, lay.batch)
    a0, b0, c0 = first.a.ptr, first.b.ptr, first.c.ptr
    for oa, ob, oc in zip(batched.offsets(lay.a_strides, lay.batch), batched.offsets(lay.b_strides, lay.batch),
                          batched.offsets(sc, lay.batch)):
        pa, pb, pc = a0 + oa * itemsize, b0 + ob * itemsize, c0 + oc * c_size
        key = (ld_ok[0] and not pa & 15, ld_ok[1] and not pb & 15, ld_ok[2] and not pc & 15)
        plan = plans.get(key)
        if plan is None:
            problem = batched.element(first, pa, pb, pc)
            choice = dispatch.decide(problem, kernel, config, _device_for(problem, kernel), precision)
            plan = plans[key] = Plan(problem, choice.rung, choice.config, choice=choice, precision=precision,
                                     epilogue=epi, bias_ptr=bias_ptr)
        if not (plan.launch(pb, pa, pc, 1.0, 0.0, None, bias_ptr) if swap else
                plan.launch(pa, pb, pc, 1.0, 0.0, None, bias_ptr)):
            problem = batched.element(first, pa, pb, pc)   # a texture rung whose extent changed: a plan of its own
            Plan(problem, plan.rung, plan.choice.config, choice=plan.choice, precision=precision, epilogue=epi,
                 bias_ptr=bias_ptr).run()
    return out


def empty_cache() -> None:
    """Return the device memory gemmlab keeps between calls (the workspaces of split-K, stream-K and
    operand copies, ``core.workspace``) to the device, and destroy the texture objects no kernel
    reads, as ``torch.cuda.empty_cache()`` does for PyTorch's cache: it waits for the work on the
    devices gemmlab used. Not while a stream captures a CUDA graph (RuntimeError)."""
    workspace.empty()
    with textures.LOCK:
        textures.retire_all()


def memory_reserved(device: int | None = None) -> int:
    """Bytes of device memory gemmlab's workspace pool holds now on ``device`` (None: on every
    device), in use by calls in flight or kept for the next ones; at most ``workspace_limit()``
    once the device has synchronized and no call is running, 0 after ``empty_cache()``."""
    devices = workspace.devices() if device is None else [device]
    return sum(workspace.reserved(d) for d in devices)


def workspace_limit() -> int:
    """The bytes gemmlab keeps between calls on each device (``GEMMLAB_WORKSPACE_LIMIT``, default
    256 MiB): more is returned to the device at its next synchronization. A call that needs more
    still runs, holding the memory while it runs."""
    return workspace.limit()


def set_workspace_limit(nbytes: int) -> None:
    """Set ``workspace_limit()`` (bytes; 0 keeps nothing between calls)."""
    workspace.set_limit(nbytes)
