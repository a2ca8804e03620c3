"""Choose a rung and its configuration for a problem: ``kernel="auto"`` (and a named rung).

A named rung runs with the configuration given (its defaults when none). ``auto`` looks, in order:

1. **tuned** -- the tuning database of this machine, through the file the tuner exports after every
   run (``<cache dir>/tuned.json``, ``tune.export``; the cache folder is ``core.compile.cache_dir``).
   Core reads that JSON rather than the database itself: the database is Optuna's (its SQLite
   schema is Optuna's internal one and changes with Optuna; it may also be a PostgreSQL URL), and
   ``tune`` sits above ``core`` in the layers. A JSON of best configurations reads in well under a
   millisecond with no optional import; without the file nothing is imported or opened.
2. **defaults** -- a small table per architecture shipped with gemmlab
   (``gemmlab/data/defaults_sm90.json``: written by ``gemmlab tune --suite ... --emit-defaults``
   on that GPU; the file says where its entries come from), for the shapes it was tuned on:
   entries within ``DEFAULTS_NEAR``.
3. **model** -- the selection model (core/selection.py): the option of a short menu per dtype
   (rung, tile, split policy, copies) with the smallest time predicted from the measurements of
   ``gemmlab tune auto`` on a random tuning sample (``data/selection_sm90.json.gz``; a GPU with
   measurements of its own: ``selection_sm90_<gpu>.json.gz``), for a shape no table holds.
4. **defaults** again, any entry within ``MAX_DISTANCE`` (where the model has no measurements:
   another GPU, a precision without a menu).
5. **rule** (core/rules.py) -- for a thin problem (its M or N, in the kernel's view, at most a thin
   rung's ``Rung.thin``) the thin rung's own rule; otherwise the top rung for the dtype on this
   architecture with the rule's tile, split-K and clusters (``rules.rule_config``), or the highest
   rung that can split K where the top one cannot and would leave more than half of the SMs idle.

Whatever the source, ``auto`` then decides the rung's PACK switch (``with_packing``): an operand
whose base or leading dimension keeps it off the 16-byte path is copied first (core/packing.py)
when the copy is cheap against what the fast path saves. The tables are keyed by shape and layout,
not by the operands' alignment, so their PACK says nothing about this call: the estimate decides.

Both tables hold entries ``{dtype, shape [M, N, K], layout, rung, config}`` (the tuned file also
``gpu_name`` and ``arch``; either may carry ``tflops``, ``vs_cublas`` and ``source``), in the
kernel's view of the problem: C row-major (a column-major C swaps M and N, see problem.py), layout
the two letters of A and B (r row-major, c column-major); an entry's dtype names its precision
where that is not the dtype's own (``precision.label``: "fp32:tf32", as the tuner files its studies).
The entry used is the nearest of the same dtype and precision (else of its stand-in,
``dtypes.DType.stand_in``: fp16 for bf16 and the reverse; the same layout class when there is one)
whose rung can run here and whose configuration the registry accepts, by the distance in log2 space
``sqrt(sum((log2 x - log2 y)^2 for x, y in (M, N, K)))``: a tile and a split that suit 4096^3 suit
4093^3, and are less sure at 8192^3. Entries farther than ``MAX_DISTANCE`` (1.0: a factor of 2 in
one dimension, or about 1.5 in all three) are not used: the next source answers instead.

The choice (``Choice``) says rung, configuration, source and why; ``gemmlab.plan(...)`` shows it,
and ``GEMMLAB_LOG_DISPATCH=1`` (read once) logs every choice (logger ``gemmlab``). gemm's fast
path remembers a call's plan per signature (which holds kernel and config), so a choice is made
once per signature. Tables are read once per process (``reload()`` forgets them).

Every source honours the precision asked for (``precision=``; None: the dtype's exact one, so
``auto`` never trades accuracy for speed unasked): only rungs that compute the dtype in that
precision are candidates (``registry.for_dtype``), and a named rung that cannot is a ValueError.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from pathlib import Path

from . import dtypes, selection
from .precision import label
from .arch import arch_number
from .compile import cache_dir
from .problem import GemmProblem
from .registry import MAX_GRID_Y, THIN_MAX, Rung, for_dtype
from .rules import (ALIGNED_TFLOPS, Choice, own_precision, rule, choose, pack_estimate, rule_config,  # noqa: F401 (re-exported)
                    with_packing)

log = logging.getLogger("gemmlab")
LOG_DISPATCH = os.environ.get("GEMMLAB_LOG_DISPATCH", "") not in ("", "0")
DATA_DIR = Path(__file__).resolve().parent.parent / "data"
TUNED_FILE = "tuned.json"
MAX_DISTANCE = 1.0
DEFAULTS_NEAR = 0.1   # the shipped table's entries answer before the selection model within this distance


# ---- the tables ---------------------------------------------------------------------------------
_tables: dict[str, list[dict]] = {}
_tables_lock = threading.Lock()


def read_table(path: Path | None) -> list[dict]:
    """The entries of a table file, read once per process ([] when absent or unreadable)."""
    if path is None:
        return []
    key = str(path)
    hit = _tables.get(key)
    if hit is not None:
        return hit
    entries: list[dict] = []
    if path.is_file():
        try:
            doc = json.loads(path.read_text())
            entries = [e for e in doc.get("entries", []) if isinstance(e, dict)]
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("gemmlab: ignoring the dispatch table %s (%s)", path, exc)
    with _tables_lock:
        _tables[key] = entries
    return entries


def tuned_path() -> Path | None:
    """Where the tuner exports its best configurations (None when the cache folder is off)."""
    d = cache_dir()
    return None if d is None else d / TUNED_FILE


def defaults_path(arch: str | int) -> Path:
    """The shipped defaults of an architecture: ``data/defaults_sm<NN>.json``."""
    return DATA_DIR / f"defaults_sm{arch_number(arch)}.json"


def reload() -> None:
    """Forget the tables read so far (a new export, a test)."""
    with _tables_lock:
        _tables.clear()


# ---- nearest entry ------------------------------------------------------------------------------
def distance(a, b) -> float:
    """The log2-space distance between two shapes (M, N, K)."""
    return math.sqrt(sum((math.log2(x) - math.log2(y)) ** 2 for x, y in zip(a, b)))


def _usable(e: dict, dtype: str, allowed: dict[str, Rung], precision: str | None = None) -> bool:
    """An entry filed under ``dtype`` in ``precision`` (``precision.label``: the tuner's "fp32:tf32"
    for a tf32 study, plain "fp32" for exact FP32) whose rung may run and accepts its configuration."""
    rung = allowed.get(e.get("rung"))
    if e.get("dtype") != label(dtype, precision) or rung is None or len(e.get("shape") or ()) != 3:
        return False
    try:
        rung.config(e.get("config") or {}, own_precision(rung, dtype, precision))
    except (ValueError, TypeError):
        return False
    return True


def _thin_covers(e: dict, shape, allowed: dict[str, Rung]) -> bool:
    """A thin rung's entry serves problems whose thin side (the smaller of M and N) is at most its
    own shape's, or at most ``THIN_MAX``: past that its tiles re-read the big operand once per
    extra tile row or column (a 4096x128 problem with 4096x64x4096's 32x16 tile would read A 8
    times). Within THIN_MAX the re-reads were measured acceptable where no nearer entry exists
    (4096x24x4096 and 4096x32x4096 with 4096x16x4096's tile ran at about cuBLAS's speed,
    h100_fp32_near_thin_nearest_entry.json), though a nearer one can do much better (32x4096x4096
    with its own entry against 16x4096x4096's 16x16 tile, h100_fp32_near_thin_shipped_table.json). Entries of
    other rungs serve any problem that is not thin, and thin ones only from thin shapes."""
    rung = allowed.get(e.get("rung"))
    side, own = min(shape[0], shape[1]), min(e["shape"][0], e["shape"][1])
    if rung is None or not rung.thin:
        # ... and the other way round: a thin problem (thin side <= THIN_MAX) takes no wide
        # problem's entry. 4096x48x4096's cluster-split 64x64 tile served 4096x32x4096 far slower
        # than 4096x16x4096's thin tile (h100_fp32_near_thin_cluster_entries.json)
        # (a dtype without a thin rung keeps every entry)
        return side > THIN_MAX or own <= THIN_MAX or not any(r.thin for r in allowed.values())
    return side <= max(own, THIN_MAX)


def nearest(entries: list[dict], dtype: str, layout: str, shape, allowed: dict[str, Rung],
            gpu_name: str | None = None, precision: str | None = None,
            max_distance: float = MAX_DISTANCE) -> tuple[dict, float] | None:
    """The entry nearest to ``shape`` among those of ``dtype`` whose rung is in ``allowed`` and whose
    configuration it accepts (of GPU ``gpu_name`` when given and the entry names one), preferring
    the layout class ``layout``; None when there is none within ``MAX_DISTANCE``."""
    cands = [e for e in entries if _usable(e, dtype, allowed, precision) and _thin_covers(e, shape, allowed)
             and (gpu_name is None or e.get("gpu_name") in (None, gpu_name))]
    return _closest(cands, layout, shape, max_distance)


def _closest(cands: list[dict], layout: str, shape, max_distance: float) -> tuple[dict, float] | None:
    """The candidate entry nearest to ``shape``, of layout ``layout`` where one is, within ``max_distance``."""
    same = [e for e in cands if e.get("layout", layout) == layout] or cands
    if not same:
        return None
    best = min(same, key=lambda e: distance(e["shape"], shape))
    d = distance(best["shape"], shape)
    return (best, d) if d <= max_distance else None


def grouped_entry(rung: Rung, dtype: str, layout: str, shape, gpu_name: str | None,
                  precision: str | None = None) -> tuple[dict, float] | None:
    """The tuned entry of a grouped rung nearest to ``shape`` (G, T, N, K) in log2 space, within
    ``MAX_DISTANCE``, of ``dtype`` (the study's: with its precision where that is not the dtype's
    own, "fp8:fp8_fast") and this GPU (``gemmlab tune wgmma_grouped --shape GxTxNxK`` exports it:
    tune/export.py), preferring ``layout``; its configuration one the rung accepts in ``precision``.
    The group sizes of a tuned shape are one routing of its tokens; a call's own differ."""
    cands = []
    for e in read_table(tuned_path()):
        if (e.get("rung") != rung.slug or e.get("dtype") != dtype or len(e.get("shape") or ()) != 4
                or e.get("gpu_name") not in (None, gpu_name)):
            continue
        try:
            rung.config(e.get("config") or {}, precision)
        except (ValueError, TypeError):
            continue
        cands.append(e)
    return _closest(cands, layout, shape, MAX_DISTANCE)


def _from_table(problem: GemmProblem, device, source: str, precision: str | None = None,
                max_distance: float = MAX_DISTANCE) -> Choice | None:
    """The nearest entry of ``source`` for the problem's dtype or its stand-in (dtypes.py): the
    stand-in's only when strictly nearer. (Own entries first, whatever their distance, let one
    fp16 entry at 1024x4096x4096 take 1024x6144x4096 from bf16's entry for that very shape, and
    run it well behind the bf16 entry: h100_llm_suite_fp16_standin.json.)"""
    kp = problem.kernel_view()
    allowed = {r.slug: r for r in for_dtype(problem.dtype, device.arch, precision, out=problem.out_dtype)}
    layout = layout_of(kp)
    entries, gpu = _table(source, device)
    stand_in = dtypes.get(problem.dtype).stand_in
    hit, dtype = None, problem.dtype
    for dt in (problem.dtype,) + ((stand_in,) if stand_in else ()):
        # the stand-in's entries in its own precision when the problem asks for its dtype's own
        # ("fp16" for fp16: the bench names it), the precision asked for otherwise
        prec = precision if dt == problem.dtype or precision not in (None, problem.dtype) else None
        h = nearest(entries, dt, layout, (kp.M, kp.N, kp.K), allowed, gpu, prec, max_distance)
        if h is not None and (hit is None or h[1] < hit[1]):
            hit, dtype = h, dt
    if hit is None:
        return None
    e, d = hit
    shape = "x".join(map(str, e["shape"]))
    why = f"nearest {source} shape {shape} ({e.get('layout', 'any')} layout, distance {d:.2f})"
    if dtype != problem.dtype:
        why += f", a {dtype} entry standing in for {problem.dtype} (the same kernels and tensor-core rate)"
    return _entry_choice(e, allowed[e["rung"]], problem, precision, source, why)


def _table(source: str, device) -> tuple[list[dict], str | None]:
    """The entries of a table ("tuned": this machine's export, of the device's architecture;
    "defaults": the shipped one) and the GPU its entries must name, if any (None: any)."""
    if source == "tuned":
        return [e for e in read_table(tuned_path()) if e.get("arch") == device.arch], device.name
    return read_table(defaults_path(device.arch)), None


def _entry_choice(e: dict, rung: Rung, problem: GemmProblem, precision: str | None, source: str, why: str) -> Choice:
    """A table entry's configuration as a choice for ``problem``: without a split where the row
    tiles need grid.z (the split takes it)."""
    cfg = rung.config(e.get("config") or {}, own_precision(rung, problem.dtype, precision))
    if cfg.get("SPLITK", 1) > 1 and -(-problem.kernel_view().M // cfg["BM"]) > MAX_GRID_Y:
        cfg["SPLITK"] = 1
        why += "; SPLITK=1: the row tiles need grid.z"
    return Choice(rung, cfg, source, why, e)


def layout_of(kp) -> str:
    return ("c" if kp.a_col else "r") + ("c" if kp.b_col else "r")


def tuned_exactly(problem: GemmProblem, device, precision: str | None = None) -> bool:
    """Whether this GPU's tuned table holds an entry of exactly this problem (the kernel view's
    shape and layout, the dtype in the precision) whose rung may run: on-line tuning leaves it be."""
    kp = problem.kernel_view()
    allowed = {r.slug: r for r in for_dtype(problem.dtype, device.arch, precision, out=problem.out_dtype)}
    shape, layout = [kp.M, kp.N, kp.K], layout_of(kp)
    return any(e.get("arch") == device.arch and e.get("gpu_name") in (None, device.name) and list(e.get("shape") or ())
               == shape and e.get("layout", layout) == layout and _usable(e, problem.dtype, allowed, precision)
               for e in read_table(tuned_path()))


NEAREST_PER_TABLE = 2   # candidates from each table: its nearest entries, whatever their distance
MODEL_CANDIDATES = 2    # and the selection model's fastest predicted options


def candidates(problem: GemmProblem, device, precision: str | None = None, limit: int = 4) -> list[Choice]:
    """Distinct configurations for on-line tuning to measure (core/autotune.py), best guess first:
    auto's own choice (for rung 24 also with twice its warps along K and half its slices), the
    selection model's ``MODEL_CANDIDATES`` fastest predicted options, the rule's, the rule's
    without the thin rungs, the light launch (no tensor maps, no persistent
    grid, no copies), then the ``NEAREST_PER_TABLE`` nearest entries of the tuned and the shipped
    tables (of the dtype, any distance); each with its packing decided; at most ``limit``."""
    kp = problem.kernel_view()
    allowed = {r.slug: r for r in for_dtype(problem.dtype, device.arch, precision, out=problem.out_dtype)}
    layout = layout_of(kp)
    out = [decide(problem, "auto", None, device, precision)]
    if out[0].rung.thin and "WK" in out[0].rung.params:     # rung 24: twice the warps along K, half the slices
        cfg = dict(out[0].config, WK=2 * out[0].config["WK"], BK=2 * out[0].config["BK"])
        cfg["SPLITK"] = max(1, cfg["SPLITK"] // 2)
        cfg["SKCLUSTER"] = cfg["SKCLUSTER"] if cfg["SPLITK"] > 1 else 0
        if not out[0].rung.check_config(cfg, precision):
            out.append(Choice(out[0].rung, cfg, "rule", out[0].reason + f"; WK={cfg['WK']}, SPLITK={cfg['SPLITK']}"))
    out += [c for c, _ in selection.rank(problem, device, precision)[:MODEL_CANDIDATES]]
    out += [with_packing(rule(problem, device.arch, device.sm_count, precision, thin), problem, device.sm_count, precision)
            for thin in (True, False)]
    # the light launch: the highest rung with neither tensor maps nor a persistent grid (rung 17 for
    # 16-bit, 18 for FP32), the rule's tile and split, no operand copies: no per-call host setup
    light = [r for r in for_dtype(problem.dtype, device.arch, precision, thin=False, out=problem.out_dtype) if not r.tensor_maps and not r.persistent]
    if light:
        cfg, why = rule_config(light[-1], kp.M, kp.N, kp.K, device.sm_count, own_precision(light[-1], problem.dtype, precision))
        cfg = dict(cfg, PACK=0) if "PACK" in light[-1].params else cfg
        out.append(Choice(light[-1], cfg, "rule", f"the light launch, {light[-1].slug}: {why}"))
    for source in ("tuned", "defaults"):
        usable = [e for e in _table(source, device)[0]
                  if _usable(e, problem.dtype, allowed, precision) and _thin_covers(e, (kp.M, kp.N, kp.K), allowed)]
        usable.sort(key=lambda e: (e.get("layout", layout) != layout, distance(e["shape"], (kp.M, kp.N, kp.K))))
        for e in usable[:NEAREST_PER_TABLE]:
            why = f"{source} shape {'x'.join(map(str, e['shape']))} ({e.get('layout', 'any')} layout)"
            out.append(with_packing(_entry_choice(e, allowed[e["rung"]], problem, precision, source, why), problem,
                                    device.sm_count, precision))
    seen, distinct = set(), []
    for c in out:
        key = (c.rung.slug, json.dumps(c.config, sort_keys=True, default=str))
        if key not in seen:
            seen.add(key)
            distinct.append(c)
    return distinct[:limit]


def decide(problem: GemmProblem, kernel: str = "auto", config=None, device=None,
           precision: str | None = None) -> Choice:
    """The rung and configuration to run (see the module docstring). ``device``: the DeviceInfo
    of the problem's GPU (``auto`` needs it; a named rung does not)."""
    if kernel != "auto" or config is not None or device is None:
        rung = choose(problem, kernel, None if device is None else device.arch, precision)
        why = f"kernel={kernel!r}" if kernel != "auto" else "the top rung for the dtype"
        choice = Choice(rung, config, "named" if kernel != "auto" else "rule",
                        why + (", config given" if config is not None else ", its default config"))
    else:
        choice = (_from_table(problem, device, "tuned", precision)
                  or _from_table(problem, device, "defaults", precision, DEFAULTS_NEAR)
                  or selection.choose(problem, device, precision)
                  or _from_table(problem, device, "defaults", precision)
                  or rule(problem, device.arch, device.sm_count, precision))
        if choice.source != "model":   # a model option's copies were decided with it (and measured so)
            choice = with_packing(choice, problem, device.sm_count, precision)
    if LOG_DISPATCH:
        log.warning("gemmlab dispatch: %s %dx%dx%d -> %s", problem.dtype, problem.M, problem.N, problem.K, choice)
    return choice
