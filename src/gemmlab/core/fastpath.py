"""gemmlab.gemm's fast path: a call that looks like one made before reuses that call's plan.

A call's signature is, per operand, (shape, strides, dtype, device, 16-byte alignment of the
base), plus the kernel name, the configuration and the precision: everything the full path's validation, dispatch
and variant choice depend on. A hit skips all of them (no ``describe_array``, no dispatch, no
``Variant``, no new parameter block) and launches the remembered plan on the new pointers.
What the signature does not fix is checked on every call: C must not overlap A or B (the
pointers), and alpha/beta must be plain Python numbers; anything else takes the full path, which
validates everything and raises the clear errors. The full path's plan is then remembered.

Only CuPy arrays and PyTorch tensors take the fast path (their attributes are cheap to read);
a bare ``__cuda_array_interface__`` object always takes the full path, which honours the stream
it names.
"""

from __future__ import annotations

from .launch import Plan
from .problem import GemmProblem

CAPACITY = 1024   # remembered signatures; past it the oldest is forgotten


def _cupy_signature(x):
    data = x.data
    ptr = data.ptr
    return (x.shape, x.strides, x.dtype, data.device_id, not ptr & 15), ptr


def _torch_signature(x):
    ptr = x.data_ptr()
    return (x.shape, x.stride(), x.dtype, x.get_device(), not ptr & 15), ptr


# The same facts for three operands of one library in one flat tuple: gemm's every call reads
# them, and one function building one tuple saves the three calls and three nested tuples of
# the per-operand signatures (the probe on the H100 host: about a third of the call's host time
# went to the three signatures).
def _cupy_call(a, b, c):
    da, db, dc = a.data, b.data, c.data
    pa, pb, pc = da.ptr, db.ptr, dc.ptr
    return ((a.shape, a.strides, a.dtype, da.device_id, not pa & 15, b.shape, b.strides, b.dtype, db.device_id,
             not pb & 15, c.shape, c.strides, c.dtype, dc.device_id, not pc & 15), pa, pb, pc)


def _torch_call(a, b, c):
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    return ((a.shape, a.stride(), a.dtype, a.get_device(), not pa & 15, b.shape, b.stride(), b.dtype,
             b.get_device(), not pb & 15, c.shape, c.stride(), c.dtype, c.get_device(), not pc & 15), pa, pb, pc)


_SIGNATURE_OF_LIB = {"cupy": _cupy_signature, "torch": _torch_signature}
_CALL_OF_LIB = {"cupy": _cupy_call, "torch": _torch_call}
_signature_of_type: dict[type, object] = {}   # filled as the full path meets each array type
_lib_of_type: dict[type, str] = {}
_call_of_types: dict[tuple, object] = {}      # (type a, type b, type c) -> the call's flat signature


def _generic_call(a, b, c):
    """Operands of different libraries (never launched, but refused by the full path): per operand."""
    (ka, pa), (kb, pb), (kc, pc) = (_signature_of_type[type(x)](x) for x in (a, b, c))
    return (ka + kb + kc, pa, pb, pc)


class _Entry:
    """A remembered plan and what a hit checks: the operands' byte spans (for the overlap test;
    the bias's, of a fused call; an auxiliary output spans C's bytes) and whether the kernel
    computes C^T = B^T A^T (a column-major C swaps A and B)."""

    __slots__ = ("plan", "swap", "span_a", "span_b", "span_c", "span_bias")

    def __init__(self, plan: Plan, problem: GemmProblem, span_bias: int = 0):
        self.plan = plan
        self.swap = problem.c.col_major
        self.span_a, self.span_b, self.span_c = (x.span_elements * x.itemsize for x in (problem.a, problem.b, problem.c))
        self.span_bias = span_bias


def _overlap(p: int, span: int, q: int, span_q: int) -> bool:
    return p < q + span_q and q < p + span


_entries: dict[tuple, _Entry] = {}


