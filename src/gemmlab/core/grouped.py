"""``gemmlab.grouped_mm`` and ``gemmlab.grouped_mm_masked``: the grouped GEMMs of a
mixture-of-experts layer, with ``torch.nn.functional.grouped_mm``'s semantics.

* **2-D x 3-D** (the experts' forward): a (T, K) holds the tokens sorted by expert, b (G, K, N) the
  experts' weights (each (K, N) element in either layout: ``w.transpose(-2, -1)`` of (G, N, K)
  weights is read as it lies), ``offs`` (G,) the int32 cumulative ends of the groups' rows on the
  device (``offs[-1] == T``; a group may be empty). out (T, N): rows offs[g-1]:offs[g] are
  a[those rows] @ b[g]. One launch of rung 26 (kernels/26_wgmma_grouped.cu): the kernel reads offs
  itself, so the call needs no host synchronization and a CUDA graph captures it and replays it with
  new offsets.
* **3-D x 3-D** (equal groups): a (G, M, K), b (G, K, N) -> (G, M, N), a batch (``gemmlab.matmul``:
  one launch of rung 21).
* **2-D x 2-D, offs over K** (the weight gradient): a (M, T), b (T, N) -> (G, M, N),
  out[g] = a[:, s:e] @ b[s:e, :] for group g's tokens s:e (zeros for an empty group). One launch of
  rung 26 over K (GROUP_K=1), after a small kernel that writes each group's tensor maps of a and b
  with their K cut at the group's end (so a group's last k tile reads nothing of the next group's):
  no host synchronization either, and graph-capturable.
* ``grouped_mm_masked(a, b, counts)`` (the masked form, DeepGEMM's, for graphs that decode): a
  (G, M_max, K) with counts (G,) int32 on the device: out (G, M_max, N) whose first counts[g] rows
  of group g are a[g, :counts[g]] @ b[g]. Rows at and past counts[g] are not written (a new out
  holds what the allocator gave there). One launch of rung 26, the counts read on the device.

Any group sizes and any alignment: a tile that reaches past its group's end is stored by rows and
bounded there; operands TMA cannot describe are copied by the kernel's producer threads. A group's
tiles start at any row (over K: at any k), and a TMA box must start 16-byte aligned along the
contiguous dimension: tokens whose rows are not K-contiguous (over K: operands whose K is
contiguous) are copied first, a read and a write of them. Inputs are fp16 or bf16 (CuPy or
PyTorch); out_dtype fp32, fp16 or bf16.

The offsets (or counts) are checked (``check=True``): non-decreasing, within the rows, the last
equal to T; counts within 0..M_max. Offsets given on the host (a list, a NumPy array, a CPU tensor)
are checked there and copied to the device; device ones are read back for the check (one
synchronization), which is skipped while a stream captures a graph or with ``check=False``. The
kernel clamps what it reads, so unchecked bad offsets may lose rows but never write outside out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from . import dispatch, grouped_args as args
from .driver import device_info
from . import epilogue as _epilogue
from .epilogue import PLAIN, out_dtype_name
from .dtypes import get as get_dtype
from .families.hopper import grouped_config, grouped_k_config
from .groups import Groups
from .launch import Plan
from .packing import packed_ld
from .problem import ArrayFacts, array_facts, check_output_dtype, info_2d
from .registry import get as get_rung
from .rules import Choice
from .variant import resolve

RUNG = "wgmma_grouped"
PLAN_CACHE = 64   # plans kept per process (each holds pointers and shapes, never arrays)
_PLANS: "OrderedDict[tuple, Plan]" = OrderedDict()
_lock = threading.Lock()


def plans() -> list:
    """The grouped plans kept, the most recently made or used last (``repr`` says what each runs)."""
    with _lock:
        return list(_PLANS.values())


# ---- the group ints ---------------------------------------------------------------------------
# ---- the operands -------------------------------------------------------------------------------
def _operands(a, b, out_dtype):
    fa, fb = array_facts("a", a), array_facts("b", b)
    if fa.lib != fb.lib:
        raise TypeError(f"a is a {fa.lib} array and b a {fb.lib} one; pass both from one library")
    if fa.dtype != fb.dtype:
        raise TypeError(f"mixed dtypes: a is {fa.dtype}, b is {fb.dtype}; they must match")
    if fa.dtype not in ("fp16", "bf16"):
        raise TypeError(f"grouped_mm multiplies float16 or bfloat16 operands, got {fa.dtype}")
    if fa.device != fb.device:
        raise ValueError(f"a is on device {fa.device} but b is on device {fb.device}; all must be on one device")
    out = fa.dtype if out_dtype is None else out_dtype_name(out_dtype)
    check_output_dtype(fa.dtype, out, "out_dtype")
    return fa, fb, out


def _plan(key, problem, groups: Groups, rows: int, kernel: str, config, why: str = "", epilogue=PLAIN) -> Plan:
    """The plan of a call signature ``key`` (kept, the most recent ``PLAN_CACHE``), made with
    ``config`` or the groups of rows' rule (``grouped_config``); its repr says which and why."""
    with _lock:
        plan = _PLANS.get(key)
        if plan is not None:
            _PLANS.move_to_end(key)
            return plan
    rung = get_rung(RUNG if kernel in (None, "auto") else kernel)
    if not rung.grouped:
        raise ValueError(f"kernel {kernel!r} computes one product; grouped_mm runs on {RUNG!r} (or 'auto')")
    info = device_info(problem.c.device)
    source = "named" if config is not None and not why else "rule"
    if config is None and not groups.rows_per and not groups.over_k:   # 2-D x 3-D: a tuned layer nearby
        hit = dispatch.grouped_entry(rung, problem.dtype, dispatch.layout_of(problem.kernel_view()),
                                     (groups.count, rows, problem.N, problem.K), info.name)
        if hit is not None:
            e, d = hit
            config, source = e["config"], "tuned"
            why = f"tuned at {'x'.join(map(str, e['shape']))} (log2 distance {d:.2f})"
    if config is None:
        config, why = grouped_config(rows, problem.N, problem.K, groups.count, info.sm_count,
                                     fused=epilogue != PLAIN)
    plan = Plan(problem, rung, config, groups=groups, choice=Choice(rung, config, source, why or "config given"),
                epilogue=epilogue)
    with _lock:
        _PLANS[key] = plan
        while len(_PLANS) > PLAN_CACHE:
            _PLANS.popitem(last=False)
    return plan


