"""``gemmlab.scaled_mm``: FP8 matrix products with scales, as ``torch._scaled_mm`` takes them.

    out = (scale_a * a) @ (scale_b * b) * scale_result + bias

a (M, K) and b (K, N) hold FP8 codes, e4m3 or e5m2 each (PyTorch's ``float8_e4m3fn`` and
``float8_e5m2``; CuPy, which has no FP8 dtype, passes ``uint8`` arrays of the codes and names their
formats with ``a_format=`` / ``b_format=``). The scales are float32 arrays on the device:

* tensor-wise: one value each (shape (), (1,) or (1, 1));
* row-wise: ``scale_a`` one per row of a (M, 1), ``scale_b`` one per column of b (1, N);
* block-wise (DeepSeek-V3's): ``scale_a`` (M, ceil(K/128)) one per 1x128 block of a, ``scale_b``
  (ceil(K/128), ceil(N/128)) one per 128x128 block of b, each in any layout (an M-contiguous
  ``scale_a``, DeepGEMM's, is read with the fewest transactions); they multiply each k block's sums
  as the kernel promotes them into FP32, so they take no ``use_fast_accum``.

They stay on the device (the kernel reads them: kernels/scales.cuh), so a call needs no host
synchronization and a CUDA graph captures it, except for the check that every scale is finite
(``check_finite``, on by default), which reads one flag back; it is skipped while the stream
captures a graph. The product runs on rung 25 (kernels/25_wgmma_fp8.cu; sm_90a): its partial sums
promoted into FP32 every 128 of K, or with ``use_fast_accum`` summed in the tensor cores over the
whole K (precision ``fp8_fast``); with M or N of at most 32 (decoding's products), on rung 28
(kernels/28_decode_fp8.cu), which streams the wide operand with K split over the SMs. Both read
K-major operands, a row-major a and a column-major b (``b = w.t()`` of a row-major (N, K) weight,
as torch requires); any other layout, or a leading dimension that is not a multiple of 16 bytes, is
copied first (the plan's repr says so: a read and a write of that operand).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from . import dispatch, epilogue as _epilogue
from .deps import require
from .driver import device_info
from .dtypes import FP8_FORMATS
from .launch import Plan, current_stream, stream_capturing
from .problem import ArrayInfo, array_facts, check_placement, describe_array, info_2d, overlaps, problem_of
from .registry import get as get_rung
from .rules import fp8_block_cluster, fp8_misaligned, fp8_one_warpgroup, fp8_wave_tile

SCALINGS = ("tensor", "row", "block")
RUNG = "wgmma_fp8"
BLOCK = 128        # block scales: 1 x BLOCK of a, BLOCK x BLOCK of b (DeepSeek-V3's)
PLAN_CACHE = 64   # plans kept per process (each holds pointers and shapes, never arrays)


@dataclass(frozen=True)
class Scales:
    """A call's scales after their checks: the scaling (a key of ``SCALINGS``) and the two device
    pointers the kernel reads (float32, contiguous)."""

    mode: str
    a_ptr: int
    b_ptr: int
    strides: tuple | None = None   # block scales: (scale_a's along M and K, scale_b's along K and N), elements


def fp8_facts(name: str, x, fmt: str | None, call: str = "scaled_mm"):
    """An FP8 operand's facts (any dimensions): a torch FP8 tensor (its format its dtype's; ``fmt``
    must agree or be None) or an array of uint8 codes of format ``fmt`` (default e4m3); ``call``
    names the function in the errors."""
    if fmt is not None and fmt not in FP8_FORMATS:
        raise ValueError(f"{name}_format must be one of {', '.join(FP8_FORMATS)}, got {fmt!r}")
    f = array_facts(name, x, fmt or "e4m3")
    if f.dtype != "fp8":
        raise TypeError(f"{name} is {f.dtype}; {call} multiplies FP8 operands: torch.float8_e4m3fn or "
                        f"torch.float8_e5m2, or uint8 arrays of FP8 codes with {name}_format= "
                        f"(gemmlab.quantize_fp8 makes them)")
    if fmt is not None and f.fmt != fmt:
        raise TypeError(f"{name} is {FP8_FORMATS[f.fmt]} but {name}_format is {fmt!r}")
    return f


def _fp8_operand(name: str, x, fmt: str | None) -> ArrayInfo:
    """A 2-D FP8 operand's description (``fp8_facts``)."""
    f = fp8_facts(name, x, fmt)
    if len(f.shape) != 2:
        raise ValueError(f"{name} must be 2-D, got {len(f.shape)}-D with shape {f.shape}")
    return info_2d(name, f.ptr, f.shape, f.strides, f.dtype, f.device, f.lib, f.stream, f.fmt)


