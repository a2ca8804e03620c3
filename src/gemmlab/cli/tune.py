"""``gemmlab tune``: search a rung's tile parameters on this GPU; ``--show`` prints the stored
results (no GPU needed). See ``gemmlab.tune``."""

from __future__ import annotations

import os
import sys
from dataclasses import replace

from ..core.deps import require, require_all
from ..core.registry import get as get_rung
from ..core.shapes import SUITE_FORMS, parse_shape, suite
from .common import UsageError, add_dtype, add_lib, add_precision, add_timing, checked, suite_name, timing_settings


def register(sub) -> None:
    from ..tune.strategies import STRATEGIES

    p = sub.add_parser(
        "tune", help="search a rung's tile parameters on this GPU; results kept in a database (--show prints them)",
        description="Search the tile parameters of a rung (the registry's space, pruned by its constraints before "
                    "anything compiles): candidates compile in parallel, are verified, then timed by the timing "
                    "engine beside cuBLAS and the peers. Failures (compile errors, spills, wrong results) and "
                    "candidates 3x slower than the best so far are recorded with the reason. Every result goes to a "
                    "database (SQLite in the cache folder by default), one study per GPU, driver, NVRTC and "
                    "gemmlab version, rung, dtype, layout and shape; an interrupted run resumes and nothing is "
                    "measured twice. Needs the tune extra (pip install \"gemmlab[tune]\").")
    p.add_argument("rung", metavar="RUNG", help="rung slug or number; auto: measure the selection menu on a tuning "
                                                "sample (--sample) and write what kernel=\"auto\" predicts from")
    p.add_argument("--shape", default=None, type=checked(_shape_form),
                   help="N, N^3 or MxNxK; for the grouped rungs (wgmma_grouped, wgmma_grouped_fp8) GxTxNxK: G "
                        "experts, T tokens routed unevenly as bench --suite moe routes them (required unless --show "
                        "or --suite)")
    p.add_argument("--suite", type=suite_name, default=None, metavar="SUITE",
                   help=f"tune every shape of a benchmark suite (core/shapes.py), one after the other: {SUITE_FORMS}")
    p.add_argument("--emit-defaults", dest="emit_defaults", metavar="FILE", default=None,
                   help="after tuning, merge the best configuration per shape (across every rung tuned in the "
                        "database for these shapes on this GPU) into the dispatch table FILE, e.g. "
                        "src/gemmlab/data/defaults_sm90.json")
    add_dtype(p, None, "default: the rung's first dtype")
    add_precision(p)
    p.add_argument("--layout", default="rr", choices=("rr", "rc", "cr", "cc"),
                   help="A and B: r row-major, c column-major (C row-major; default rr)")
    p.add_argument("--strategy", default="auto", choices=STRATEGIES,
                   help="auto: exhaustive when the pruned space fits the budget (or is small), else tpe (default auto)")
    lim = p.add_mutually_exclusive_group()
    lim.add_argument("--budget", type=int, default=None, metavar="N", help="evaluate at most N candidates in this run")
    lim.add_argument("--time", type=float, default=None, metavar="S", help="stop asking for candidates after S seconds")
    p.add_argument("--start", action="append", default=[], metavar="CONFIG",
                   help="a configuration to measure first (a preset name, KEY=VALUE[,KEY=VALUE...] or a JSON object, "
                        "the rest at the rung's defaults); repeatable, each one a separate point; they come before "
                        "the built-in starting points (defaults, presets, the dispatch rule's and the tables' choices); "
                        "the exhaustive strategy measures them among all the others")
    p.add_argument("--devices", default="0", metavar="all|0,1", type=checked(_device_form),
                   help="GPUs: one worker process each, on one study (default 0)")
    p.add_argument("--storage", default=None, metavar="URL",
                   help="database URL (default sqlite:///<cache dir>/tune.db; postgresql://... shares it between hosts)")
    p.add_argument("--show", action="store_true",
                   help="print the stored results (every matching study) and exit; with none stored, the shipped "
                        "table's entries of the rung that kernel=\"auto\" reads (for --arch) and where it looked")
    p.add_argument("--arch", default=None,
                   help="with --show: whose shipped table (default: this machine's GPU's, without one sm_90a)")
    p.add_argument("--top", type=int, default=30, metavar="N", help="rows of measured configurations shown (0: all)")
    p.add_argument("--sampler-seed", dest="tune_seed", type=int, default=None, help="the strategy's seed (repeatable proposals)")
    p.add_argument("--batch", type=int, default=None, help="candidates compiled together (default: CPUs per device, at most 8)")
    p.add_argument("--jobs", "-j", type=int, default=None, help="compile processes per device (default: CPUs / devices)")
    p.add_argument("--peers", default=None, metavar="NAMES", help="peers timed beside (cublas,triton; default all usable)")
    add_lib(p)
    add_timing(p)
    p.add_argument("--json", metavar="FILE", default=None, help="write the run's summary and every record to FILE")
    auto = p.add_argument_group("tune auto (the selection model, core/selection.py)")
    auto.add_argument("--sample", default="300@0", metavar="N@SEED",
                      help="the tuning sample: N random shapes from SEED, every second one aligned, B row- and "
                           "column-major by pairs, then the dtype's suites (default 300@0; the bench's held-out "
                           "sample is random:48@1)")
    auto.add_argument("--no-suites", dest="suites", action="store_false", help="the random shapes only")
    auto.add_argument("--emit-selection", dest="emit_selection", metavar="FILE", default=None,
                      help="merge the measurements into the selection file FILE (e.g. "
                           "src/gemmlab/data/selection_sm90.json.gz; another GPU of the architecture: "
                           "selection_sm90_<gpu>.json.gz; a name ending in .gz is written gzipped); records of the "
                           "same dtype, shape and layout are replaced")
    auto.add_argument("--replay", metavar="FILE", default=None,
                      help="no GPU: the model's leave-one-out choices over a selection file's records, against the "
                           "best measured option and cuBLAS")
    auto.add_argument("--heldout", metavar="FILE", default=None,
                      help="with --replay: instead, its choices for the shapes of FILE (a tune auto run's JSON, "
                           "e.g. of --suite random:48@1), predicted from the selection file's records alone")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar on stderr")
    p.set_defaults(func=run)