def grouped_mm(a, b, offs=None, *, bias=None, activation: str | None = None, out_dtype=None, out=None,
               kernel: str = "auto", config=None, check: bool = True):
    """The grouped product (the module's docstring says the three forms): ``offs`` the groups'
    int32 cumulative ends (device or host), None for 3-D x 3-D. ``bias`` (G, N), one row per group
    (the operands' dtype or float32), and ``activation`` (a name of core/activations.py) fused into
    the stores of the groups of rows. ``out_dtype`` (default: a's) or ``out``;
    ``kernel``/``config``: rung 26 and a configuration (``"auto"``: the rule of
    core/families/hopper.py, ``grouped_config``); ``check``: the offsets checked (one read back of
    device offsets, skipped while a graph is captured)."""
    fa, fb, out_name = _operands(a, b, out_dtype)
    da, db = len(fa.shape), len(fb.shape)
    if da == 3 and db == 3:
        if offs is not None:
            raise ValueError("3-D a and b are groups of equal size: pass no offs")
        if fa.shape[0] != fb.shape[0]:
            raise ValueError(f"a has {fa.shape[0]} groups and b {fb.shape[0]}; they must match")
        if bias is not None or activation is not None:   # the masked form's kernel, every group full
            return grouped_mm_masked(a, b, None, bias=bias, activation=activation, out_dtype=out_dtype, out=out,
                                     kernel=kernel, config=config)
        from .api import matmul
        return matmul(a, b, out=out, out_dtype=out_name if out is None or out_dtype is not None else None)
    if offs is None:
        raise ValueError(f"a {da}-D and b {db}-D: pass offs, the groups' int32 cumulative ends")
    if da == 2 and db == 3:
        epi, bias_f = _group_epilogue(bias, activation, fb.shape[0], fb.shape[2], fa, out_name)
        return _tokens_by_group(a, b, offs, fa, fb, out_name, out, kernel, config, check, epi, bias_f)
    if da == 2 and db == 2:
        if bias is not None or activation is not None:
            raise ValueError("the form over K (the weight gradient, 2-D x 2-D) takes no bias or activation")
        return _weight_gradient(a, b, offs, fa, fb, out_name, out, kernel, config, check)
    raise ValueError(f"a is {da}-D and b {db}-D; grouped_mm takes 2-D x 3-D (with offs), 3-D x 3-D, or 2-D x 2-D "
                     f"(with offs over K)")


