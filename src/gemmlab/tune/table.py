"""Seed 001's table from stored results: one row per configuration (the searched parameters as
columns), its time, TFLOP/s, % of cuBLAS and % of the best peer (both timed in the same run, on the
same device, by the same engine), best first; the failures after, each with its reason. Pure: reads
a study document (``store.study_document``); the CLI prints it, the report writes it as HTML and
Markdown."""

from __future__ import annotations

from typing import Mapping


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def columns(doc: Mapping) -> list[str]:
    params = list(doc.get("space") or (doc["records"][0]["config"] if doc.get("records") else []))
    return ["#"] + params + ["ms", "TFLOP/s", "% of cuBLAS", "% of best peer", "device", "status"]


def rows(doc: Mapping, top: int | None = None, failures: bool = True) -> list[list[str]]:
    """The table's cells: the measured configurations best first (``top`` of them; None: all),
    then, with ``failures``, every other record with its status and reason."""
    params = columns(doc)[1:-6]
    out = []
    measured = [r for r in doc["records"] if r["status"] in ("ok", "slow")]
    others = [r for r in doc["records"] if r["status"] not in ("ok", "slow")]
    for i, r in enumerate(measured[:top] if top else measured, 1):
        status = "ok" if r["status"] == "ok" else f"slow: {r['reason']}"
        peer = r.get("vs_best_peer")
        best = f"{_pct(peer)} ({r.get('best_peer')})" if peer is not None else "-"
        out.append([str(i)] + [str(r["config"].get(p, "")) for p in params]
                   + [_num(r.get("ms"), ".4f"), _num(r.get("tflops"), ".2f"), _pct(r.get("vs_cublas")), best,
                      r.get("device", ""), status])
    if failures:
        for r in others:
            out.append([""] + [str(r["config"].get(p, "")) for p in params]
                       + ["-", "-", "-", "-", r.get("device", ""), f"{r['status']}: {r.get('reason', '')}"])
    return out


def title(doc: Mapping) -> str:
    k = doc.get("key") or {}
    return (f"{k.get('rung')} {k.get('dtype')} {k.get('shape')} (layout {k.get('layout')}) on {k.get('gpu_name')} "
            f"{k.get('arch')}, driver {k.get('driver')}, NVRTC {k.get('nvrtc')}, gemmlab {k.get('gemmlab')}")


def caption(doc: Mapping, shown: int | None = None) -> str:
    c = doc.get("counts") or {}
    measured = c.get("ok", 0) + c.get("slow", 0)
    parts = [", ".join(f"{v} {k}" for k, v in sorted(c.items())) or "no records"]
    if shown and measured > shown:
        parts.append(f"the best {shown} of {measured} measured shown (--top 0: all)")
    peers = doc.get("peers") or {}
    if peers:
        latest = peers[sorted(peers)[-1]]
        parts.append("peers of the latest run: " + ", ".join(f"{n} {ms:.4f} ms" for n, ms in sorted(latest.items())))
    parts.append("% of cuBLAS / best peer: against the peers timed in the candidate's own run and device")
    return "; ".join(parts)


def render(doc: Mapping, top: int | None = 30, console=None) -> None:
    """Print the table of one study with rich."""
    import sys

    from rich.console import Console
    from rich.table import Table

    con = console or (Console() if sys.stdout.isatty() else Console(width=200))
    t = Table(title=title(doc), caption=caption(doc, top), caption_justify="left")
    for i, col in enumerate(columns(doc)):
        right = col not in ("device", "status")
        t.add_column(col, justify="right" if right else "left", no_wrap=right, overflow="fold")
    for r in rows(doc, top):
        t.add_row(*r)
    con.print(t)