def scale_facts(name: str, s, device: int, lib: str):
    if s is None:
        raise TypeError(f"{name} is None; scaled_mm needs both scales (float32 arrays on the device)")
    f = array_facts(name, s)
    if f.dtype != "fp32":
        raise TypeError(f"{name} is {f.dtype}; scales must be float32")
    check_placement(name, f.device, f.lib, "a", device, lib)
    return f


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _vector_ptr(name: str, f, n: int) -> int:
    """The pointer of a scale holding ``n`` values one element apart (ValueError otherwise)."""
    steps = [st for d, st in zip(f.shape, f.strides) if d != 1]
    if n > 1 and steps != [1]:
        raise ValueError(f"{name} must be contiguous (its {n} values one element apart), got strides {f.strides}; "
                         f"pass {name}.contiguous()")
    return f.ptr


def check_scales(scale_a, scale_b, M: int, N: int, K: int, device: int, lib: str) -> Scales:
    """The scaling of a call from its scales' shapes (errors name the scale and what it should be):
    both of one value (tensor-wise), scale_a (M, 1) and scale_b (1, N) (row-wise), or scale_a
    (M, ceil(K/128)) and scale_b (ceil(K/128), ceil(N/128)) in any layout (block-wise)."""
    fa = scale_facts("scale_a", scale_a, device, lib)
    fb = scale_facts("scale_b", scale_b, device, lib)
    na, nb = numel(fa.shape), numel(fb.shape)
    if len(fa.shape) > 2 or len(fb.shape) > 2:
        raise ValueError(f"scales are at most 2-D; got scale_a {fa.shape}, scale_b {fb.shape}")
    if na == 1 and nb == 1:
        return Scales("tensor", fa.ptr, fb.ptr)
    row_a = fa.shape in ((M, 1), (M,))
    row_b = fb.shape in ((1, N), (N,))
    if row_a and row_b:
        return Scales("row", _vector_ptr("scale_a", fa, M), _vector_ptr("scale_b", fb, N))
    kb, nb = -(-K // BLOCK), -(-N // BLOCK)
    if fa.shape == (M, kb) and fb.shape == (kb, nb):
        return Scales("block", fa.ptr, fb.ptr, tuple(fa.strides) + tuple(fb.strides))
    raise ValueError(
        f"scale_a {fa.shape} and scale_b {fb.shape} name no scaling of a {M}x{K} @ {K}x{N} product: pass one "
        f"value each (tensor-wise), scale_a ({M}, 1) and scale_b (1, {N}) (row-wise), or scale_a ({M}, {kb}) per "
        f"1x{BLOCK} block of a and scale_b ({kb}, {nb}) per {BLOCK}x{BLOCK} block of b (block-wise)")


def finite(x, lib: str) -> bool:
    if lib == "torch":
        return bool(require("torch").isfinite(x).all().item())
    cp = require("cupy")
    return bool(cp.isfinite(cp.asarray(x)).all().item())


def out_dtype_of(out_dtype, lib: str) -> str:
    if out_dtype is None:
        return "bf16" if lib == "torch" else "fp16"
    name = _epilogue.out_dtype_name(out_dtype)
    if name not in ("fp32", "fp16", "bf16"):
        raise TypeError(f"out_dtype {out_dtype!r}: scaled_mm writes float32, float16 or bfloat16")
    return name


def _empty(lib: str, M: int, N: int, dtype: str, device: int):
    if lib == "torch":
        torch = require("torch")
        dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
        return torch.empty((M, N), dtype=dt, device=f"cuda:{device}")
    cp = require("cupy")
    if dtype == "bf16":
        raise TypeError("CuPy has no bfloat16: pass out_dtype float16 or float32, or an out= array")
    with cp.cuda.Device(device):
        return cp.empty((M, N), dtype=cp.float16 if dtype == "fp16" else cp.float32)


_PLANS: OrderedDict = OrderedDict()
_LOCK = threading.Lock()


def plans() -> list:
    """The scaled plans kept, the most recently made or used last (``repr`` and ``choice`` say what
    each runs and why)."""
    with _LOCK:
        return list(_PLANS.values())


def _in_place_rows(kp) -> tuple[int, ...]:
    """Bytes per row of the FP8 operands rung 25 reads where they are: K-major (row-major A,
    column-major B) with 16-byte access; it reads copies of the others, whose rows are padded to
    32-byte multiples (core/packing.py)."""
    return tuple(ld for ld, k_major, vec in ((kp.lda, not kp.a_col, kp.vec_a), (kp.ldb, kp.b_col, kp.vec_b))
                 if k_major and vec)


def block_refusal(cfg: dict) -> str | None:
    """Why block scales cannot run on this (rung 25 or 27) configuration, or None: their mainloop
    part (kernels/mainloop.cuh, GlMainloopBlockScaled) reads the scales k block after k block, of one
    column block per tile, and in clusters of 2 holds two k tiles' partial sums beside the FP32 sums."""
    if cfg.get("KREV"):
        return "block scales are read k block after k block: KREV=1 (backward k tiles) does not apply"
    if cfg["BN"] > BLOCK:
        return (f"block scales take a tile within one column block of {BLOCK}: BN={cfg['BN']} spans more "
                f"(choose BN 64 or 128)")
    if cfg.get("DEFER") and cfg.get("CLUSTER") == 2:
        return ("block scales in clusters of 2 keep two k tiles' partial sums beside the FP32 sums: DEFER=1 "
                "(a held tile besides) does not fit the registers")
    return None


def _adjusted(choice, kp, scales: Scales, precision: str, sm_count: int):
    """The choice with what the rule decides for FP8 beyond the tile's registry defaults
    (core/rules.py): for operands whose rows are not 32-byte multiples, clusters of 2 (and
    promoted the 128x192 tile) from a wave on; else the tile of 128x64, 128x128, 128x192 (and with
    fast accumulation 128x256) whose whole waves take least time, but for block scales, whose tiles
    lie within one column block (a tuned configuration they cannot take falls back to the rule):
    their 128x128 tiles in clusters of 2 where whole waves favour them; and where M fits one
    consumer warpgroup, the other sitting every tile out."""
    if choice.rung.slug != RUNG:   # the thin rung (rung 28) has its own rule: core/decode.py
        return choice
    cfg_of = lambda c: c.rung.config(c.config, precision)   # noqa: E731
    block = scales.mode == "block"
    refused = block_refusal(cfg_of(choice)) if block else None
    if refused is not None:   # a tuned configuration the block-scaled build cannot take: the rule
        rule = dispatch.rule_config(choice.rung, kp.M, kp.N, kp.K, sm_count, precision)
        choice = replace(choice, config=rule[0], source="rule", reason=f"{rule[1]}; not the tuned tile: {refused}")
    if choice.source != "rule":
        return choice
    new = (fp8_misaligned(cfg_of(choice), kp.M, kp.N, _in_place_rows(kp), precision, block, sm_count)
           or (fp8_wave_tile(cfg_of(choice), kp.M, kp.N, sm_count, precision) if not block else None)
           or (fp8_block_cluster(cfg_of(choice), kp.M, kp.N, sm_count) if block else None))
    if new is not None:
        choice = replace(choice, config=new[0], reason=f"{choice.reason}; {new[1]}")
    skip = fp8_one_warpgroup(cfg_of(choice), kp.M)
    return choice if skip is None else replace(choice, config=skip[0], reason=f"{choice.reason}; {skip[1]}")


def _plan(problem, kp, scales: Scales, epi, kernel: str, config, precision: str, bias_ptr: int) -> Plan:
    """The plan of this call's signature (shapes, layouts, alignment classes, formats, scaling,
    output, bias, precision, kernel; ``kp`` the problem's kernel view), made once and remembered;
    each call passes its pointers."""
    key = (problem.M, problem.N, problem.K, kp.lda, kp.ldb, kp.ldc, kp.a_col, kp.b_col, kp.vec_a, kp.vec_b, kp.vec_c,
           problem.a.fmt, problem.b.fmt, problem.c.dtype, problem.c.device, epi, kernel, str(config), precision,
           scales.strides)
    with _LOCK:
        p = _PLANS.get(key)
        if p is not None:
            _PLANS.move_to_end(key)
            return p
    info = device_info(problem.c.device)
    choice = dispatch.decide(problem, kernel, config, info, precision)
    if config is None:   # a configuration given runs as given
        choice = _adjusted(choice, kp, scales, precision, info.sm_count)
    p = Plan(problem, choice.rung, choice.config, choice=choice, precision=precision, epilogue=epi, bias_ptr=bias_ptr,
             scale_ptrs=(scales.a_ptr, scales.b_ptr), scale_strides=scales.strides)
    with _LOCK:
        _PLANS[key] = p
        while len(_PLANS) > PLAN_CACHE:
            _PLANS.popitem(last=False)
    return p


# ---- the fast path: a call seen before ---------------------------------------------------------------
# The checks and descriptions of a call cost tens of microseconds of host time (more than the kernel of
# a small product). A PyTorch call that takes a fresh output, no scale_result and no finite check is
# remembered by what decides its plan, read cheaply from the tensors: dtype, shape, strides, device
# and each pointer's alignment class. Such a call again launches the remembered plan on its pointers.
# A fresh output aliases nothing, and every other check depends only on the signature.
_FAST: OrderedDict = OrderedDict()


def _sig(x) -> tuple | None:
    return None if x is None else (x.dtype, x.shape, x.stride(), x.data_ptr() & 15, x.device)


def _fast_key(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum, kernel, config, a_format, b_format):
    if type(a).__module__ != "torch" or type(b).__module__ != "torch" or isinstance(config, (dict, list)):
        return None
    return (_sig(a), _sig(b), _sig(scale_a), _sig(scale_b), _sig(bias), out_dtype, use_fast_accum, kernel, config,
            a_format, b_format)


def _fast_call(entry, a, b, scale_a, scale_b, bias):
    plan, shape, dtype = entry
    out = require("torch").empty(shape, dtype=dtype, device=a.device)
    plan.launch(a.data_ptr(), b.data_ptr(), out.data_ptr(), 1.0, 0.0, None, 0 if bias is None else bias.data_ptr(), 0,
                (scale_a.data_ptr(), scale_b.data_ptr()))
    return out


def scaled_mm(a, b, scale_a, scale_b, *, bias=None, out_dtype=None, scale_result=None, use_fast_accum: bool = False,
              out=None, a_format: str | None = None, b_format: str | None = None, check_finite: bool = True,
              kernel: str = "auto", config=None, return_plan: bool = False):
    """``(scale_a * a) @ (scale_b * b) * scale_result + bias`` of FP8 a (M, K) and b (K, N), returned in
    ``out_dtype`` (None: bfloat16 for PyTorch, float16 for CuPy; or float32), or written into ``out``
    (M, N, row-major). The module docstring gives the scales and layouts. ``bias``: (N,) of the output's
    dtype or float32. ``scale_result``: a float32 device scalar multiplying the result (folded into
    scale_a on the device). ``kernel``/``config``: ``"auto"`` (rung 28 where M or N is at most 32, else
    rung 25, each by its rule), ``"wgmma_fp8"`` or ``"decode_fp8"``, and a configuration.
    ``return_plan``: also return the plan (its repr says which tile ran and which operands were copied).
    Every check of shapes, dtypes and devices comes before anything runs on the GPU. A PyTorch call with
    a fresh output, no scale_result and ``check_finite=False`` is remembered: the same call again
    (dtypes, shapes, strides, alignment) launches its plan with a few microseconds of host time."""
    fast = None
    if out is None and scale_result is None and not check_finite and not return_plan:
        fast = _fast_key(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum, kernel, config, a_format, b_format)
        entry = _FAST.get(fast) if fast is not None else None
        if entry is not None:
            return _fast_call(entry, a, b, scale_a, scale_b, bias)
    out, plan = _scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype, scale_result=scale_result,
                           use_fast_accum=use_fast_accum, out=out, a_format=a_format, b_format=b_format,
                           check_finite=check_finite, kernel=kernel, config=config)
    if fast is not None:
        with _LOCK:
            _FAST[fast] = (plan, tuple(out.shape), out.dtype)
            while len(_FAST) > PLAN_CACHE:
                _FAST.popitem(last=False)
    return (out, plan) if return_plan else out


