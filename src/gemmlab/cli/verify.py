"""``gemmlab verify``: check rungs against cuBLAS on fresh random data (GPU)."""

from __future__ import annotations

from ..core.config import parse_config
from ..core.dtypes import DTYPES
from ..core.epilogue import ACTIVATIONS
from ..core.precision import applies
from ..core.shapes import VERIFY_SHAPES, parse_shapes, shapes_text
from .common import add_config, add_dtype, add_precision, checked


def register(sub) -> None:
    p = sub.add_parser("verify", help="check rungs against cuBLAS (float64 reference) on random data, all layouts")
    p.add_argument("rungs", nargs="*", help="rung slugs (default: all)")
    add_dtype(p, None)
    add_precision(p)
    add_config(p, "the rung named (one rung)")
    p.add_argument("--shapes", default=shapes_text(VERIFY_SHAPES), type=checked(parse_shapes),
                   help="comma-separated MxNxK list")
    p.add_argument("--alpha", type=float, default=1.5)
    p.add_argument("--beta", type=float, default=-0.5)
    p.add_argument("--bias", choices=("same", "fp32"), default=None,
                   help="fuse a random bias of the operands' dtype (same) or float32 into every check")
    p.add_argument("--activation", choices=tuple(ACTIVATIONS), default=None,
                   help="fuse this activation into every check")
    p.add_argument("--out-dtype", choices=DTYPES, default=None,
                   help="C's dtype where it is not the operands' (an output dtype: fp32 or the other 16-bit type "
                        "from fp16/bf16 operands), for the rungs that write it")
    p.set_defaults(func=run)


def run(args) -> int:
    from rich.console import Console

    from ..core.driver import require_gpu
    from ..core.registry import get, kernels
    from ..measure.verify import verify_all

    con = Console()
    rungs = [get(s) for s in args.rungs] if args.rungs else list(kernels())
    config = parse_config(args.config)
    if config is not None and len(rungs) != 1:
        raise ValueError("--config applies to one rung: name exactly one rung")
    out = args.out_dtype
    jobs = [(r, d, p) for r in rungs for d in ([args.dtype] if args.dtype else r.dtypes) if r.supports(d)
            for p in r.precisions if p == args.precision or (args.precision is None and applies(p, d))
            if (d != "fp32" or out in (None, d)) and r.writes(d, out)]
    if not jobs:
        supported = "; ".join(f"{r.slug}: {', '.join(r.dtypes)} ({', '.join(r.precisions)}"
                              + (f"; writes {', '.join(r.outputs)}" if r.outputs else "") + ")" for r in rungs)
        what = " ".join(x for x in (args.dtype, args.precision and f"in precision {args.precision}",
                                    out and f"writing {out}") if x)
        raise ValueError(f"nothing to verify: no rung named supports {what} ({supported})")
    require_gpu()
    shapes = parse_shapes(args.shapes)
    total_failed = 0
    for rung, dtype, precision in jobs:
        failed = checked = 0
        for r in verify_all(rung.slug, dtype, shapes, alpha_beta=[(args.alpha, 0.0), (args.alpha, args.beta)],
                            config=config, precision=precision, bias=args.bias, activation=args.activation,
                            out=out):
            checked += 1
            if not r.ok:
                failed += 1
                con.print(f"[red]{r.message()}[/red]")
        total_failed += failed
        status = "[green]ok[/green]" if not failed else f"[red]{failed} of {checked} FAILED[/red]"
        shown = (dtype if precision == dtype else f"{dtype} as {precision}") + (f" -> {out}" if out and out != dtype else "")
        con.print(f"{rung.slug:>14} {shown}: {checked} checks, {status}")
    con.print(f"{len(jobs)} rung/precision pairs, {total_failed} failed" if total_failed
              else f"{len(jobs)} rung/precision pairs ok")
    return 1 if total_failed else 0
