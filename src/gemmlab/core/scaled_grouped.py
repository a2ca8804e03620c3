"""``gemmlab.scaled_grouped_mm`` and ``gemmlab.scaled_grouped_mm_masked``: the grouped GEMMs of a
mixture-of-experts layer on FP8 operands with scales, as ``torch._scaled_grouped_mm`` takes them
(and DeepGEMM's block scales), in one launch of rung 27 (kernels/27_wgmma_grouped_fp8.cu).

* **2-D x 3-D**: a (T, K) the tokens sorted by expert, b (G, K, N) the experts' weights, ``offs``
  (G,) the int32 cumulative ends of the groups' rows (device or host; ``grouped_mm``'s contract):
  out (T, N), rows offs[g-1]:offs[g] = (scale_a * a[rows]) @ (scale_b[g] * b[g]).
* **3-D x 3-D** (equal groups): a (G, M, K), b (G, K, N) -> (G, M, N).
* ``scaled_grouped_mm_masked(a, b, scale_a, scale_b, counts)``: a (G, M_max, K) with counts (G,)
  int32 rows per group on the device (DeepGEMM's masked layout, for CUDA graphs that decode): the
  first counts[g] rows of each group are computed, the others not written.

The operands hold FP8 codes (``float8_e4m3fn`` or ``float8_e5m2`` tensors; CuPy: uint8 arrays with
``a_format=`` / ``b_format=``). The kernel reads both K-major: a row-major a, and weights whose K is
contiguous, ``w.transpose(-2, -1)`` of (G, N, K) weights (as torch requires); any other layout, or
a row length that is not a multiple of 16 bytes, is copied first (a read and a write of that
operand). The scales are float32 on the device; scale_a runs along the rows (the tokens), scale_b
is each expert's:

* tensor-wise: scale_a one value, scale_b one per group, (G,) (or (G, 1), (G, 1, 1));
* row-wise (torch's): scale_a one per row, (T,) or (T, 1) (3-D a: (G, M), (G, M, 1)), scale_b one
  row of N per group, (G, N) (or (G, 1, N));
* block-wise (DeepSeek-V3's, DeepGEMM's): scale_a one per 1x128 block of a, (T, ceil(K/128)) in
  any layout (3-D a: (G, M, ceil(K/128)), its groups one run of rows), scale_b one per 128x128
  block of each expert's weights, (G, ceil(K/128), ceil(N/128)) with each group's grid dense in
  either layout; promoted only (no ``use_fast_accum``).

``bias`` (G, N), one row per expert (the output's dtype or float32), and ``activation`` are fused
into the stores. The partial sums are promoted into FP32 every 128 of K unless ``use_fast_accum``.
Every check comes before anything runs on the GPU; the offsets' check and the scales' finiteness
check read values back (one synchronization each), skipped while a stream captures a graph or with
``check=False`` / ``check_finite=False``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from . import dispatch, epilogue as _epilogue, grouped_args as args
from .deps import require
from .driver import device_info
from .families.hopper import grouped_fp8_config
from .groups import Groups
from .launch import Plan, current_stream, stream_capturing
from .precision import label as precision_label
from .problem import ArrayFacts, array_facts
from .registry import get as get_rung
from .rules import Choice
from .scaled import BLOCK, block_refusal, finite, fp8_facts, numel, out_dtype_of, scale_facts
from .variant import resolve

RUNG = "wgmma_grouped_fp8"
PLAN_CACHE = 64
_PLANS: "OrderedDict[tuple, Plan]" = OrderedDict()
_lock = threading.Lock()


@dataclass(frozen=True)
class GroupScales:
    """A call's scales after their checks: the scaling ("tensor", "row" or "block"), the two
    device pointers, and for block scales the strides (elements) of scale_a along the rows and K
    and of each group's scale_b along K and N."""

    mode: str
    a_ptr: int
    b_ptr: int
    strides: tuple | None = None


def _dense(f: ArrayFacts) -> bool:
    """Whether f's elements lie one after another in row-major order (dimensions of 1 aside)."""
    want = 1
    for n, st in reversed(list(zip(f.shape, f.strides))):
        if n != 1 and st != want:
            return False
        want *= n
    return True