def _scaled_mm(a, b, scale_a, scale_b, *, bias, out_dtype, scale_result, use_fast_accum: bool, out, a_format, b_format,
               check_finite: bool, kernel: str, config):
    """``scaled_mm``'s call, every check made and every array described: (out, plan)."""
    ai = _fp8_operand("a", a, a_format)
    bi = _fp8_operand("b", b, b_format)
    if ai.device != bi.device:
        raise ValueError(f"a is on device {ai.device} but b is on device {bi.device}; all must be on one device")
    M, K, N = ai.rows, ai.cols, bi.cols
    if bi.rows != K:
        raise ValueError(f"shape mismatch: a is {M}x{K} but b is {bi.rows}x{bi.cols}; a.shape[1] must equal b.shape[0]")
    if min(M, N, K) < 1:
        raise ValueError(f"empty product {M}x{N}x{K}: scaled_mm needs M, N and K of at least 1")
    ordinal, lib = ai.device, ai.lib if ai.lib != "cai" else bi.lib
    scales = check_scales(scale_a, scale_b, M, N, K, ordinal, lib)
    if scales.mode == "block" and use_fast_accum:
        raise ValueError("block scales multiply each k block's sums as they are promoted into FP32: "
                         "use_fast_accum (no promotion) does not apply to them")
    if scales.mode == "block" and config is not None and get_rung(RUNG if kernel == "auto" else kernel).slug == RUNG:
        refused = block_refusal(get_rung(RUNG).config(config, "fp8"))
        if refused is not None:
            raise ValueError(refused)
    if scale_result is not None and numel(scale_facts("scale_result", scale_result, ordinal, lib).shape) != 1:
        raise ValueError(f"scale_result must hold one value, got shape {array_facts('scale_result', scale_result).shape}")
    want = out_dtype_of(out_dtype, lib) if out is None or out_dtype is not None else None
    ci = describe_array("out", out) if out is not None else None
    if ci is not None:
        _check_out(ci, M, N, want, ordinal)
    bias_info = _epilogue.check_bias(bias, N, "fp8", ordinal, lib, ci.dtype if ci is not None else want)
    if out is None:
        out = _empty(lib, M, N, want, ordinal)
        ci = describe_array("out", out)
    if bias_info is not None and overlaps(bias_info, ci):
        raise ValueError("bias overlaps out in memory; the output must not alias an input")
    if ci.col_major:   # a single row or column (_check_out): the same memory as a row-major one
        ci = info_2d("out", ci.ptr, (M, N), (max(N, 1), 1), ci.dtype, ci.device, ci.lib, ci.stream)
    stream = current_stream(lib if lib != "cai" else "cupy", ordinal)
    if check_finite and not stream_capturing(stream, ordinal):
        for name, x in (("scale_a", scale_a), ("scale_b", scale_b), ("scale_result", scale_result)):
            if x is not None and not finite(x, lib):
                raise ValueError(f"{name} holds a value that is not finite (inf or NaN); every scale must be finite")
    if scale_result is not None:   # folded into scale_a: a new array of its shape (the strides of a contiguous one)
        scale_a = scale_a * scale_result.reshape((1,) * len(scale_a.shape) or ())
        f = array_facts("scale_a", scale_a)
        scales = replace(scales, a_ptr=f.ptr, strides=None if scales.strides is None else
                         tuple(f.strides) + scales.strides[2:])
    problem = problem_of(ai, bi, ci)
    epi = replace(_epilogue.make(None, bias_info, "fp8", False, ci.dtype), scale=scales.mode)
    bias_ptr = bias_info.ptr if bias_info is not None else 0
    kp = problem.kernel_view()
    plan = _plan(problem, kp, scales, epi, kernel, config, "fp8_fast" if use_fast_accum else "fp8", bias_ptr)
    plan.launch(kp.a_ptr, kp.b_ptr, kp.c_ptr, 1.0, 0.0, stream, bias_ptr, 0, (scales.a_ptr, scales.b_ptr))
    return out, plan


def _check_out(ci: ArrayInfo, M: int, N: int, want: str | None, ordinal: int) -> None:
    """``out``'s checks: M x N, of ``want`` where given, fp32/fp16/bf16, on a's device, row-major."""
    if (ci.rows, ci.cols) != (M, N):
        raise ValueError(f"out is {ci.rows}x{ci.cols} but a @ b is {M}x{N}")
    if ci.dtype not in ("fp32", "fp16", "bf16"):
        raise TypeError(f"out is {ci.dtype}; scaled_mm writes float32, float16 or bfloat16")
    if want is not None and ci.dtype != want:
        raise TypeError(f"out is {ci.dtype} but out_dtype is {want}; they must match")
    if ci.device != ordinal:
        raise ValueError(f"out is on device {ci.device} but a is on device {ordinal}; all must be on one device")
    if ci.col_major and M > 1 and N > 1:
        raise ValueError("out must be row-major (the scales run along its rows and columns)")
