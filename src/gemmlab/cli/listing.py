"""``gemmlab list``: the ladder as a table (no GPU needed)."""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("list", help="list the rungs of the ladder (no GPU needed)")
    g = p.add_mutually_exclusive_group()
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
    t = Table(title="gemmlab ladder")
    for col in ("#", "rung", "dtypes", "what it adds", "seeds"):
        t.add_column(col, overflow="fold")
    for r in kernels():
        t.add_row(str(r.number), r.slug, ",".join(r.dtypes), r.summary, "; ".join(r.seeds))
    Console().print(t)
    return 0
