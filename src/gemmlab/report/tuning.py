"""The report's tuning section, when tuning results exist (``gemmlab tune``): for each study of
this GPU, seed 001's table (the best configurations, TFLOP/s, % of cuBLAS and of the best peer)
and a figure of TFLOP/s over the space (one panel per searched parameter: every measured
configuration at its value, the best one marked, cuBLAS of the same runs as a line).

``collect_tuning`` reads the database (none, or no Optuna: no section); ``section`` turns the
study documents of a results document into tables and PNG figures. Pure but for the database read.
"""

from __future__ import annotations

from typing import Mapping

from ..tune import table as tune_table
from . import fmt

TOP = 10


def collect_tuning(gpu_name: str | None, storage: str | None = None) -> list[dict]:
    """The study documents of ``gpu_name`` in the tuning database ([] when Optuna is not installed
    or nothing was tuned on this GPU)."""
    from ..core.deps import MissingDependencyError

    try:
        from ..tune.store import default_url, documents

        url = storage or default_url()
        if url.startswith("sqlite:///"):
            from pathlib import Path

            if not Path(url[len("sqlite:///"):]).exists():
                return []   # never tuned here: no database to create
        return documents(url, gpu_name=gpu_name)
    except (MissingDependencyError, ValueError):
        return []


def figure(doc: Mapping) -> bytes | None:
    """TFLOP/s over the space of one study, one panel per searched parameter (log2 axis)."""
    from .figures import panels, png_bytes

    ok = [r for r in doc["records"] if r["status"] == "ok" and r.get("tflops")]
    params = list(doc.get("space") or {})
    if not ok or not params:
        return None
    fig, axes = panels(len(params))
    best = ok[0]
    cublas = [r["peer_tflops"]["cublas"] for r in ok if (r.get("peer_tflops") or {}).get("cublas")]
    for ax, p in zip(axes, params):
        xs = [r["config"][p] for r in ok]
        ax.scatter(xs, [r["tflops"] for r in ok], s=12, alpha=0.5, color="#3b6fb6", label="measured")
        ax.scatter([best["config"][p]], [best["tflops"]], s=60, marker="*", color="#d62728", label="best")
        if cublas:
            ax.axhline(max(cublas), color="#2e8b57", ls="--", lw=1, label=f"cuBLAS {fmt.tflops(max(cublas))}")
        ax.set_xscale("log", base=2)
        vals = sorted(set(xs))
        ax.set_xticks(vals, [str(v) for v in vals], fontsize=7)
        ax.set_xlabel(p)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TFLOP/s")
    axes[0].legend(fontsize=7, loc="lower left")
    k = doc.get("key") or {}
    fig.suptitle(f"{k.get('rung')} {k.get('dtype')} {k.get('shape')}: TFLOP/s over the search space", fontsize=10)
    return png_bytes(fig)


def section(results: Mapping) -> list[dict]:
    """[{"title", "columns", "rows", "caption", "figure" (PNG or None), "name"}] per study."""
    out = []
    for i, doc in enumerate(results.get("tuning") or []):
        out.append({"name": f"tuning_{i + 1}", "title": tune_table.title(doc), "columns": tune_table.columns(doc),
                    "rows": tune_table.rows(doc, TOP, failures=False), "caption": tune_table.caption(doc, TOP),
                    "figure": figure(doc)})
    return out
