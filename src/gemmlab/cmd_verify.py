"""``gemmlab verify``: check rungs against cuBLAS on fresh random data (GPU)."""

from __future__ import annotations

import itertools

from .shapes import parse_shapes


def register(sub) -> None:
    p = sub.add_parser("verify", help="check rungs against cuBLAS (float64 reference) on random data, all layouts")
    p.add_argument("rungs", nargs="*", help="rung slugs (default: all)")
    p.add_argument("--dtype", default=None, choices=["fp32", "fp16", "bf16"], help="default: every dtype a rung supports")
    p.add_argument("--shapes", default="127x129x65,1x1x1,257x31x1000", help="comma-separated MxNxK list")
    p.add_argument("--alpha", type=float, default=1.5)
    p.add_argument("--beta", type=float, default=-0.5)
    p.set_defaults(func=run)


def run(args) -> int:
    from rich.console import Console

    from .registry import get, kernels
    from .verify import verify

    con = Console()
    rungs = [get(s) for s in args.rungs] if args.rungs else list(kernels())
    failures = 0
    for rung in rungs:
        for dtype in ([args.dtype] if args.dtype else rung.dtypes):
            if dtype not in rung.dtypes:
                continue
            for (M, N, K), lay in itertools.product(parse_shapes(args.shapes), itertools.product((0, 1), repeat=3)):
                for beta in (0.0, args.beta):
                    r = verify(rung.slug, M, N, K, dtype, a_col=lay[0], b_col=lay[1], c_col=lay[2], alpha=args.alpha, beta=beta)
                    if not r.ok:
                        failures += 1
                        con.print(f"[red]{r.message()}[/red]")
            con.print(f"{rung.slug:>14} {dtype}: {'[green]ok' if not failures else '[red]failures so far: ' + str(failures)}")
    return 1 if failures else 0
