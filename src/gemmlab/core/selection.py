"""The selection model: ``kernel="auto"``'s choice for a shape no table holds, predicted from
configurations measured on a broad random sample of shapes (issue 40).

The menu
--------
For each dtype family a short menu of **options** (``MENUS``), each a way to configure one rung
for any problem: a tile, a split policy (the rule's ``rules.split_for``, one that fills the waves,
one that cuts a small problem's K over the SMs its tiles leave idle, or none), stream-K where the
rung has it, and a copy policy (the rule's estimate, never, always).
For 16-bit: rung 21's tiles, rung 19's (with a K split through the workspace or summed in a
cluster, and tiles 64 wide along a skinny C's shorter side), rung 17's 64x64 (also 6 stages deep,
or with K split in a cluster) and 128x128 (no tensor maps, no persistent grid, no copies), rung
16's 32x32 for tiny problems and rung 24's own rule (operands without 16-byte access included: its
4-byte pair loads); for FP32 rung 18's tiles (its 32x32 one also with K split in a cluster) and rung
23's rule. An option that does not apply to a problem (a thin rung for a wide one) gives None.

The measurements
----------------
``gemmlab tune auto`` (tune/selection.py) times every option on each shape of a tuning sample on
one GPU and ships them in ``data/selection_sm<NN>.json.gz`` (the architecture's reference GPU; other
GPUs of it in ``data/selection_sm<NN>_<gpu>.json.gz``, ``table_for``): per shape its dtype, kernel-view shape,
layout, the operands' 16-byte access, each option's median time and tile (BM, BN, split, copies).

The prediction
--------------
An option's time at a new shape is its **cost model** (``estimate``: waves of output tiles at the
rung's speed per SM, aligned or, where it reads an operand without 16-byte access itself,
unaligned; the bytes at the copy rate; fixed costs per launch, split reduction and copy) times a **correction** learned from the measured shapes nearest to it: the weighted
geometric mean of measured / estimated over the ``NEIGHBOURS`` nearest shapes where the option
ran (weights ``WEIGHT_EPS``, ``WEIGHT_POWER``), by ``Model.distances`` (log2 of M, N, K; a
mismatch of an operand's 16-byte access (A, B, C) or of a layout counts as ``ALIGN_WEIGHT`` or
``LAYOUT_WEIGHT`` octaves; the rungs of ``SAME_ACCESS`` only from shapes of the same access). The
model thus carries the wave
quantization and tile padding of the new shape itself (the estimate computes them exactly) while
the neighbours supply what the estimate misses (a rung's speed at that size, an unaligned path's
cost). The option of the smallest predicted time is chosen; ``Choice.reason`` gives the
prediction, the runner-up and the nearest measured shape. Deterministic for a stored table.
"""

from __future__ import annotations

import gzip
import json
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from . import dtypes, packing, rules
from .arch import arch_number
from .problem import GemmProblem
from .registry import MAX_GRID_Y, for_dtype, get
from .splitk import CLUSTER_ARCH, MAX_SPLITK_CLUSTER
from .rules import (ALIGNED_TFLOPS, COPY_BYTES_PER_S, MIN_SLICE_K, PACK_LAUNCH_S, UNALIGNED_SLOWDOWN, Choice, clustered,
                    own_precision, rule_config, split_for, thin_choice, with_packing)

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
NEIGHBOURS = 8          # measured shapes that correct an option's estimate
ALIGN_WEIGHT = 2.0      # octaves a mismatched 16-byte access of A or B counts as
LAYOUT_WEIGHT = 1.0     # octaves a mismatched layout of A or B counts as
# a neighbour's weight 1 / (WEIGHT_EPS + distance)^WEIGHT_POWER: a shape measured itself (distance
# 0) outweighs the rest, and the nearer of the others count more (chosen by leave-one-out over the
# tuning sample, never by the held-out one: tools in tune/selection.py)
WEIGHT_EPS = 0.05
WEIGHT_POWER = 2.0
MAX_FEATURE_DISTANCE = 4.0   # no prediction from shapes farther (two operands' alignment differing: 2.8)
# rungs whose options are predicted only from shapes measured with the same 16-byte access of A and
# B: rung 24 streams its operands through another load path without it (16-byte loads, 4-byte
# pairs, two words per pair), so an aligned shape says nothing of an unaligned one's time
SAME_ACCESS = frozenset({"decode"})
LAUNCH_S = 2.5e-6       # a launch's fixed cost on the stream (the estimate's; the neighbours correct it)
REDUCE_S = 2.5e-6       # a workspace split's reduction launch


