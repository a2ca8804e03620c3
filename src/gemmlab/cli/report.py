"""``gemmlab report``: the measured worklog as HTML + Markdown (see ``gemmlab.report``)."""

from __future__ import annotations

import json
import os

from ..core.deps import require
from ..core.registry import landmarks
from ..core.shapes import BENCH_SHAPE, PROFILE_SHAPE, SWEEP_SIZES, fmt_shape, parse_shape
from ..report.collect import collect
from ..report.model import results_document
from ..report.render import build
from .common import add_dtype, add_lib, add_timing, checked, sizes, timing_settings


def register(sub) -> None:
    p = sub.add_parser("report", help="measure the whole ladder and write an HTML + Markdown worklog (GPU; --from-json without)")
    p.add_argument("--out", default="gemmlab-report", help="output folder (default: ./gemmlab-report)")
    add_dtype(p, "fp32")
    p.add_argument("--shape", default=fmt_shape(BENCH_SHAPE), type=checked(parse_shape), help=f"ladder shape: N, N^3 or MxNxK (default {fmt_shape(BENCH_SHAPE)})")
    p.add_argument("--profile-shape", default=fmt_shape(PROFILE_SHAPE), type=checked(parse_shape),
                   help=f"shape for the counters (default {fmt_shape(PROFILE_SHAPE)}: ncu replays each kernel)")
    p.add_argument("--sweep-sizes", default=",".join(map(str, SWEEP_SIZES)), type=checked(sizes),
                   help="square sizes of the size sweep, comma-separated")
    p.add_argument("--sweep-rungs", default=",".join(r.slug for r in landmarks()),
                   help="rungs of the size sweep (default: the ladder's landmarks; cuBLAS is always there)")
    p.add_argument("--rungs", default=None, help="comma-separated rungs (default: the whole ladder)")
    add_lib(p)
    add_timing(p)
    p.add_argument("--no-profile", action="store_true", help="skip Nsight Compute (no counters, no roofline)")
    p.add_argument("--no-inspect", action="store_true", help="skip the SASS inspection")
    p.add_argument("--ncu", default=None, help="path to ncu")
    p.add_argument("--tune-storage", default=None, metavar="URL",
                   help="tuning database for the tuning section (default: gemmlab tune's)")
    p.add_argument("--from-json", default=None, metavar="FILE", help="rebuild the page from saved results (no GPU)")
    p.set_defaults(func=run)


def load_results(path: str) -> dict:
    """The document of ``--from-json``: ValueError (one line, naming the file) when it is missing,
    unreadable, not JSON, or neither a report results document nor a benchmark result."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ValueError(f"no such file: {path}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    return results_document(doc, path)


def run(args) -> int:
    if args.from_json:
        require("matplotlib.figure")  # the figures: gemmlab[report], named before reading anything
        results = load_results(args.from_json)
    else:
        results = collect(
            args.dtype, parse_shape(args.shape), sizes(args.sweep_sizes),
            [s.strip() for s in args.rungs.split(",")] if args.rungs else None,
            [s.strip() for s in args.sweep_rungs.split(",") if s.strip()],
            parse_shape(args.profile_shape), lib=args.lib, timing=timing_settings(args),
            do_inspect=not args.no_inspect, do_profile=not args.no_profile, ncu=args.ncu,
            tune_storage=args.tune_storage,
        )
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1, default=str)
    html_path, md_path = build(results, args.out)
    print(f"wrote {html_path}\nwrote {md_path}")
    if not args.from_json:
        print(f"results saved in {os.path.join(args.out, 'results.json')} (rebuild: gemmlab report --from-json ...)")
    for what, msg in (results.get("errors") or {}).items():
        print(f"warning: {what}: {msg}")
    return 0
