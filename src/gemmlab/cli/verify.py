"""``gemmlab verify``: check rungs against cuBLAS on fresh random data (GPU)."""

from __future__ import annotations

import itertools

from ..core.config import parse_config
from ..core.shapes import VERIFY_SHAPES, parse_shapes, shapes_text
from .common import add_config, add_dtype


def register(sub) -> None:
    p = sub.add_parser("verify", help="check rungs against cuBLAS (float64 reference) on random data, all layouts")
    p.add_argument("rungs", nargs="*", help="rung slugs (default: all)")
    add_dtype(p, None)
    add_config(p, "the rung named (one rung)")
    p.add_argument("--shapes", default=shapes_text(VERIFY_SHAPES), help="comma-separated MxNxK list")
    p.add_argument("--alpha", type=float, default=1.5)
    p.add_argument("--beta", type=float, default=-0.5)
    p.set_defaults(func=run)


def run(args) -> int:
    from rich.console import Console

    from ..core import driver
    from ..core.registry import get, kernels
    from ..measure.verify import verify

    con = Console()
    rungs = [get(s) for s in args.rungs] if args.rungs else list(kernels())
    config = parse_config(args.config)
    if config is not None and len(rungs) != 1:
        raise ValueError("--config applies to one rung: name exactly one rung")
    driver.cuda()  # the extra to install (exit 4) before the GPU question (exit 3)
    if not driver.gpu_available():
        raise driver.NoGPUError("gemmlab verify runs the rungs and cuBLAS on an NVIDIA GPU")
    failures = 0
    for rung in rungs:
        for dtype in ([args.dtype] if args.dtype else rung.dtypes):
            if dtype not in rung.dtypes:
                continue
            for (M, N, K), lay in itertools.product(parse_shapes(args.shapes), itertools.product((0, 1), repeat=3)):
                for beta in (0.0, args.beta):
                    r = verify(rung.slug, M, N, K, dtype, a_col=lay[0], b_col=lay[1], c_col=lay[2], alpha=args.alpha, beta=beta,
                               config=config)
                    if not r.ok:
                        failures += 1
                        con.print(f"[red]{r.message()}[/red]")
            con.print(f"{rung.slug:>14} {dtype}: {'[green]ok' if not failures else '[red]failures so far: ' + str(failures)}")
    return 1 if failures else 0
