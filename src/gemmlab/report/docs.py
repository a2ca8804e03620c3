"""Documentation tables generated from the registry and from benchmark JSON (the README's tables)."""

from __future__ import annotations

from ..core.registry import kernels
from .model import DATASHEET_NOTE, peak_basis, timing_text


def rungs_markdown() -> str:
    rows = ["| # | rung | dtypes | what it adds | seeds |", "| --- | --- | --- | --- | --- |"]
    for r in kernels():
        dtypes = ", ".join(r.dtypes) + ("" if r.precisions == r.dtypes else f" as {', '.join(r.precisions)}")
        rows.append(f"| {r.number} | `{r.slug}` | {dtypes} | {r.summary} | {'; '.join(r.seeds)} |")
    return "\n".join(rows)


def _peak_text(bench: dict) -> str:
    """' % of peak: of 66.9 TFLOP/s (fp32 CUDA cores) = <its basis>.' from the settings and env."""
    s = bench.get("settings") or {}
    if not s.get("peak_tflops") or not s.get("dtype"):
        return ""
    kind = f" ({s['peak_kind']})" if s.get("peak_kind") else ""
    return (f" % of peak: of {s['peak_tflops']:.1f} TFLOP/s{kind} = "
            f"{peak_basis(bench.get('env') or {}, s['dtype'], s['peak_tflops'], s.get('compute_precision'))}; "
            f"{DATASHEET_NOTE}.")


def bench_markdown(bench: dict) -> str:
    """The ladder table of one `gemmlab bench --json` result."""
    env = bench.get("env", {})
    res = bench["results"]
    head = (f"{env.get('gpu_name', '?')}, {env.get('sm_count', '?')} SMs, "
            f"gemmlab {bench.get('gemmlab_version', '?')}, {bench.get('timestamp', '?')}; "
            f"{timing_text(bench)}." + _peak_text(bench))
    rows = [head, "", "| # | rung | dtype | shape | ms | noise | TFLOP/s | vs cuBLAS | vs best peer | % of peak |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in res:
        if r.get("ms") is None:
            continue
        shape = f"{r['M']}x{r['N']}x{r['K']}"
        vs = f"{r['vs_cublas']:.2f}x" if r.get("vs_cublas") else "-"
        best = f"{r['vs_best_peer']:.2f}x ({r.get('best_peer')})" if r.get("vs_best_peer") else "-"
        noise = f"{100 * r['noise']:.1f}%" if r.get("noise") is not None else "-"
        pct = f"{r['pct_peak']:.1f}%" if r.get("pct_peak") is not None else "-"
        name = {"cublas": "cuBLAS", "triton": "Triton"}.get(r["kernel"], r["kernel"]) if r.get("peer", r["kernel"] == "cublas") else f"`{r['kernel']}`"
        # a tensor-core reading of FP32 operands says so (cuBLAS's baseline follows it: TF32 on or off)
        prec = r.get("precision") or r["dtype"]
        dtype = r["dtype"] if prec == r["dtype"] else f"{r['dtype']} as {prec}"
        rows.append(f"| {r.get('number', 0) or ''} | {name} | {dtype} | {shape} | {r['ms']:.3f} | {noise} | "
                    f"{r['tflops']:.1f} | {vs} | {best} | {pct} |")
    return "\n".join(rows)


def replace_block(text: str, name: str, body: str) -> str:
    start = text.index(f"<!-- {name}:start")
    start = text.index("-->", start) + 3
    end = text.index(f"<!-- {name}:end -->")
    return text[:start] + "\n" + body + "\n" + text[end:]