def _tokens_by_group(a, b, offs, fa, fb, out_name, out, kernel, config, check, epi, bias_f):
    (T, K), (G, K2, N) = fa.shape, fb.shape
    if K2 != K:
        raise ValueError(f"shape mismatch: a is {fa.shape} and b is {fb.shape}; a.shape[1] must equal b.shape[1]")
    if G == 0:
        raise ValueError("b has no groups")
    ints, out, fo = args.prepared("offs", offs, G, fa, out, out_name, (T, N), lambda v: args.check_offsets(v, T),
                                  check)
    if args.done_without_launch(out, fa.lib, T == 0 or N == 0, K == 0):
        return out
    a, fa = args.k_contiguous(a, fa)
    _launch_rows(fa, fb, fo, T, fa.strides, fo.strides, 0, ints, out_name, kernel, config, epi, bias_f)
    return out


def tuning_variant(a, b, out, config):
    """The build ``grouped_mm(a, b, offs, out=out, config=config)`` (2-D x 3-D, a K-contiguous a) loads
    for any offsets: what the tuner compiles ahead in its pool (tune/grouped.py)."""
    fa, fb, out_name = _operands(a, b, None)
    fo = array_facts("out", out)
    (T, K), (G, _, N) = fa.shape, fb.shape
    b_stride = args.weights_stride(fb, G, K, N, get_dtype(fa.dtype).itemsize)
    problem = args.kernel_problem(fa, (T, K), fa.strides, fb, (K, N), fb.strides[1:], fo, (T, N), fo.strides, fo.dtype,
                              (0, b_stride, 0))
    rung = get_rung(RUNG)
    cfg = {**rung.config(config), "GROUP_CAP": Groups(G, b_stride, 0).cap, "GROUP_K": 0}
    return resolve(rung, problem.dtype, problem.kernel_view(), cfg, None, device_info(fa.device).sm_count).variant


def _launch_rows(fa, fb, fo, rows, a_strides, out_strides, rows_per, ints, out_name, kernel, config, epi,
                 bias_f, rule_rows: int | None = None) -> None:
    """Groups of rows (2-D x 3-D, or the masked form with ``rows_per`` rows per group) in one launch
    of rung 26, through a plan kept per call signature; ``ints`` the group ints on the device (the
    array and its pointer, ``args.prepared``), ``epi`` the fused epilogue, ``bias_f`` its bias's facts
    (or None), ``rule_rows`` the rows the rule takes the groups to hold (None: ``rows``)."""
    G, K, N = fb.shape
    b_stride = args.weights_stride(fb, G, K, N, get_dtype(fa.dtype).itemsize)
    key = (rows_per, fa.shape, fa.strides, fb.shape, fb.strides, fo.strides, fa.dtype, out_name, fa.device, fa.lib,
           not fa.ptr & 15, not fb.ptr & 15, not fo.ptr & 15, epi, kernel, repr(config), rule_rows)
    plan = _PLANS.get(key)
    if plan is None:
        problem = args.kernel_problem(fa, (rows, K), a_strides, fb, (K, N), fb.strides[1:], fo, (rows, N),
                                      out_strides, out_name, (0, b_stride, 0))
        plan = _plan(key, problem, Groups(G, b_stride, rows_per), rule_rows or rows, kernel, config, epilogue=epi)
    args.no_overlap(fa, fb, fo, bias_f)
    plan.launch_groups(ints[1], fa.ptr, fb.ptr, fo.ptr, bias=0 if bias_f is None else bias_f.ptr)


def grouped_mm_masked(a, b, counts, *, expected_rows: int | None = None, bias=None, activation: str | None = None,
                      out_dtype=None, out=None, kernel: str = "auto", config=None, check: bool = True):
    """The masked form: a (G, M_max, K) with ``counts`` (G,) int32 rows per group (device or host),
    b (G, K, N) -> out (G, M_max, N), rows at and past counts[g] not written; one launch that reads
    the counts on the device (a CUDA graph replays it with new counts). a's groups must lie one
    after the other (a's rows one run: a (G, M_max, K) with rows of stride K or more, its group
    stride M_max rows), as must out's (a new one is). ``expected_rows``: the rows a group is expected
    to hold (DeepGEMM's expected_m; a host int, e.g. tokens x top-k / experts), which the rule sizes
    its tile by in place of M_max, since the host does not see the counts (None: M_max)."""
    fa, fb, out_name = _operands(a, b, out_dtype)
    if len(fa.shape) != 3 or len(fb.shape) != 3:
        raise ValueError(f"the masked form takes a (G, M_max, K) and b (G, K, N); got {fa.shape} and {fb.shape}")
    G, R, K, N = args.masked_dims(fa, fb)
    epi, bias_f = _group_epilogue(bias, activation, G, N, fa, out_name)
    # no counts: every group full (grouped_mm's 3-D x 3-D with a fused epilogue)
    ints, out, fo = args.masked_prepared(counts, G, R, N, fa, out, out_name, check)
    if args.done_without_launch(out, fa.lib, R == 0 or N == 0, K == 0):
        return out
    a, fa = args.k_contiguous(a, fa)
    args.check_runs(G, R, a=fa, out=fo)
    _launch_rows(fa, fb, fo, G * R, fa.strides[1:], fo.strides[1:], R, ints, out_name, kernel, config, epi, bias_f,
                 G * args.expected(expected_rows, R))
    return out


