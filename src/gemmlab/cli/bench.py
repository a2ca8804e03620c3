"""``gemmlab bench``: time the rungs beside cuBLAS on this GPU (see ``gemmlab.bench``)."""

from __future__ import annotations

from ..bench.results import exit_code, write_json
from ..bench.runner import run_bench
from ..bench.schedule import DEFAULT_REPEATS, DEFAULT_WARMUP
from ..bench.table import render
from ..core.config import parse_config
from .common import add_config, add_dtype, add_lib


def register(sub) -> None:
    p = sub.add_parser(
        "bench", help="time the rungs beside cuBLAS on this GPU (verified first, L2 flushed, medians)",
        description="Time the rungs of the ladder and cuBLAS on the same random inputs in the same run: "
                    "verify each rung first, flush L2 before every timed run, report medians, TFLOP/s, "
                    "the ratio to cuBLAS and % of the GPU's peak. Without --shape the shape is 4096^3 "
                    "(the naive rungs 2048^3, beside cuBLAS at 2048^3).")
    p.add_argument("rungs", nargs="*", metavar="RUNG",
                   help="rung slugs or numbers (default: every rung that supports --dtype)")
    p.add_argument("--shape", "--shapes", dest="shapes", action="append", metavar="SHAPES",
                   help="N, N^3 or MxNxK, comma-separated; repeatable (default 4096^3, naive rungs 2048^3)")
    add_dtype(p, "fp32")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help=f"timed runs per kernel (default {DEFAULT_REPEATS})")
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help=f"warm-up runs per kernel (default {DEFAULT_WARMUP})")
    p.add_argument("--no-flush", dest="flush_l2", action="store_false", help="do not flush L2 before each timed run")
    p.add_argument("--no-verify", dest="verify", action="store_false", help="time without checking results first")
    add_config(p, "the one rung named")
    add_lib(p)
    p.add_argument("--json", metavar="FILE", default=None, help="write every figure and the environment to FILE")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar on stderr")
    p.set_defaults(func=run)


def run(args) -> int:
    config = parse_config(args.config)
    shapes = ",".join(args.shapes) if args.shapes else None
    result = run_bench(rungs=args.rungs or None, shapes=shapes, dtype=args.dtype, repeats=args.repeats,
                       warmup=args.warmup, flush_l2=args.flush_l2, verify=args.verify, lib=args.lib,
                       progress=args.progress, config=config)
    render(result)
    if args.json:
        path = write_json(result, args.json)
        print(f"wrote {path}")
    return exit_code(result)