# ---- the menu -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Option:
    name: str
    what: str
    build: Callable[[GemmProblem, object, str | None], Choice | None]   # (problem, device, precision)


def _wave_split(cfg, M: int, N: int, K: int, sm_count: int) -> int:
    """The split of K (1 to 8, slices of at least ``rules.MIN_SLICE_K``) whose blocks fill their
    waves best: the smallest s minimizing ceil(tiles * s / SMs) / s (206x7368 in 128x256 tiles: 58
    tiles, s = 2 runs 116 blocks in one wave at half the K each)."""
    tiles = -(-M // cfg["BM"]) * -(-N // cfg["BN"])
    top = max(1, min(8, K // MIN_SLICE_K))
    return min(range(1, top + 1), key=lambda s: (-(-tiles * s // sm_count) / s, s))


CHAIN_SLICE_TILES = 2   # k tiles per slice of a chain split at least: below, the reduction outweighs the slice


def _chain_split(cfg, M: int, N: int, K: int, sm_count: int) -> int:
    """The split of K for a problem of few tiles, summed in a cluster: as many slices as the SMs
    the tiles leave idle take (SMs // tiles), at most ``MAX_SPLITK_CLUSTER`` (the portable cluster
    size) and each at least ``CHAIN_SLICE_TILES`` k tiles long. Why not ``rules.split_for``'s slices
    of ``MIN_SLICE_K``: that limit weighs a workspace split's second launch and round trip of C;
    a cluster's slices meet in shared memory, so a K of a few hundred is worth cutting when each
    tile's k tiles are one chain of memory latencies on one SM (1 x 57 x 148: five k tiles of 32)."""
    tiles = -(-M // cfg["BM"]) * -(-N // cfg["BN"])
    return max(1, min(MAX_SPLITK_CLUSTER, sm_count // max(tiles, 1), K // (CHAIN_SLICE_TILES * cfg["BK"])))


# rung 18's tile for tiny problems: not one of its presets, which its rule weighs for skinny problems
SIMT_TINY = {"BM": 32, "BN": 32, "BK": 16, "WM": 16, "WN": 32, "TM": 4, "TN": 4, "STAGES": 3}


def _tiled(slug: str, preset: str | dict | Callable | None, pack: str, split: str = "rule", cluster: bool = False,
           **extra: int) -> Callable:
    """An option of rung ``slug``: its ``preset`` tile (a preset's name or a configuration, or a
    function of the kernel-view problem giving one; None: the rule's tile, half tile and split)
    with ``split`` "rule" (rules.split_for: only where the tiles leave more than half of the SMs
    idle), "waves" (``_wave_split``), "chain" (``_chain_split``; the option applies only where it
    splits) or "none"; ``cluster``: a split's slices summed in a thread-block cluster (SKCLUSTER=1:
    no workspace, no reduction launch; sm_90 and newer); the switches ``extra`` (STREAMK=1); and
    packing decided by ``pack``: "estimate" (rules.with_packing), "never" (PACK=0) or "always"
    (PACK=1; the option applies only where an operand lacks 16-byte access)."""
    def build(problem: GemmProblem, device, precision: str | None) -> Choice | None:
        rung = get(slug)
        if rung not in for_dtype(problem.dtype, device.arch, precision, thin=False, out=problem.out_dtype):
            return None
        kp = problem.kernel_view()
        if pack == "always" and (kp.vec_a and kp.vec_b or not _copies_fit(kp, problem.dtype)):
            return None
        if cluster and arch_number(device.arch) < CLUSTER_ARCH:
            return None
        own = own_precision(rung, problem.dtype, precision)
        if preset is None and split == "rule":
            cfg, why = rule_config(rung, kp.M, kp.N, kp.K, device.sm_count, own)
        else:
            cfg = rung.config(preset(kp) if callable(preset) else preset, own)
            why = f"{slug} {cfg['BM']}x{cfg['BN']} tiles"
            if "SPLITK" in rung.params and split != "none":
                s = {"rule": split_for, "waves": _wave_split, "chain": _chain_split}[split](cfg, kp.M, kp.N, kp.K,
                                                                                          device.sm_count)
                if s > 1:
                    cfg = dict(cfg, SPLITK=s, **({"SKCLUSTER": 1} if cluster else {}))
                    why += f", split-K {s}" + (" summed in a cluster" if cluster else "")
                elif split == "chain":
                    return None   # nothing to cut: the option would be its tile's unsplit one
            cfg, why = clustered(cfg, why, kp.M)
        if extra:
            cfg = dict(cfg, **extra)
            why += ", " + ", ".join(f"{k}={v}" for k, v in extra.items())
            if rung.check_config(cfg, own):
                return None
        if -(-kp.M // cfg["BM"]) > MAX_GRID_Y and cfg.get("SPLITK", 1) > 1:
            cfg = {k: v for k, v in dict(cfg, SPLITK=1).items() if k != "SKCLUSTER"}
        choice = Choice(rung, cfg, "model", why)
        if "PACK" not in rung.params:
            return choice
        if pack == "estimate":
            return with_packing(choice, problem, device.sm_count, precision)
        return Choice(rung, dict(cfg, PACK=int(pack == "always")), "model", why)
    return build


def _copies_fit(kp, dtype: str) -> bool:
    """Whether the copies of ``kp``'s operands without 16-byte access fit the workspace auto may
    take (``rules.copies_fit``, as ``rules.with_packing`` weighs them)."""
    try:
        return rules.copies_fit(packing.plan_packs(kp, dtype))
    except ValueError:
        return False


# rung 17's 64x64 tile with 6 stages (not a preset: the rule would weigh it for every problem)
MMA_DEEP = {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32, "STAGES": 6}


# rung 19's tiles 64 wide along a skinny C's shorter side (not presets: the rule would weigh them
# for every skinny problem), 8 stages in the shared memory a 128x128 tile's 6 take
WGMMA_SKINNY = {"N": {"BM": 128, "BN": 64, "BK": 64, "WM": 64, "STAGES": 8},
                "M": {"BM": 64, "BN": 128, "BK": 64, "WM": 64, "STAGES": 8}}


def _skinny_tile(kp) -> dict:
    """Rung 19's tile 64 wide along the kernel-view C's shorter side."""
    return WGMMA_SKINNY["N" if kp.N <= kp.M else "M"]


def _thin_option(problem: GemmProblem, device, precision: str | None) -> Choice | None:
    """The thin rung's rule, operands without 16-byte access included (rung 24 reads them by 4-byte
    pairs; its predictions come only from shapes measured with the same access, ``SAME_ACCESS``)."""
    return thin_choice(problem.kernel_view(), problem.dtype, device.arch, device.sm_count, precision,
                       problem.out_dtype, unaligned=True)


MENUS: dict[str, tuple[Option, ...]] = {
    "16bit": (
        Option("ws", "rung 21, the rule's tile and clusters, copies by estimate", _tiled("wgmma_ws", None, "estimate")),
        Option("ws_128", "rung 21, 128x128 tiles, copies by estimate", _tiled("wgmma_ws", "128x128", "estimate")),
        Option("tma", "rung 19, the rule's tile and split, copies by estimate", _tiled("wgmma_tma", None, "estimate")),
        Option("tma_128", "rung 19, 128x128 tiles and the rule's split, copies by estimate",
               _tiled("wgmma_tma", "128x128", "estimate")),
        Option("tma_copy", "rung 19, the rule's tile and split, unaligned operands copied",
               _tiled("wgmma_tma", None, "always")),
        Option("tma_waves", "rung 19, 128x256 tiles, K split to fill the waves, copies by estimate",
               _tiled("wgmma_tma", "128x256", "estimate", "waves")),
        Option("tma_128_waves", "rung 19, 128x128 tiles, K split to fill the waves, copies by estimate",
               _tiled("wgmma_tma", "128x128", "estimate", "waves")),
        Option("tma_cluster", "rung 19, 128x128 tiles, K split to fill the waves and summed in a cluster, copies by estimate",
               _tiled("wgmma_tma", "128x128", "estimate", "waves", cluster=True)),
        Option("tma_64_cluster", "rung 19, tiles 64 wide along C's shorter side (128x64 or 64x128: a skinny C's "
               "side of 64 or less fills them), K split to fill the waves and summed in a cluster, copies by estimate",
               _tiled("wgmma_tma", _skinny_tile, "estimate", "waves", cluster=True)),
        Option("ws_streamk", "rung 21, the rule's tile, the last wave split by k tiles (stream-K)",
               _tiled("wgmma_ws", "128x256", "estimate", "none", STREAMK=1)),
        Option("mma_64", "rung 17, 64x64 tiles and the rule's split, no copies", _tiled("mma_sync", "64x64", "never")),
        Option("mma_64_deep", "rung 17, 64x64 tiles 6 stages deep and the rule's split, no copies: five k tiles in "
               "flight for small problems that wait the memory's latency per k tile", _tiled("mma_sync", MMA_DEEP, "never")),
        Option("mma_64_cluster", "rung 17, 64x64 tiles, K split over the SMs the tiles leave idle and summed in a "
               "cluster, no copies: a small problem's k tiles in several short chains instead of one long one",
               _tiled("mma_sync", "64x64", "never", "chain", cluster=True)),
        Option("mma_128", "rung 17, 128x128 tiles and the rule's split, no copies",
               _tiled("mma_sync", "128x128", "never")),
        Option("wmma_32", "rung 16, 32x32 tiles of four 16x16 warps: many small blocks for tiny problems",
               _tiled("wmma", "32x32", "never", "none")),
        Option("thin", "the thin rung's rule (rung 24)", _thin_option),
    ),
    "fp32": (
        Option("simt", "rung 18, the rule's tile and split, copies by estimate", _tiled("async_simt", None, "estimate")),
        Option("simt_128", "rung 18, 128x128 tiles and the rule's split", _tiled("async_simt", "128x128", "never")),
        Option("simt_64", "rung 18, 64x64 tiles and the rule's split", _tiled("async_simt", "small", "never")),
        Option("simt_skinny", "rung 18, 32x128 tiles and the rule's split", _tiled("async_simt", "skinny", "never")),
        Option("simt_tall", "rung 18, 128x32 tiles and the rule's split", _tiled("async_simt", "tall", "never")),
        Option("simt_waves", "rung 18, 128x128 tiles, K split to fill the waves", _tiled("async_simt", "128x128", "never", "waves")),
        Option("simt_streamk", "rung 18, 128x256 tiles, the last wave split by k tiles (stream-K)",
               _tiled("async_simt", "128x256", "never", "none", STREAMK=1)),
        Option("simt_32", "rung 18, 32x32 tiles of two warps and the rule's split: many small blocks for tiny problems",
               _tiled("async_simt", SIMT_TINY, "never")),
        Option("simt_32_cluster", "rung 18, 32x32 tiles of two warps, K split over the SMs the tiles leave idle and "
               "summed in a cluster: a small problem's k tiles in several short chains instead of one long one",
               _tiled("async_simt", SIMT_TINY, "never", "chain", cluster=True)),
        Option("thin", "the thin rung's rule (rung 23)", _thin_option),
    ),
}


def family(dtype: str, precision: str | None) -> str | None:
    """The menu of a dtype computed in its own precision (None: no menu; TF32 and 3xTF32 keep the
    rule)."""
    if precision not in (None, dtypes.get(dtype).name):
        return None
    return {"fp16": "16bit", "bf16": "16bit", "fp32": "fp32"}.get(dtypes.get(dtype).name)


def options(problem: GemmProblem, device, precision: str | None = None) -> dict[str, Choice]:
    """Every option of the problem's menu that applies to it, by name (empty without a menu)."""
    fam = family(problem.dtype, precision)
    out: dict[str, Choice] = {}
    for opt in MENUS.get(fam, ()):
        c = opt.build(problem, device, precision)
        if c is not None:
            out[opt.name] = c
    return out


def tile_of(choice: Choice) -> list[int]:
    """[BM, BN, split, copies, cluster split]: what ``estimate`` reads of a configuration."""
    cfg = choice.config
    return [cfg["BM"], cfg["BN"], cfg.get("SPLITK", 1), int(bool(cfg.get("PACK"))), int(bool(cfg.get("SKCLUSTER")))]


# ---- the cost model -----------------------------------------------------------------------------
def estimate(slug: str, tile, shape, vec, itemsize: int, sm_count: int) -> float:
    """Seconds for rung ``slug`` with ``tile`` ([BM, BN, split, copies, cluster split]) on the
    kernel-view ``shape`` (M, N, K) whose operands have 16-byte access ``vec`` (A, B): the larger of
    the tensor work (waves of blocks, one per SM, each BM x BN x K/split at the rung's aligned
    speed per SM, or its unaligned speed, ``rules.UNALIGNED_SLOWDOWN``, where it reads an operand
    without 16-byte access itself) and the bytes (A, B and C once, the split's FP32 partials
    twice, the copies' read and write) at the copy rate, plus a launch, the split's reduction and
    the copies' launches. Why the unaligned speed: an option copies by an estimate, so its
    neighbours ran it copied at some shapes and not at others; with the aligned speed for both,
    their corrections mixed a factor of up to 8 (rungs 19 and 21) into one mean."""
    BM, BN, split, copies, cluster = tile
    M, N, K = shape
    rate = ALIGNED_TFLOPS.get(slug, ALIGNED_TFLOPS["mma_sync" if itemsize == 2 else "async_simt"]) * 1e12 / sm_count
    if not copies and not (vec[0] and vec[1]):
        rate /= UNALIGNED_SLOWDOWN.get(slug, 1.0)
    blocks = -(-M // BM) * -(-N // BN) * split
    work = -(-blocks // sm_count) * 2.0 * BM * BN * -(-K // split) / rate
    nbytes = itemsize * (M * K + K * N + M * N)
    fixed = LAUNCH_S
    if split > 1 and not cluster:
        nbytes += 8.0 * M * N * split
        fixed += REDUCE_S
    if copies:
        for rows, cols, ok in ((M, K, vec[0]), (K, N, vec[1])):
            if not ok:
                nbytes += 2.0 * itemsize * rows * cols
                fixed += PACK_LAUNCH_S
    return fixed + max(work, nbytes / COPY_BYTES_PER_S)


# ---- the measurements ---------------------------------------------------------------------------
_tables: dict[str, dict] = {}
_lock = threading.Lock()


SUFFIX = ".json.gz"   # the shipped selection files are gzipped JSON (a few MB as text)


def table_path(arch) -> Path:
    """The architecture's selection file, measured on its reference GPU (sm_90: the H100)."""
    return DATA_DIR / f"selection_sm{arch_number(arch)}{SUFFIX}"


_paths: dict[str, list[Path]] = {}


def table_paths(arch) -> list[Path]:
    """Every selection file of the architecture: its own first, then those measured on other GPUs
    of it (``selection_sm90_h200.json.gz``), by name; the folder is listed once per process."""
    base = table_path(arch)
    hit = _paths.get(str(base))
    if hit is None:
        stem = base.name[:-len(SUFFIX)] if base.name.endswith(SUFFIX) else base.stem
        hit = _paths[str(base)] = [base, *sorted(base.parent.glob(f"{stem}_*{SUFFIX}"))]
    return hit


def load(path: Path) -> dict:
    """A selection file's document, gzipped (a name ending in .gz) or not."""
    with (gzip.open(path, "rt") if path.name.endswith(".gz") else open(path)) as f:
        return json.load(f)


def store(path: Path, doc: dict) -> None:
    """Write a selection file, gzipped where its name ends in .gz (compact JSON; the gzip header
    carries no time, so the same measurements give the same bytes)."""
    text = json.dumps(doc, separators=(",", ":")) + "\n"
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(text)


def table_for(device) -> dict:
    """The measurements ``device`` takes: those measured on a GPU of its name (an H200 streams
    memory faster than the H100 with the same SMs, so the options' corrections differ), else the
    architecture's (``model_for`` still checks the SM count)."""
    docs = [read(p) for p in table_paths(device.arch)]
    name = getattr(device, "name", None)
    return next((d for d in docs if d and d.get("gpu_name") == name), docs[0])


def read(path: Path) -> dict:
    """The measurements of a selection file, read once per process ({} when absent or unreadable)."""
    key = str(path)
    hit = _tables.get(key)
    if hit is not None:
        return hit
    doc: dict = {}
    if path.is_file():
        try:
            doc = load(path)
            if not isinstance(doc.get("records"), list):
                doc = {}
        except (OSError, ValueError, AttributeError, EOFError):
            doc = {}
    with _lock:
        _tables[key] = doc
    return doc


def reload() -> None:
    with _lock:
        _tables.clear()
        _models.clear()
        _paths.clear()


def _vec3(shape, vec, itemsize: int) -> tuple[bool, bool, bool]:
    """16-byte access of A, B and C: C's as a dense row-major M x N of the kernel view has it
    where N is a whole number of vectors (records store A's and B's; the problem's own C may say
    otherwise, ``rank`` passes it)."""
    return bool(vec[0]), bool(vec[1]), bool(vec[2]) if len(vec) > 2 else shape[1] * itemsize % 16 == 0


def rung_of(record: dict, name: str) -> str | None:
    """The rung option ``name`` ran in a record (a run's document has whole configurations, the
    selection file the rung alone)."""
    if "rungs" in record:
        return record["rungs"].get(name)
    return ((record.get("configs") or {}).get(name) or {}).get("rung")


class Model:
    """The measurements of one dtype as arrays: each record's features and, per option, the log of
    measured over estimated time (NaN where the option did not run)."""

    def __init__(self, records: list[dict], itemsize: int, sm_count: int):
        self.records, self.itemsize, self.sm_count = records, itemsize, sm_count
        self.logs = np.array([[math.log2(max(1, x)) for x in r["shape"]] for r in records], dtype=float).reshape(-1, 3)
        self.layout = np.array([[ch == "c" for ch in r["layout"]] for r in records], dtype=bool).reshape(-1, 2)
        self.vec = np.array([_vec3(r["shape"], r["vec"], itemsize) for r in records], dtype=bool).reshape(-1, 3)
        names = sorted({n for r in records for n in (r.get("ms") or {})})
        self.correction = {}
        for name in names:
            col = np.full(len(records), np.nan)
            for i, r in enumerate(records):
                ms, tile = (r.get("ms") or {}).get(name), (r.get("tiles") or {}).get(name)
                slug = rung_of(r, name)
                if ms is not None and tile is not None and slug is not None:
                    col[i] = math.log(ms * 1e-3 / estimate(slug, tile, r["shape"], r["vec"], itemsize, sm_count))
            self.correction[name] = col

    def distances(self, shape, layout: str, vec) -> np.ndarray:
        """The distance of the module docstring from the problem to every record."""
        d2 = ((self.logs - np.log2(np.maximum(1, np.asarray(shape, dtype=float)))) ** 2).sum(axis=1)
        d2 += ALIGN_WEIGHT ** 2 * (self.vec != np.asarray(_vec3(shape, vec, self.itemsize))).sum(axis=1)
        d2 += LAYOUT_WEIGHT ** 2 * (self.layout != np.asarray([ch == "c" for ch in layout])).sum(axis=1)
        return np.sqrt(d2)

    def predict(self, name: str, slug: str, tile, shape, layout: str, vec, dist: np.ndarray | None = None,
                exclude: int | None = None) -> "Prediction | None":
        """Option ``name``'s predicted time at ``shape`` with ``tile`` (``tile_of``) of rung ``slug``
        (the module docstring), None where fewer than two measured shapes within
        ``MAX_FEATURE_DISTANCE`` ran it. ``exclude``: a record left out (leave-one-out)."""
        col = self.correction.get(name)
        if col is None:
            return None
        d = self.distances(shape, layout, vec) if dist is None else dist
        ok = ~np.isnan(col) & (d <= MAX_FEATURE_DISTANCE)
        if slug in SAME_ACCESS:
            ok &= (self.vec[:, :2] == np.asarray(_vec3(shape, vec, self.itemsize)[:2])).all(axis=1)
        if exclude is not None:
            ok[exclude] = False
        idx = np.flatnonzero(ok)
        if len(idx) < 2:
            return None
        idx = idx[np.lexsort((idx, d[idx]))][:NEIGHBOURS]      # nearest first, ties by record order
        w = 1.0 / (WEIGHT_EPS + d[idx]) ** WEIGHT_POWER
        own = estimate(slug, tile, shape, vec, self.itemsize, self.sm_count)
        seconds = own * math.exp(float((w * col[idx]).sum() / w.sum()))
        return Prediction(name, seconds, own, tuple((round(float(d[i]), 2), tuple(self.records[i]["shape"])) for i in idx))


@dataclass(frozen=True)
class Prediction:
    option: str
    seconds: float
    estimate: float
    neighbours: tuple          # (distance, record shape) of the records used, nearest first


_models: dict[tuple, tuple[dict, Model]] = {}


def model_for(doc: dict, dtype: str, device) -> Model | None:
    """The model of ``dtype``'s records (else its stand-in's, dtypes.py: the same kernels and
    rates) in ``doc`` when measured on a GPU of this architecture and SM count; built once."""
    if not doc or doc.get("arch") != device.arch or doc.get("sm_count") != device.sm_count:
        return None
    for dt in (dtype, dtypes.get(dtype).stand_in):
        key = (id(doc), dt)
        hit = _models.get(key)
        if hit is not None and hit[0] is doc:
            return hit[1]
        recs = [r for r in doc.get("records", []) if r.get("dtype") == dt]
        if recs:
            m = Model(recs, dtypes.get(dt).itemsize, device.sm_count)
            with _lock:
                _models[key] = (doc, m)   # the document held: its id stays its own
            return m
    return None


def choose(problem: GemmProblem, device, precision: str | None = None, doc: dict | None = None) -> Choice | None:
    """The menu's option of the smallest predicted time for ``problem`` on ``device`` (None where
    the dtype has no menu, nothing was measured for it on such a GPU, or no option can be
    predicted); its reason gives the prediction."""
    doc = table_for(device) if doc is None else doc
    ranked = rank(problem, device, precision, doc)
    if not ranked:
        return None
    (best, p), rest = ranked[0], ranked[1:]
    why = (f"selection model: option {p.option!r} predicted {p.seconds * 1e6:.1f} us (cost model "
           f"{p.estimate * 1e6:.1f} us, corrected by the {len(p.neighbours)} nearest shapes measured on "
           f"{doc.get('gpu_name', 'this GPU')}, the nearest {'x'.join(map(str, p.neighbours[0][1]))} at {p.neighbours[0][0]})")
    if rest:
        why += f"; next {rest[0][1].option!r} {rest[0][1].seconds * 1e6:.1f} us"
    return Choice(best.rung, best.config, "model", f"{why}; {best.reason}")


def rank(problem: GemmProblem, device, precision: str | None = None, doc: dict | None = None) -> list[tuple[Choice, Prediction]]:
    """Every predictable option for ``problem``, fastest predicted first."""
    if family(problem.dtype, precision) is None:
        return []
    model = model_for(table_for(device) if doc is None else doc, problem.dtype, device)
    if model is None:
        return []
    kp = problem.kernel_view()
    shape, layout, vec = (kp.M, kp.N, kp.K), ("c" if kp.a_col else "r") + ("c" if kp.b_col else "r"), (kp.vec_a, kp.vec_b, kp.vec_c)
    dist = model.distances(shape, layout, vec)
    out = []
    for name, choice in options(problem, device, precision).items():
        p = model.predict(name, choice.rung.slug, tile_of(choice), shape, layout, vec, dist)
        if p is not None:
            out.append((choice, p))
    out.sort(key=lambda cp: (cp[1].seconds, cp[1].option))
    return out