def _weight_gradient(a, b, offs, fa, fb, out_name, out, kernel, config, check):
    """2-D x 2-D with offs over K: one launch of rung 26 over K (GROUP_K=1) after its group_maps
    (each group's maps of a and b cut at its end k); operands the kernel cannot read so are copied
    first (``_k_outer``)."""
    (M, T), (T2, N) = fa.shape, fb.shape
    if T2 != T:
        raise ValueError(f"shape mismatch: a is {fa.shape} and b is {fb.shape}; a.shape[1] must equal b.shape[0]")
    values = args.host_values(offs)
    G = len(values) if values is not None else args.int_facts("offs", offs).shape[0]
    if G == 0:
        raise ValueError("offs has no groups")
    ints, out, fo = args.prepared("offs", offs, G, fa, out, out_name, (G, M, N),
                                  lambda v: args.check_offsets(v, T), check)
    if args.done_without_launch(out, fa.lib, M == 0 or N == 0, T == 0):
        return out
    a, fa = _k_outer("a", a, fa, k_axis=1)
    b, fb = _k_outer("b", b, fb, k_axis=0)
    key = ("over_k", fa.shape, fa.strides, fb.shape, fb.strides, fo.shape, fo.strides, fa.dtype, out_name, fa.device,
           fa.lib, not fo.ptr & 15, kernel, repr(config))
    plan = _PLANS.get(key)
    if plan is None:
        problem = args.kernel_problem(fa, (M, T), fa.strides, fb, (T, N), fb.strides, fo, (M, N), fo.strides[1:], out_name,
                                  (0, 0, fo.strides[0]))
        groups = Groups(G, max(fo.strides[0], 1), 0, over_k=True)
        why = ""
        if config is None:
            config, why = grouped_k_config(M, N, T, G, device_info(fa.device).sm_count)
        plan = _plan(key, problem, groups, M, kernel, config, why)
    args.no_overlap(fa, fb, fo)
    plan.launch_groups(ints[1], fa.ptr, fb.ptr, fo.ptr)
    return out


def _k_outer(name: str, x, f: ArrayFacts, k_axis: int):
    """``x`` as the grouped kernel over K reads it through tensor maps: K its outer dimension (a
    group's first k is any k, and a TMA box must start 16-byte aligned along the contiguous one: a
    column-major a, a row-major b, the layouts of x^T and dY in a backward), its base 16-byte
    aligned and its leading dimension whole 16-byte vectors. As it is where it is so, else copied
    into such a buffer (one read and one write of it; its rows padded as the packs pad them)."""
    info = info_2d(name, f.ptr, f.shape, f.strides, f.dtype, f.device, f.lib, f.stream)
    k_outer = info.col_major if k_axis == 1 else not info.col_major
    if info.vec_ok() and (k_outer or 1 in f.shape):
        return x, f
    other = f.shape[1 - k_axis]
    padded = packed_ld(other, f.dtype)
    buf = args.empty(f.lib, f.dtype, f.device, (f.shape[k_axis], padded))   # rows along K
    view = buf[:, :other]
    src = x.t() if k_axis == 1 else x   # (K, other)
    if f.lib == "torch":
        view.copy_(src)
    else:
        view[...] = src
    out = view.t() if k_axis == 1 else view
    return out, array_facts(name, out)


def _group_epilogue(bias, activation, G: int, N: int, fa: ArrayFacts, out_name: str):
    """(Epilogue, the bias's facts or None) of a call of groups of rows: ``activation`` a name of
    core/activations.py; ``bias`` one row of N per group, (G, N) with contiguous rows, of the operands'
    dtype or float32, on their device and of their library. Errors name the problem."""
    act = _epilogue.check_activation(activation)
    f = args.group_bias(bias, G, N, fa, fa.dtype, "the operands' dtype")
    if act is None and f is None:
        return PLAIN, None
    kind = None if f is None else ("same" if f.dtype == fa.dtype else "fp32")
    return _epilogue.Epilogue(act, kind, False, None if out_name == fa.dtype else out_name), f


