"""``gemmlab compile``: build rung variants into the disk cache ahead of time, in parallel
(``gemmlab.precompile``), so that no launch compiles in the middle of a run (no GPU needed: without
one it targets ``arch.OFFLINE_ARCH``, as ``inspect`` does, and says so)."""

from __future__ import annotations

import sys

from ..core.precompile import parse_layouts
from .common import add_dtype, checked


def register(sub) -> None:
    p = sub.add_parser("compile", help="compile rung variants into the kernel cache ahead of time (no GPU needed)",
                       description="Compile every variant a launch may pick (dtypes x A/B layouts x vector-access flags) "
                                   "of the rungs named (default: all) into the disk cache, in parallel processes, so that "
                                   "no call compiles in the middle of a run or inside a CUDA graph capture. Same as "
                                   "gemmlab.precompile(...).")
    p.add_argument("rungs", nargs="*", metavar="RUNG", help="rung slugs or numbers (default: every rung)")
    p.add_argument("--arch", default=None,
                   help="target architecture, e.g. sm_80 (default: this machine's GPU; without one sm_90a, as inspect)")
    add_dtype(p, None, "default: every dtype each rung supports", repeatable=True)
    p.add_argument("--layouts", default=None, metavar="LIST", type=checked(parse_layouts),
                   help="A/B layouts, comma-separated from rr,rc,cr,cc (r row-major, c column-major; default all four)")
    p.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: the CPU count)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..core.arch import OFFLINE_ARCH
    from ..core.driver import gpu_available
    from ..core.precompile import default_arch, precompile

    arch = args.arch
    if arch is None:
        if gpu_available():
            arch = default_arch()
        else:
            arch = OFFLINE_ARCH
            print(f"gemmlab compile: no usable GPU here: compiling for {arch} (--arch chooses another)", file=sys.stderr)
    res = precompile(args.rungs or None, args.dtype, args.layouts, arch, processes=args.jobs,
                     progress=not args.no_progress and sys.stderr.isatty())
    for e in res["errors"]:
        print(f"FAILED {e['variant']}: {e['error'].splitlines()[0]}", file=sys.stderr)
    print(f"{res['arch']}: {res['variants']} variants, {res['compiled']} compiled, {res['cached']} already cached, "
          f"{len(res['errors'])} failed in {res['seconds']:.1f} s")
    return 1 if res["errors"] else 0