def _config_key(config):
    if config is None or config.__class__ is str or isinstance(config, str):   # the common cases first
        return config
    if isinstance(config, dict):
        return tuple(sorted(config.items()))
    if isinstance(config, (list, tuple)) and all(isinstance(c, str) for c in config):
        return tuple(config)
    raise TypeError   # not cacheable: the full path handles (and checks) it


def operand_key(x):
    """The signature part of one operand, or None when it has none (an unseen type)."""
    sig = _signature_of_type.get(type(x))
    return None if sig is None else sig(x)[0]


def _call_function(types):
    """The flat-signature function for operands of these three types (KeyError: a type unseen)."""
    libs = {_lib_of_type[t] for t in types}
    fn = _CALL_OF_LIB[libs.pop()] if len(libs) == 1 else _generic_call
    _call_of_types[types] = fn
    return fn


def signature(a, b, c, kernel, config, precision=None):
    """(key, (a_ptr, b_ptr, c_ptr)) of a call, or None when the call cannot take the fast path."""
    try:
        types = (type(a), type(b), type(c))
        fn = _call_of_types.get(types) or _call_function(types)
        flat, pa, pb, pc = fn(a, b, c)
        key = (flat, kernel, _config_key(config), precision)
        hash(key)
    except (KeyError, TypeError, AttributeError):
        return None
    return key, (pa, pb, pc)


def _fire(entry: _Entry, pa: int, pb: int, pc: int, alpha, beta) -> bool:
    """The plan's launch on the user's pointers, in the kernel's order."""
    if entry.swap:
        return entry.plan.launch(pb, pa, pc, alpha, beta)
    return entry.plan.launch(pa, pb, pc, alpha, beta)


def run(a, b, c, kernel, config, precision, alpha, beta) -> bool:
    """gemm's fast path: the call's signature, its remembered plan, what a hit checks on every
    call, and the launch, in one function (each Python call and tuple on this path costs a
    measurable fraction of a microsecond). False, launching nothing, when there is no plan or the
    call needs the full path."""
    try:
        flat, pa, pb, pc = _call_of_types[type(a), type(b), type(c)](a, b, c)
        entry = _entries.get((flat, kernel, _config_key(config), precision))
    except (KeyError, TypeError, AttributeError):
        return False
    if entry is None or (alpha.__class__ is not float and alpha.__class__ is not int) or \
            (beta.__class__ is not float and beta.__class__ is not int):
        return False   # not seen, or bool, NumPy scalars, strings...: the full path converts or refuses them
    end_c = pc + entry.span_c
    if (pc < pa + entry.span_a and pa < end_c) or (pc < pb + entry.span_b and pb < end_c):
        return False   # C aliases an input: the full path raises
    # _fire, inline: this is every call's path
    if entry.swap:
        return entry.plan.launch(pb, pa, pc, alpha, beta)
    return entry.plan.launch(pa, pb, pc, alpha, beta)


def run_fused(a, b, c, bias, activation, kernel, config, precision, alpha, beta, aux=None) -> bool:
    """``run`` for a call with a fused epilogue: the signature also holds the activation and the
    bias's and the auxiliary output's (shape, strides, dtype, device, alignment), and a hit checks
    that neither the bias nor the auxiliary output overlaps C, nor the auxiliary output an input."""
    try:
        flat, pa, pb, pc = _call_of_types[type(a), type(b), type(c)](a, b, c)
        bkey, pbias = _signature_of_type[type(bias)](bias) if bias is not None else (None, 0)
        xkey, paux = _signature_of_type[type(aux)](aux) if aux is not None else (None, 0)
        entry = _entries.get((flat, kernel, _config_key(config), precision, activation, bkey, xkey))
    except (KeyError, TypeError, AttributeError):
        return False
    if entry is None or (alpha.__class__ is not float and alpha.__class__ is not int) or \
            (beta.__class__ is not float and beta.__class__ is not int):
        return False
    end_c = pc + entry.span_c
    if (pc < pa + entry.span_a and pa < end_c) or (pc < pb + entry.span_b and pb < end_c) or \
            (bias is not None and pc < pbias + entry.span_bias and pbias < end_c):
        return False
    if aux is not None and (_overlap(paux, entry.span_c, pa, entry.span_a) or _overlap(paux, entry.span_c, pb, entry.span_b)
                            or _overlap(paux, entry.span_c, pc, entry.span_c)
                            or (bias is not None and _overlap(paux, entry.span_c, pbias, entry.span_bias))):
        return False
    if entry.swap:
        return entry.plan.launch(pb, pa, pc, alpha, beta, None, pbias, paux)
    return entry.plan.launch(pa, pb, pc, alpha, beta, None, pbias, paux)


