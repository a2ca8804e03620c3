"""``gemmlab list``: the ladder as a table (no GPU needed)."""

from __future__ import annotations

import json

SEEDS_HELP = ("seeds: the kernels of the seed documents a rung reproduces, named by document and kernel "
              "(\"002 gemm_v07\": kernel gemm_v07 of seed document 002), or what it goes beyond")


def register(sub) -> None:
    p = sub.add_parser("list", help="list the rungs of the ladder (no GPU needed)",
                       description="The rungs of the ladder: number, slug, dtypes and title; --long adds what each "
                                   "one adds and its seeds. " + SEEDS_HELP + ".")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--long", action="store_true", help="each rung's summary and seeds below its row, wrapped")
    g.add_argument("--json", action="store_true", help="machine-readable output")
    g.add_argument("--slugs", action="store_true", help="the rung slugs only, one per line (for scripts)")
    p.set_defaults(func=run)


def run(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..core.registry import kernels

    if args.slugs:
        print("\n".join(r.slug for r in kernels()))
        return 0
    if args.json:
        print(json.dumps([{"number": r.number, "slug": r.slug, "title": r.title, "summary": r.summary,
                           "dtypes": list(r.dtypes), "seeds": list(r.seeds), "params": dict(r.params),
                           "presets": {k: dict(v) for k, v in r.presets.items()},
                           "min_arch": r.min_arch, "landmark": r.landmark} for r in kernels()], indent=2))
        return 0
    # the number, slug and dtypes never wrap; the title takes what is left of the terminal's width
    t = Table(title="gemmlab ladder", show_lines=args.long)
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("rung", no_wrap=True)
    t.add_column("dtypes", no_wrap=True)
    t.add_column("title" if not args.long else "title, what it adds, seeds", overflow="fold", ratio=1)
    for r in kernels():
        text = r.title if not args.long else f"{r.title}\n{r.summary}\n[dim]seeds: {'; '.join(r.seeds)}[/dim]"
        t.add_row(str(r.number), r.slug, ",".join(r.dtypes), text)
    con = Console()
    con.print(t)
    if args.long:
        con.print(f"[dim]{SEEDS_HELP}[/dim]")
    return 0