def check_group_scales(scale_a, scale_b, rows: tuple, G: int, N: int, K: int, device: int, lib: str) -> GroupScales:
    """The scaling of a grouped call from its scales' shapes (errors name the scale and what it
    should be); ``rows`` a's leading dimensions, (T,) or (G, M)."""
    fa = scale_facts("scale_a", scale_a, device, lib)
    fb = scale_facts("scale_b", scale_b, device, lib)
    kb, nb = -(-K // BLOCK), -(-N // BLOCK)
    if numel(fa.shape) == 1 and fb.shape in ((G,), (G, 1), (G, 1, 1)):
        return GroupScales("tensor", fa.ptr, _dense_ptr("scale_b", fb))
    if fa.shape in (rows, rows + (1,)) and fb.shape in ((G, N), (G, 1, N)):
        return GroupScales("row", _dense_ptr("scale_a", fa), _dense_ptr("scale_b", fb))
    if fa.shape == rows + (kb,) and fb.shape == (G, kb, nb):
        return GroupScales("block", fa.ptr, fb.ptr, _block_strides(fa, fb, rows, G, kb, nb))
    r = "x".join(map(str, rows))
    raise ValueError(
        f"scale_a {fa.shape} and scale_b {fb.shape} name no scaling of {G} groups of {r} rows x {K} @ {K}x{N}: pass "
        f"scale_a one value and scale_b ({G},) (tensor-wise, one per group), scale_a {rows} and scale_b ({G}, {N}) "
        f"(row-wise), or scale_a {rows + (kb,)} per 1x{BLOCK} block and scale_b ({G}, {kb}, {nb}) per "
        f"{BLOCK}x{BLOCK} block (block-wise)")


def _block_strides(fa: ArrayFacts, fb: ArrayFacts, rows: tuple, G: int, kb: int, nb: int) -> tuple:
    """The block scales' strides the kernel takes (scale_a along the rows and K, each group's scale_b
    along K and N; kernels/scales.cuh): scale_a's rows one run over the groups (3-D a), and each
    group's scale_b grid dense in one of its two layouts, the groups one grid apart (the kernel
    finds group g's grid at g x kb x nb)."""
    if len(rows) == 2 and G > 1 and rows[1] > 1 and fa.strides[0] != rows[1] * fa.strides[1]:
        raise ValueError(f"scale_a has strides {fa.strides}: its groups' rows must follow one another (group "
                         f"stride = {rows[1]} x its row stride)")
    sa_m = fa.strides[0] if len(rows) == 2 and rows[1] == 1 else fa.strides[-2]
    st_k, st_n = fb.strides[1], fb.strides[2]
    if (kb == 1 or st_k == nb) and (nb == 1 or st_n == 1):
        sb = (nb, 1)
    elif (kb == 1 or st_k == 1) and (nb == 1 or st_n == kb):
        sb = (1, kb)
    else:
        sb = None
    if sb is None or (G > 1 and fb.strides[0] != kb * nb):
        raise ValueError(f"scale_b has strides {fb.strides}: each group's {kb}x{nb} grid must be dense, the groups one "
                         f"grid apart (strides ({kb * nb}, {nb}, 1) or ({kb * nb}, 1, {kb})); pass "
                         f"scale_b.contiguous()")
    return (sa_m, fa.strides[-1]) + sb


def _dense_ptr(name: str, f: ArrayFacts) -> int:
    if not _dense(f):
        raise ValueError(f"{name} has strides {f.strides}; its values must be contiguous (pass {name}.contiguous())")
    return f.ptr


# ---- the operands as the kernel reads them ---------------------------------------------------------
def _k_major_tokens(x, f: ArrayFacts):
    """a (rows, K) or (G, M, K) with K contiguous, its rows a whole number of 16 bytes apart and one
    run (3-D: group stride = M rows), its base 16-byte aligned: as it is, or copied so (one read and
    one write of it, its rows padded)."""
    K = f.shape[-1]
    lda = f.strides[-2]   # one row (a decode step's token) is copied: its strides say no layout
    ok = f.shape[-2] > 1 and (K == 1 or f.strides[-1] == 1) and lda % 16 == 0 and lda >= K and f.ptr % 16 == 0
    if len(f.shape) == 3 and f.shape[0] > 1:
        ok = ok and f.strides[0] == f.shape[1] * lda
    if ok:
        return x, f
    buf = _codes(x, f, f.shape[:-1] + (-(-K // 16) * 16,))
    view = buf[..., :K]
    _copy(view, x, f.lib)
    return view, _refacts("a", view, f)


def _k_major_weights(x, f: ArrayFacts):
    """b (G, K, N) as the kernel reads it: each group's K contiguous (column-major (K, N), the
    transpose of row-major (N, K) weights), its columns and groups a whole number of 16 bytes apart,
    its base 16-byte aligned: as it is, or copied so (a transposing copy where b is row-major)."""
    G, K, N = f.shape
    ldb = f.strides[2]   # one column is copied: its strides say no layout
    ok = (N > 1 and (K == 1 or f.strides[1] == 1) and ldb % 16 == 0 and ldb >= K and f.ptr % 16 == 0
          and (G == 1 or f.strides[0] % 16 == 0))
    if ok:
        return x, f
    buf = _codes(x, f, (G, N, -(-K // 16) * 16))
    view = buf[:, :, :K]
    _copy(view, x.transpose(1, 2) if f.lib == "torch" else x.transpose(0, 2, 1), f.lib)
    out = view.transpose(1, 2) if f.lib == "torch" else view.transpose(0, 2, 1)
    return out, _refacts("b", out, f)


def _codes(x, f: ArrayFacts, shape: tuple):
    """A new array of x's FP8 codes' type (torch: its float8 dtype; CuPy: uint8) on its device."""
    if f.lib == "torch":
        return require("torch").empty(shape, dtype=x.dtype, device=x.device)
    if f.lib != "cupy":
        raise TypeError("an operand the kernel cannot read as it lies (K not contiguous, rows not 16-byte multiples) "
                        "is copied by its library: pass CuPy or PyTorch arrays, or K-major ones with 16-byte rows")
    cupy = require("cupy")
    with cupy.cuda.Device(f.device):
        return cupy.empty(shape, dtype=cupy.uint8)


def _copy(dst, src, lib: str) -> None:
    if lib == "torch":
        dst.copy_(src)
    else:
        dst[...] = src


def _refacts(name: str, x, f: ArrayFacts) -> ArrayFacts:
    return array_facts(name, x, f.fmt)


# ---- the calls ---------------------------------------------------------------------------------------
def _operands(a, b, a_format, b_format, out_dtype):
    fa, fb = fp8_facts("a", a, a_format, "scaled_grouped_mm"), fp8_facts("b", b, b_format, "scaled_grouped_mm")
    if fa.lib != fb.lib:
        raise TypeError(f"a is a {fa.lib} array and b a {fb.lib} one; pass both from one library")
    if fa.device != fb.device:
        raise ValueError(f"a is on device {fa.device} but b is on device {fb.device}; all must be on one device")
    if len(fb.shape) != 3:
        raise ValueError(f"b must be 3-D (G, K, N), the experts' weights; got shape {fb.shape}")
    return fa, fb, out_dtype_of(out_dtype, fa.lib)


def _epilogue_of(bias, activation, G: int, N: int, fa: ArrayFacts, out_name: str, mode: str):
    """(Epilogue, the bias's facts or None): the scales, ``activation``, and ``bias`` (G, N) of the
    output's dtype or float32, rows contiguous and one after another."""
    act = _epilogue.check_activation(activation)
    f = args.group_bias(bias, G, N, fa, out_name, "with FP8 operands, the output's dtype")
    kind = None if f is None else ("fp32" if f.dtype == "fp32" else "out")
    return _epilogue.Epilogue(act, kind, False, out_name, scale=mode), f


def _checked_finite(scales: dict, lib: str, device: int, check_finite: bool) -> None:
    if not check_finite or stream_capturing(current_stream(lib, device), device):
        return
    for name, x in scales.items():
        if not finite(x, lib):
            raise ValueError(f"{name} holds a value that is not finite (inf or NaN); every scale must be finite")


def scaled_grouped_mm(a, b, scale_a, scale_b, offs=None, *, bias=None, activation: str | None = None,
                      out_dtype=None, use_fast_accum: bool = False, out=None, a_format: str | None = None,
                      b_format: str | None = None, kernel: str = "auto", config=None, check: bool = True,
                      check_finite: bool = True):
    """The grouped scaled product (the module's docstring says the forms and scalings): 2-D a with
    ``offs``, or 3-D a without. ``out_dtype`` (None: bfloat16 for PyTorch, float16 for CuPy; or
    float32) or ``out``; ``kernel``/``config``: rung 27 and a configuration (``"auto"``: the rule of
    core/families/hopper.py, ``grouped_fp8_config``)."""
    fa, fb, out_name = _operands(a, b, a_format, b_format, out_dtype)
    if len(fa.shape) == 3:
        if offs is not None:
            raise ValueError("3-D a and b are groups of equal size: pass no offs")
        return scaled_grouped_mm_masked(a, b, scale_a, scale_b, None, bias=bias, activation=activation,
                                        out_dtype=out_dtype, use_fast_accum=use_fast_accum, out=out, a_format=a_format,
                                        b_format=b_format, kernel=kernel, config=config, check_finite=check_finite)
    if len(fa.shape) != 2:
        raise ValueError(f"a must be 2-D (T, K) with offs, or 3-D (G, M, K); got shape {fa.shape}")
    if offs is None:
        raise ValueError("a 2-D a (the tokens of every group) needs offs, the groups' int32 cumulative ends")
    (T, K), (G, K2, N) = fa.shape, fb.shape
    if K2 != K:
        raise ValueError(f"shape mismatch: a is {fa.shape} and b is {fb.shape}; a.shape[1] must equal b.shape[1]")
    if G == 0:
        raise ValueError("b has no groups")
    scales = check_group_scales(scale_a, scale_b, (T,), G, N, K, fa.device, fa.lib)
    epi, bias_f = _epilogue_of(bias, activation, G, N, fa, out_name, scales.mode)
    precision = _precision(scales, use_fast_accum)
    ints, out, fo = args.prepared("offs", offs, G, fa, out, out_name, (T, N), lambda v: args.check_offsets(v, T), check)
    if args.done_without_launch(out, fa.lib, T == 0 or N == 0, K == 0):
        return out
    _checked_finite({"scale_a": scale_a, "scale_b": scale_b}, fa.lib, fa.device, check_finite)
    a, fa = _k_major_tokens(a, fa)
    b, fb = _k_major_weights(b, fb)
    _launch(fa, fb, fo, T, fa.strides, fo.strides, 0, ints, out_name, kernel, config, epi, bias_f, scales, precision)
    return out


def scaled_grouped_mm_masked(a, b, scale_a, scale_b, counts, *, expected_rows: int | None = None, bias=None,
                             activation: str | None = None, out_dtype=None, use_fast_accum: bool = False, out=None,
                             a_format: str | None = None, b_format: str | None = None, kernel: str = "auto",
                             config=None, check: bool = True, check_finite: bool = True):
    """The masked form: a (G, M_max, K) with ``counts`` (G,) int32 rows per group (device or host;
    None: every group full), b (G, K, N) -> out (G, M_max, N), rows at and past counts[g] not
    written; one launch that reads the counts on the device. ``expected_rows``: the rows a group is
    expected to hold (DeepGEMM's expected_m), which the rule sizes its tile by in place of M_max (the
    host does not see the counts). Other arguments as ``scaled_grouped_mm``'s."""
    fa, fb, out_name = _operands(a, b, a_format, b_format, out_dtype)
    if len(fa.shape) != 3:
        raise ValueError(f"the masked form takes a (G, M_max, K); got a of shape {fa.shape}")
    G, R, K, N = args.masked_dims(fa, fb)
    scales = check_group_scales(scale_a, scale_b, (G, R), G, N, K, fa.device, fa.lib)
    epi, bias_f = _epilogue_of(bias, activation, G, N, fa, out_name, scales.mode)
    precision = _precision(scales, use_fast_accum)
    ints, out, fo = args.masked_prepared(counts, G, R, N, fa, out, out_name, check)
    if args.done_without_launch(out, fa.lib, R == 0 or N == 0, K == 0):
        return out
    args.check_runs(G, R, out=fo)
    _checked_finite({"scale_a": scale_a, "scale_b": scale_b}, fa.lib, fa.device, check_finite)
    a, fa = _k_major_tokens(a, fa)
    b, fb = _k_major_weights(b, fb)
    _launch(fa, fb, fo, G * R, fa.strides[1:], fo.strides[1:], R, ints, out_name, kernel, config, epi, bias_f, scales,
            precision, G * args.expected(expected_rows, R))
    return out


def _precision(scales: GroupScales, use_fast_accum: bool) -> str:
    if scales.mode == "block" and use_fast_accum:
        raise ValueError("block scales multiply each k block's sums as they are promoted into FP32: use_fast_accum "
                         "(no promotion) does not apply to them")
    return "fp8_fast" if use_fast_accum else "fp8"


def _launch(fa, fb, fo, rows, a_strides, out_strides, rows_per, ints, out_name, kernel, config, epi, bias_f,
            scales: GroupScales, precision: str, rule_rows: int | None = None) -> None:
    """One launch of rung 27 through a plan kept per call signature (``rule_rows``: the rows the rule
    takes the groups to hold; None: ``rows``)."""
    G, K, N = fb.shape
    b_stride = args.weights_stride(fb, G, K, N, 1)
    key = (rows_per, fa.shape, fa.strides, fb.shape, fb.strides, fo.strides, fa.fmt, fb.fmt, out_name, fa.device,
           fa.lib, not fo.ptr & 15, epi, scales.strides, precision, kernel, repr(config), rule_rows)
    with _lock:
        plan = _PLANS.get(key)
        if plan is not None:
            _PLANS.move_to_end(key)
    if plan is None:
        problem = args.kernel_problem(fa, (rows, K), a_strides, fb, (K, N), fb.strides[1:], fo, (rows, N),
                                      out_strides, out_name, (0, b_stride, 0))
        if N == 1:   # one column's strides read as row-major: it is K-major, as _k_major_weights copied it
            problem = replace(problem, b=replace(problem.b, col_major=True, ld=fb.strides[2]))
        if rows == 1:   # one row's leading dimension read as its length: its pitch, as _k_major_tokens copied it
            problem = replace(problem, a=replace(problem.a, ld=a_strides[0]))
        plan = _plan(problem, Groups(G, b_stride, rows_per), rule_rows or rows, kernel, config, epi, scales,
                     precision)
        with _lock:
            _PLANS[key] = plan
            while len(_PLANS) > PLAN_CACHE:
                _PLANS.popitem(last=False)
    args.no_overlap(fa, fb, fo, bias_f)
    plan.launch_groups(ints[1], fa.ptr, fb.ptr, fo.ptr, bias=0 if bias_f is None else bias_f.ptr,
                       scales=(scales.a_ptr, scales.b_ptr))


def _plan(problem, groups: Groups, rows: int, kernel: str, config, epi, scales: GroupScales, precision: str) -> Plan:
    """The plan of a call: ``config``, or for a 2-D x 3-D call the nearest tuned layer of this GPU
    and precision (``gemmlab tune wgmma_grouped_fp8 --shape GxTxNxK``: dispatch.grouped_entry), or
    the rule (``grouped_fp8_config``); its choice says which and why."""
    rung = get_rung(RUNG if kernel in (None, "auto") else kernel)
    if rung.slug != RUNG:
        raise ValueError(f"kernel {kernel!r}: scaled_grouped_mm runs on {RUNG!r} (or 'auto')")
    why, source = "config given", "named"
    if config is not None and scales.mode == "block":
        refused = block_refusal(rung.config(config, precision))
        if refused is not None:
            raise ValueError(refused)
    info = device_info(problem.c.device)
    if config is None and not groups.rows_per:
        hit = dispatch.grouped_entry(rung, precision_label("fp8", precision), "rc",
                                     (groups.count, rows, problem.N, problem.K), info.name, precision)
        if hit is not None and not (scales.mode == "block"
                                    and block_refusal(rung.config(hit[0]["config"], precision)) is not None):
            e, d = hit
            config, source = e["config"], "tuned"
            why = f"tuned at {'x'.join(map(str, e['shape']))} (log2 distance {d:.2f})"
    if config is None:
        config, why = grouped_fp8_config(rows, problem.N, problem.K, groups.count, info.sm_count, precision,
                                         scales.mode == "block")
        source = "rule"
    return Plan(problem, rung, config, groups=groups, choice=Choice(rung, config, source, why), precision=precision,
                epilogue=epi, scale_ptrs=(scales.a_ptr, scales.b_ptr), scale_strides=scales.strides)


def tuning_variant(a, b, scale_a, scale_b, out, config, precision: str = "fp8"):
    """The build ``scaled_grouped_mm(a, b, scale_a, scale_b, offs, out=out, config=config)`` (2-D x 3-D,
    K-major operands) loads for any offsets: what the tuner compiles ahead in its pool
    (tune/grouped.py)."""
    fa, fb, out_name = _operands(a, b, None, None, None)
    fo = array_facts("out", out)
    (T, K), (G, _, N) = fa.shape, fb.shape
    scales = check_group_scales(scale_a, scale_b, (T,), G, N, K, fa.device, fa.lib)
    b_stride = args.weights_stride(fb, G, K, N, 1)
    problem = args.kernel_problem(fa, (T, K), fa.strides, fb, (K, N), fb.strides[1:], fo, (T, N), fo.strides,
                                  fo.dtype, (0, b_stride, 0))
    rung = get_rung(RUNG)
    cfg = {**rung.config(config, precision), "GROUP_CAP": Groups(G, b_stride, 0).cap, "GROUP_K": 0}
    epi = _epilogue.Epilogue(None, None, False, fo.dtype, scale=scales.mode)
    return resolve(rung, "fp8", problem.kernel_view(), cfg, precision, device_info(fa.device).sm_count,
                   epilogue=epi, formats=(fa.fmt, fb.fmt)).variant


def plans() -> list:
    """The grouped FP8 plans kept, the most recently made or used last."""
    with _lock:
        return list(_PLANS.values())
