"""``gemmlab tune auto``: the selection menu measured on a tuning sample (tune/selection.py), or
``--replay``: the model's leave-one-out choices over a stored selection file, without a GPU (with
``--heldout``: its choices for another run's shapes, every option of which was measured there)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.deps import require_all
from ..core.shapes import fmt_shape, suite
from .common import UsageError


def _sample(text: str) -> tuple[int, int]:
    n, _, seed = text.partition("@")
    if not (n.isascii() and n.isdigit() and int(n) > 0) or (seed and not (seed.isascii() and seed.isdigit())):
        raise UsageError(f"--sample: give N@SEED with N >= 1 and SEED >= 0 (e.g. 300@0), got {text!r}")
    return int(n), int(seed or 0)


def _print_replay(doc: dict, dtype: str | None, heldout: dict | None = None) -> dict:
    from ..tune.selection import replay, summary

    recs = [r for r in doc.get("records", []) if dtype is None or r["dtype"] == dtype]
    if not recs:
        raise ValueError(f"no records{' of ' + dtype if dtype else ''} to replay")
    test = None if heldout is None else [r for r in heldout.get("records", []) if dtype is None or r["dtype"] == dtype]
    if test is not None and not test:
        raise ValueError(f"--heldout: no records{' of ' + dtype if dtype else ''} to choose for")
    out = {}
    for dt in sorted({r["dtype"] for r in (recs if test is None else test)}):
        train = [r for r in recs if r["dtype"] == dt]
        if not train:
            raise ValueError(f"--heldout has {dt} shapes, the selection file no {dt} records to predict them from")
        rows = replay(train, doc["sm_count"], None if test is None else [r for r in test if r["dtype"] == dt])
        s = out[dt] = summary(rows)
        how = "leave-one-out" if test is None else "held out (predicted from the selection file alone)"
        print(f"{dt}: {s['shapes']} shapes, {how}: the model's pick {s['geomean_vs_cublas']:.3f}x cuBLAS "
              f"(geomean), the best measured option {s['oracle_vs_cublas']:.3f}x, regret {s['geomean_regret']:.3f}, "
              f"{s['below_0_9']} below 0.9x")
        for r in sorted(rows, key=lambda r: r["vs_cublas"])[:10]:
            print(f"  {fmt_shape(r['shape']):>20} {r['layout']}  pick {r['pick']:<10} {r['vs_cublas']:.2f}x   "
                  f"best {r['best']:<10} {r['best_vs_cublas']:.2f}x")
    return out


def run(args) -> int:
    from ..bench.results import write_json

    if args.replay:
        from ..core import selection

        doc = selection.load(Path(args.replay))
        _print_replay(doc, args.dtype, selection.load(Path(args.heldout)) if args.heldout else None)
        return 0
    if args.heldout:
        raise UsageError("--heldout goes with --replay (the choices it replays)")
    from ..core import selection
    from ..tune import selection as tsel

    dtype = args.dtype or "bf16"
    if selection.family(dtype, args.precision) is None:
        raise ValueError(f"tune auto: the selection menu covers fp16, bf16 and fp32 in their own precision, "
                         f"not {dtype}{' as ' + args.precision if args.precision else ''}")
    if args.suite:   # a named suite as it is (row-major): e.g. the held-out sample, to see what each option runs at
        items = [(tuple(s), "rr") for s in suite(args.suite)]
        n = seed = None
    else:
        n, seed = _sample(args.sample)
        items = tsel.tuning_sample(dtype, n, seed, args.suites)
    require_all("cuda.bindings.driver")
    doc = tsel.collect(dtype, items, lib=args.lib, processes=args.jobs, progress=args.progress and sys.stderr.isatty())
    doc["sample"] = ({"suite": args.suite} if args.suite else {"n": n, "seed": seed, "suites": args.suites}) | {"items": len(items)}
    print(f"measured {len(doc['records'])} shapes in {doc['duration_s']} s ({doc['compile_s']} s compiling"
          f"{', %d compile errors' % len(doc['compile_errors']) if doc['compile_errors'] else ''})")
    failed = sum(bool(r.get("failed")) for r in doc["records"])
    if failed:
        print(f"{failed} shapes had options that failed (recorded, never chosen)", file=sys.stderr)
    _print_replay(doc, dtype)
    if args.json:
        print(f"wrote {write_json(doc, args.json)}")
    if args.emit_selection:
        path = Path(args.emit_selection)
        old = selection.load(path) if path.is_file() else {}
        merged = tsel.merge(old, doc)
        selection.store(path, merged)
        print(f"wrote {path} ({len(merged['records'])} records)")
    return 1 if doc["compile_errors"] else 0
