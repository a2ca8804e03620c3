"""The tuning database as dispatch tables: what ``kernel="auto"`` reads (core/dispatch.py).

Core does not open the database (Optuna's schema, maybe a server; tune is above core in the
layers): after every tuning run ``export_tuned`` writes the best measured configuration of every
study to ``<cache dir>/tuned.json``, and ``emit_defaults`` writes the best configuration per shape
of a suite on this GPU into a shipped defaults table (``gemmlab tune --suite ... --emit-defaults
FILE``; the H100's is ``gemmlab/data/defaults_sm90.json``). One format for both::

    {"format": 1, "source": "...", "arch": ..., "gpu_name": ..., "entries": [
        {"dtype", "shape": [M, N, K], "layout", "rung", "config": {...}, "gpu_name", "arch",
         "tflops", "vs_cublas", "source"}, ...]}

(shape and layout in the kernel's view: C row-major, layout the letters of A and B, as the tuner
keys its studies). Files are written atomically (a temporary file, then a rename).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping

from ..bench.results import write_json
from ..core import dispatch
from .store import documents

FORMAT = 1
ONLINE_FILE = "online.json"   # on-line tuning's winners (tune/online.py), beside tuned.json


def _shape(text: str) -> list[int]:
    return [int(x) for x in str(text).split("x")]


def best_entries(docs: Iterable[Mapping]) -> list[dict]:
    """One entry per study document with a measured ("ok") record: its best configuration."""
    out = []
    for doc in docs:
        key = doc.get("key") or {}
        best = next((r for r in doc.get("records", []) if r.get("status") == "ok" and r.get("tflops")), None)
        if best is None or not key.get("shape"):
            continue
        out.append({"dtype": key.get("dtype"), "shape": _shape(key["shape"]), "layout": key.get("layout"),
                    "rung": key.get("rung"), "config": dict(best["config"]), "gpu_name": key.get("gpu_name"),
                    "arch": key.get("arch"), "tflops": best.get("tflops"), "vs_cublas": best.get("vs_cublas"),
                    "source": f"tuned: {doc.get('study')}"})
    return out


def slot(e: Mapping) -> tuple:
    """What one table entry stands for: the GPU, architecture, dtype, layout and shape."""
    return (e.get("gpu_name"), e.get("arch"), e.get("dtype"), e.get("layout"), tuple(e.get("shape") or ()))


def best_per_shape(entries: Iterable[dict]) -> list[dict]:
    """The fastest entry per (GPU, architecture, dtype, layout, shape), across rungs and runs."""
    best: dict[tuple, dict] = {}
    for e in entries:
        k = slot(e)
        if k not in best or (e.get("tflops") or 0) > (best[k].get("tflops") or 0):
            best[k] = e
    return sorted(best.values(), key=lambda e: (str(e.get("dtype")), str(e.get("layout")), e["shape"]))


def read_table(path: str | Path) -> dict:
    """A table file as a dict ({"entries": []} when it does not exist)."""
    p = Path(path)
    return json.loads(p.read_text()) if p.is_file() else {"format": FORMAT, "entries": []}


def write_table(path: str | Path, entries: list[dict], **meta) -> Path:
    """Write a dispatch table (atomically); ``meta``: source, arch, gpu_name ..."""
    doc = {"format": FORMAT, **meta, "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "entries": entries}
    return write_json(doc, path)


def online_path() -> Path | None:
    """Where on-line tuning keeps its winners (None when the cache folder is off)."""
    tuned = dispatch.tuned_path()
    return None if tuned is None else tuned.with_name(ONLINE_FILE)


def online_entries() -> list[dict]:
    """The entries on-line tuning stored."""
    path = online_path()
    return [] if path is None else list(read_table(path).get("entries", []))


def export_tuned(storage_url: str | None = None) -> Path | None:
    """Write every study's best configuration, and on-line tuning's winners (``online_entries``;
    the faster one where both have a shape), to the file ``kernel="auto"`` reads; None when the
    cache folder is off (nowhere to write)."""
    path = dispatch.tuned_path()
    if path is None:
        return None
    out = write_table(path, best_per_shape(best_entries(documents(storage_url)) + online_entries()),
                      source="gemmlab tune: the best measured configuration of every study in the database, "
                             "and of on-line tuning")
    dispatch.reload()
    return out


def emit_defaults(path: str | Path, machine: Mapping, dtype: str, shapes, storage_url: str | None = None) -> dict:
    """Merge into the defaults table at ``path`` the best tuned configuration (across rungs and
    layouts tuned) of each of ``shapes`` for ``dtype`` (the studies' dtype, ``precision.label``:
    "fp32:tf32" for tf32) on the GPU of ``machine`` (its gpu_name and arch); the table's other
    entries stay. Returns the table written."""
    want = {tuple(s) for s in shapes}
    docs = [d for d in documents(storage_url, gpu_name=machine.get("gpu_name"), arch=machine.get("arch"), dtype=dtype)
            if tuple(_shape((d.get("key") or {}).get("shape", "0x0x0"))) in want]
    new = best_per_shape(best_entries(docs))
    doc = read_table(path)
    replaced = {(e["dtype"], e.get("layout"), tuple(e["shape"])) for e in new}
    kept = [e for e in doc.get("entries", []) if (e.get("dtype"), e.get("layout"), tuple(e.get("shape") or ())) not in replaced]
    meta = {k: v for k, v in doc.items() if k not in ("format", "written", "entries")}
    meta.update(arch=machine.get("arch"), gpu_name=machine.get("gpu_name"),
                source=f"gemmlab tune --emit-defaults on {machine.get('gpu_name')} ({machine.get('arch')}): the best "
                       "tuned configuration per shape; entries marked otherwise keep their own source")
    write_table(path, kept + new, **meta)
    return read_table(path)