def register(x, lib: str) -> None:
    """Give arrays of ``type(x)`` a signature (``lib``: its library, as describe_array says)."""
    sig = _SIGNATURE_OF_LIB.get(lib)
    if sig is not None:
        _signature_of_type.setdefault(type(x), sig)
        _lib_of_type.setdefault(type(x), lib)


def remember(arrays, kernel, config, plan: Plan, problem: GemmProblem, precision=None, fused=None) -> None:
    """Remember the full path's plan for this call's signature (registering the array types
    first, so the very first call of a type is remembered too). ``fused``: (activation, bias, aux)
    of a call with a fused epilogue (``run_fused`` looks it up), None for a plain call."""
    for x, info in zip(arrays, (problem.a, problem.b, problem.c)):
        register(x, info.lib)
    call = signature(*arrays, kernel, config, precision)
    if call is None:
        return
    key, span_bias = call[0], 0
    if fused is not None:
        activation, bias, aux = fused
        keys = []
        for x in (bias, aux):
            if x is None:
                keys.append(None)
                continue
            register(x, problem.c.lib)
            sig = _signature_of_type.get(type(x))
            if sig is None:
                return
            keys.append(sig(x)[0])
        if bias is not None:
            span_bias = bias.shape[0] * bias.itemsize
        key = key + (activation, *keys)
    if len(_entries) >= CAPACITY:   # forget the oldest (another thread may be doing the same)
        _entries.pop(next(iter(_entries), None), None)
    _entries[key] = _Entry(plan, problem, span_bias)


# ---- matmul: a @ b into a new array -----------------------------------------------------------
_POINTER_OF_LIB = {"cupy": lambda x: x.data.ptr, "torch": lambda x: x.data_ptr()}
_products: dict[tuple, tuple] = {}   # (a key, b key, kernel, config, precision) -> (allocate, pointer_of, entry)


def product(a, b, kernel, config, precision=None, out_dtype=None):
    """a @ b in a new array (of ``out_dtype``, a dtype name; None: the operands') through a
    remembered product (allocation, then the plan's launch), or None when there is none: the full
    path then runs."""
    try:
        (ka, pa), (kb, pb) = _signature_of_type[type(a)](a), _signature_of_type[type(b)](b)
        hit = _products.get((ka, kb, kernel, _config_key(config), precision, out_dtype))
    except (KeyError, TypeError, AttributeError):
        return None
    if hit is None:
        return None
    allocate, pointer_of, entry = hit
    c = allocate()
    pc = pointer_of(c)
    if pc & 15:   # allocators hand out aligned blocks: never seen, but the plan assumes it
        return None
    return c if _fire(entry, pa, pb, pc, 1.0, 0.0) else None


def remember_product(a, b, c, kernel, config, allocate, lib: str, precision=None, out_dtype=None) -> None:
    """After the full path computed a @ b into ``c`` (made by ``allocate()``, of library
    ``lib``; of ``out_dtype`` where asked): remember the allocation and the plan that gemm
    remembered for (a, b, c)."""
    call = signature(a, b, c, kernel, config, precision)
    entry = _entries.get(call[0]) if call is not None else None
    if entry is None or lib not in _POINTER_OF_LIB:
        return
    key = (operand_key(a), operand_key(b), kernel, _config_key(config), precision, out_dtype)
    if len(_products) >= CAPACITY:
        _products.pop(next(iter(_products), None), None)
    _products[key] = (allocate, _POINTER_OF_LIB[lib], entry)


def forget() -> None:
    """Drop every remembered plan (tests; a process that wants its memory back)."""
    _entries.clear()
    _products.clear()