def _shape_form(text: str) -> tuple[int, ...]:
    """A shape of ``--shape``: parse_shape's forms, or the grouped rung's GxTxNxK."""
    if text.strip().lower().count("x") == 3:
        try:
            dims = tuple(int(x) for x in text.strip().lower().split("x"))
        except ValueError:
            dims = ()
        if len(dims) != 4 or min(dims) < 1:
            raise ValueError(f"shape {text!r} is not GxTxNxK with every dimension >= 1 (e.g. 8x4096x14336x4096)")
        return dims
    return parse_shape(text)


def _device_form(text: str) -> tuple[int, ...] | None:
    """``--devices``' form: None for all, else the ordinals (ValueError when neither)."""
    if text.strip() == "all":
        return None
    try:
        out = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"give 'all' or GPU ordinals such as 0,1; got {text!r}") from None
    if not out:
        raise ValueError("no GPU named")
    return out


def _devices(text: str) -> tuple[int, ...]:
    out = _device_form(text)
    if out is None:
        from ..core.driver import cuda, check

        return tuple(range(int(check(cuda().cuDeviceGetCount(), "cuDeviceGetCount"))))
    return out


def _show(args) -> int:
    from ..core.registry import get
    from ..tune import table
    from ..tune.runner import TuneSpec
    from ..tune.store import documents

    key_dtype = TuneSpec(args.rung, (1, 1, 1), args.dtype, precision=args.precision).key_dtype if args.dtype else None
    match = {"rung": get(args.rung).slug, "dtype": key_dtype, "layout": args.layout,
             "shape": "x".join(map(str, _shape_form(args.shape))) if args.shape else None}
    docs = documents(args.storage, **match)
    if not docs:
        return _show_shipped(args, match)
    for doc in docs:
        table.render(doc, args.top or None)
    return 0


