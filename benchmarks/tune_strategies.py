"""How many evaluations each search strategy needs: for two rungs and three shapes, time every
candidate of the pruned space once (``gemmlab tune --strategy exhaustive``, on the GPU, into a
database), then replay each strategy with several seeds against those recorded measurements
(``tune.evaluate.ReplayEvaluator``, an in-memory study: no GPU time) and count the evaluations it
takes to reach 98% of the exhaustive best. Writes one JSON to benchmarks/results/.

    python benchmarks/tune_strategies.py                       # on a GPU: ~10-20 min on an H100
    python benchmarks/tune_strategies.py --replay-only FILE...  # redo the replays from saved JSONs (merged; no GPU)

The exhaustive runs are resumable (their database is --storage, default a file beside the JSON):
run the script again after an interruption and only what is missing is measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from gemmlab.bench.results import write_json
from gemmlab.core.shapes import fmt_shape, parse_shapes
from gemmlab.measure.timing import Settings
from gemmlab.tune.evaluate import ReplayFactory
from gemmlab.tune.runner import TuneSpec, tune
from gemmlab.tune.store import MEMORY

RUNGS = ("double_buffer", "warp_tiling")       # seed 001's sweep; the largest space (7 parameters)
SHAPES = "1024,2048,4096x4096x1024"
STRATEGIES = ("random", "grid", "tpe", "cmaes")
TARGET = 0.98
# Short timings: the replays compare strategies on the ranking of a few hundred candidates, and a
# 1% noise target separates configurations that differ by more than that
TIMING = Settings(min_samples=5, max_samples=30, target_error=0.01, time_cap_s=0.5, warmup=2)


def exhaustive(rung: str, shape, storage: str) -> dict:
    """Every candidate timed on the GPU (resumed from ``storage`` when it was interrupted)."""
    from gemmlab.tune.gpu import GpuFactory

    factory = GpuFactory(rung, "fp32", shape, settings=TIMING)
    t0 = time.perf_counter()
    s = tune(TuneSpec(rung, shape, strategy="exhaustive", storage=storage), factory, progress=sys.stderr.isatty())
    s["wall_s"] = round(time.perf_counter() - t0, 1)
    return s


def table_of(summary: dict) -> tuple[dict, dict]:
    """{config key: outcome} of every record, and the peers' times of the latest run."""
    doc = summary["document"]
    table = {r["key"]: {"status": r["status"], "ms": r["ms"], "reason": r["reason"]} for r in doc["records"]}
    peers = doc["peers"][sorted(doc["peers"])[-1]] if doc["peers"] else {}
    return table, peers


def evals_to_target(summary: dict, best_tflops: float) -> int | None:
    """Evaluations (in the order the strategy made them) until one reached TARGET x the best."""
    recs = sorted(summary["document"]["records"], key=lambda r: r["number"])
    for i, r in enumerate(recs, 1):
        if r["status"] == "ok" and r["tflops"] and r["tflops"] >= TARGET * best_tflops:
            return i
    return None


def replay(rung: str, shape, table: dict, strategy: str, seed: int, batch: int, max_evals: int | None) -> int | None:
    ok = [v for v in table.values() if v["status"] == "ok" and v["ms"]]
    best_ms = min(v["ms"] for v in ok)
    best = 2.0 * shape[0] * shape[1] * shape[2] / (best_ms * 1e-3) / 1e12
    # stops at the target: only the evaluations up to it are counted
    # no warm start: the experiment counts what each strategy finds on its own
    # max_evals: Optuna's TPE slows with every trial (a replay over a 930-candidate space took
    # minutes per seed on 2 CPU cores); a replay stopped there counts as "not within max_evals"
    budget = len(table) if max_evals is None else min(len(table), max_evals)
    s = tune(TuneSpec(rung, shape, strategy=strategy, budget=budget, batch=batch, seed=seed, storage=MEMORY,
                      target=TARGET * best * (1 - 1e-9), warm_start=False), ReplayFactory(table))
    return evals_to_target(s, best)


def problem(rung: str, shape, storage: str, seeds: int, batches, saved: dict | None,
            max_evals: int | None = None) -> dict:
    if saved is None:
        s = exhaustive(rung, shape, storage)
        table, peers = table_of(s)
        out = {"rung": rung, "shape": list(shape), "key": s["key"], "candidates": s["candidates"],
               "space_size": s["space_size"], "exhaustive_wall_s": s["wall_s"], "table": table, "peers": peers,
               "best": s["best"]}
    else:
        out = {k: v for k, v in saved.items() if k != "strategies"}
    ok = [v["ms"] for v in out["table"].values() if v["status"] == "ok" and v["ms"]]
    best_tflops = 2.0 * shape[0] * shape[1] * shape[2] / (min(ok) * 1e-3) / 1e12
    out["best_tflops"] = best_tflops
    out["strategies"] = {}
    for batch in batches:
        for strat in STRATEGIES:
            runs = [replay(rung, shape, out["table"], strat, seed, batch, max_evals) for seed in range(seeds)]
            reached = [r for r in runs if r is not None]
            out["strategies"][f"{strat} (batch {batch})"] = {
                "evaluations_to_98pct": runs, "reached": f"{len(reached)} of {len(runs)}",
                "median": statistics.median(reached) if reached else None}
            print(f"{rung} {fmt_shape(shape)} {strat} batch {batch}: {runs}", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rungs", default=",".join(RUNGS))
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--batches", default="1,8", help="replay batch sizes (8: the tuner's default on 8+ CPUs)")
    ap.add_argument("--max-evals", type=int, default=None,
                    help="stop each replay after this many evaluations (default: the whole space)")
    ap.add_argument("--storage", default=None, help="database of the exhaustive runs (default: a file beside --out)")
    ap.add_argument("--out", default=None, help="JSON to write (default benchmarks/results/tune_strategies_<gpu>.json)")
    ap.add_argument("--replay-only", nargs="+", default=None, metavar="FILE",
                    help="replay the tables of saved JSONs (their problems merged), no GPU")
    a = ap.parse_args(argv)
    saved = ({"problems": [p for f in a.replay_only for p in json.loads(Path(f).read_text())["problems"]]}
             if a.replay_only else None)
    results = Path(__file__).resolve().parent / "results"
    storage = a.storage or f"sqlite:///{results / 'tune_strategies.db'}"
    problems = []
    batches = [int(b) for b in a.batches.split(",")]
    for rung in a.rungs.split(","):
        for shape in parse_shapes(a.shapes):
            old = next((p for p in (saved or {}).get("problems", []) if p["rung"] == rung and tuple(p["shape"]) == shape),
                       None)
            if saved and old is None:
                continue   # replaying: only what the saved files hold
            problems.append(problem(rung, shape, storage, a.seeds, batches, old, a.max_evals))
    words = (problems[0]["key"]["gpu_name"] if problems else "gpu").split()
    gpu = (words[1] if len(words) > 1 and words[0] == "NVIDIA" else words[0]).lower()   # "NVIDIA H100 ..." -> h100
    doc = {"target": TARGET, "seeds": a.seeds, "batches": batches, "max_evals": a.max_evals, "timing": TIMING.as_dict(),
           "note": "evaluations_to_98pct: per seed, the evaluations (compiled candidates: failures count) until one "
                   "reached 98% of the exhaustive best; None: not within the whole pruned space (or max_evals)",
           "problems": problems}
    out = Path(a.out) if a.out else results / f"tune_strategies_{gpu}.json"
    print(f"wrote {write_json(doc, out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