def _show_shipped(args, match: dict) -> int:
    """No local results: say where the command looked, then the shipped table's entries of the rung
    (the defaults kernel="auto" reads) for --arch, this GPU's architecture, or sm_90a."""
    from rich.console import Console
    from rich.table import Table

    from ..core.arch import OFFLINE_ARCH, normalize_arch
    from ..core.dispatch import defaults_path, read_table
    from ..core.driver import device_info, gpu_available
    from ..tune.store import default_url

    what = ", ".join(f"{k} {v}" for k, v in match.items() if v)
    print(f"no tuning results for {what} in {args.storage or default_url()}")
    arch = normalize_arch(args.arch) if args.arch else (device_info(0).arch if gpu_available() else OFFLINE_ARCH)
    path = defaults_path(arch)
    entries = [e for e in read_table(path) if e.get("rung") == match["rung"]
               and (match["dtype"] is None or e.get("dtype") == match["dtype"])
               and (match["layout"] is None or e.get("layout", match["layout"]) == match["layout"])
               and (match["shape"] is None or "x".join(map(str, e.get("shape", ()))) == match["shape"])]
    if not entries:
        print(f"gemmlab tune: nor has the shipped table {path} an entry for {what}", file=sys.stderr)
        return 1
    t = Table(title=f"shipped table {path.name} ({arch}): what kernel=\"auto\" reads for {match['rung']}")
    for col in ("dtype", "shape", "layout", "config", "TFLOP/s", "vs cuBLAS"):
        t.add_column(col, overflow="fold")
    for e in entries:
        cfg = ",".join(f"{k}={v}" for k, v in (e.get("config") or {}).items())
        t.add_row(e.get("dtype", ""), "x".join(map(str, e.get("shape", ()))), e.get("layout", "any"), cfg,
                  f"{e['tflops']:.1f}" if e.get("tflops") else "", f"{e['vs_cublas']:.2f}x" if e.get("vs_cublas") else "")
    Console().print(t)
    return 0


def _shapes(args) -> list[tuple[int, int, int]]:
    shapes = list(suite(args.suite)) if args.suite else []
    if args.shape is not None:
        shapes.append(_shape_form(args.shape))
    if not shapes:
        raise UsageError("--shape or --suite is required (e.g. --shape 4096 or 4096x4096x1024, --suite fp32)")
    return shapes


def _tune_one(args, spec, devices) -> dict:
    """One shape: the run, its summary line and table; returns the summary."""
    from ..tune import table
    from ..tune.gpu import GpuFactory
    from ..tune.runner import tune

    peers = tuple(s.strip() for s in args.peers.split(",") if s.strip()) if args.peers else None
    jobs = args.jobs or max(1, (os.cpu_count() or 1) // len(devices))
    if get_rung(spec.rung).grouped:   # a mixture-of-experts layer through grouped_mm (tune/grouped.py)
        from ..tune.grouped import GroupedFactory

        factory = GroupedFactory(spec.dtype, spec.shape, spec.layout, timing_settings(args), jobs,
                                 precision=spec.precision)
    else:
        factory = GpuFactory(spec.rung, spec.dtype, spec.shape, spec.layout, timing_settings(args), args.lib, peers,
                             jobs, spec.precision)
    summary = tune(spec, factory, progress=args.progress and sys.stderr.isatty())
    print(f"{summary['study']}\nstrategy {summary['strategy']}, {summary['candidates']} candidates of "
          f"{summary['space_size']} after pruning; this run evaluated {summary['evaluated']} "
          f"({', '.join(f'{v} {k}' for k, v in summary['counts'].items()) or 'none'}); stopped: {summary['stopped']}; "
          f"storage {summary['storage']}")
    table.render(summary["document"], args.top or None)
    return summary


def run(args) -> int:
    if args.rung == "auto":
        from .tune_auto import run as run_auto

        return run_auto(args)
    require("optuna")    # the tune extra: named before anything else
    if args.show:
        return _show(args)
    shapes = _shapes(args)
    require_all("cuda.bindings.driver")
    from ..bench.results import write_json
    from ..core import driver
    from ..tune.export import emit_defaults, export_tuned
    from ..tune.runner import TuneSpec

    specs = [TuneSpec(args.rung, s, args.dtype, args.layout, args.strategy, args.budget, args.time, args.batch,
                      args.tune_seed, args.storage, precision=args.precision, starts=tuple(args.start)).checked()
             for s in shapes]   # bad arguments first, no GPU
    if not driver.gpu_available():
        raise driver.NoGPUError("gemmlab tune measures on a GPU; gemmlab tune --show reads stored results without one")
    devices = _devices(args.devices)
    summaries = [_tune_one(args, replace(spec, devices=devices).checked(), devices) for spec in specs]
    exported = export_tuned(args.storage)
    if exported is not None:
        print(f"kernel=\"auto\" now reads the best configurations from {exported}")
    if args.emit_defaults:
        # key_dtype: a tf32 tune's studies and entries are filed under "fp32:tf32" (precision.label)
        table = emit_defaults(args.emit_defaults, summaries[0]["key"], specs[0].key_dtype, shapes, args.storage)
        print(f"wrote {args.emit_defaults} ({len(table['entries'])} entries)")
    if args.json:
        print(f"wrote {write_json(summaries[0] if len(summaries) == 1 else {'runs': summaries}, args.json)}")
    return 1 if any(s["worker_failures"] for s in summaries) else 0
