"""Documentation tables generated from the registry and from the canonical results (the README's
and the docs' tables; tools/gen_readme.py writes them, a test checks they are current).

Every table of measurements names, on each row or under it, the result it comes from with its GPU,
date and commit as the manifest records them (``report.manifest``), so a figure in the docs is
never older than it says. Where one rung was measured in several canonical results, the newest
gives its row: the ladder's rows can come from different runs, each saying which.
"""

from __future__ import annotations

import statistics

from pathlib import Path

from ..core.registry import get, kernels
from .manifest import entry, read_result
from .model import DATASHEET_NOTE, peak_basis, timing_text

R = "benchmarks/results/"


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
            f"gemmlab {bench.get('gemmlab_version', '?')}, {bench.get('timestamp', '?')}, "
            f"commit {env.get('git_commit') or 'not recorded'}; "
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


# ---- the canonical results, as tables ---------------------------------------------------------------

def _load(root: Path, path: str) -> tuple[dict, dict]:
    """A canonical result and its manifest entry (KeyError when it is not canonical)."""
    return read_result(Path(root) / path), entry(root, path)


def _commit(e: dict) -> str:
    """The commit measured, short; where the file does not record it, git's inference, said so, else
    the commit that added it."""
    c = e["commit"].split()[0]
    if c == "unknown":
        return f"unknown (added in {e['added_in']})" if e.get("added_in") else c
    c = c[:7] if len(c) == 40 else c
    return f"{c} (inferred)" if e.get("inferred") else c


def _gpu(e: dict) -> str:
    return e["gpu"].removeprefix("NVIDIA ")


def _name(e: dict) -> str:
    return f"`{Path(e['path']).name}`"


def _x(v) -> str:
    return f"{v:.2f}x" if v else "-"


def _shape(r) -> str:
    return "x".join(map(str, (r["M"], r["N"], r["K"]) if isinstance(r, dict) else r))


def _prec(r: dict) -> str:
    p = r.get("precision") or r["dtype"]
    return r["dtype"] if p == r["dtype"] else f"{r['dtype']} as {p}"


def _row(doc: dict, kernel: str, shape, number: int | None = None) -> dict | None:
    for r in doc["results"]:
        if r["kernel"] == kernel and _shape(r) == _shape(shape) and r.get("ms") is not None \
                and (number is None or r.get("number") == number):
            return r
    return None


def _vs_triton(doc: dict, r: dict) -> float | None:
    t = _row(doc, "triton", (r["M"], r["N"], r["K"]))
    return t["ms"] / r["ms"] if t else None


def _who(r: dict) -> str:
    rung = get(r["kernel"]) if r["kernel"] != "auto" else None
    return f"auto (rung {r['number']})" if rung is None else f"rung {rung.number} `{rung.slug}`"


# the headline: (result, kernel, shapes) for one-shape rows, (result, suite title) for a suite's geomean
HEADLINE_SHAPES = (
    (R + "h100_fp32_suite_streamk_predicated.json.gz", "auto", ((4096,) * 3, (8192,) * 3)),
    (R + "h100_auto_tf32.json", "auto", ((4096,) * 3, (8192,) * 3)),
    (R + "h100_wgmma_3xtf32_final.json", "wgmma_tf32", ((4096,) * 3, (8192,) * 3)),
    (R + "h100_auto_bf16.json.gz", "auto", ((4096,) * 3, (8192,) * 3)),
    (R + "h100_auto_fp16.json.gz", "auto", ((4096,) * 3, (8192,) * 3)),
)
HEADLINE_SUITES = (
    (R + "h100_fp32_suite_streamk_predicated.json.gz", "FP32 suite"),
    (R + "h100_auto_llm_bf16.json.gz", "LLM suite"),
    (R + "h100_auto_llm_fp16.json.gz", "LLM suite"),
    (R + "h100_decode_bf16.json.gz", "decode suite"),
    (R + "h100_decode_fp16.json.gz", "decode suite"),
    (R + "h100_random_heldout_bf16.json.gz", "random sample nobody tuned on"),
    (R + "h100_random_heldout_fp16.json.gz", "random sample nobody tuned on"),
    (R + "h100_random_heldout_fp32.json.gz", "random sample nobody tuned on"),
)
# FP8 and mixture-of-experts: (result, title, gemmlab's call) of the suites against PyTorch's own
HEADLINE_PEERS = (
    (R + "h200_fp8_suite.json.gz", "FP8 suite", "`scaled_mm` (rung 25)"),
    (R + "h200_moe_suite.json.gz", "MoE suite", "`grouped_mm` (rung 26)"),
)
_HEAD = ("| problem | dtype | gemmlab | vs cuBLAS | vs Triton | GPU | date | commit | result |",
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def headline_markdown(root: Path) -> str:
    """The README's one table: gemmlab's fastest (auto, or the one rung of a precision) against
    cuBLAS and Triton, at the square shapes and as the geomean of each suite."""
    rows = list(_HEAD)
    for path, kernel, shapes in HEADLINE_SHAPES:
        doc, e = _load(root, path)
        for shape in shapes:
            r = _row(doc, kernel, shape)
            base = " (cuBLAS SGEMM)" if (r.get("precision") or "") == "3xtf32" else ""
            rows.append(f"| {_shape(r)} | {_prec(r)} | {_who(r)} | {_x(r['vs_cublas'])}{base} | {_x(_vs_triton(doc, r))} "
                        f"| {_gpu(e)} | {e['date'][:10]} | {_commit(e)} | {_name(e)} |")
    for path, title in HEADLINE_SUITES:
        doc, e = _load(root, path)
        s = doc["summary"]
        auto, tri = s["auto"], s.get("triton")
        vs_tri = auto["geomean_vs_cublas"] / tri["geomean_vs_cublas"] if tri else None
        rows.append(f"| {title} ({auto['shapes']} shapes), geomean | {doc['settings']['dtype']} | auto | "
                    f"{_x(auto['geomean_vs_cublas'])} | {_x(vs_tri)} | {_gpu(e)} | {e['date'][:10]} | {_commit(e)} "
                    f"| {_name(e)} |")
    return "\n".join(rows + [_peer_row(root, *p) for p in HEADLINE_PEERS])


def _peer_row(root: Path, path: str, title: str, call: str) -> str:
    """A headline row of a suite measured against PyTorch's own call: the FP8 suite's promoted
    tensor-wise products against torch._scaled_mm (cuBLASLt), fast accumulation against the FP8
    Triton matmul; the MoE suite against torch._grouped_mm and the grouped Triton kernel."""
    doc, e = _load(root, path)
    s, results = doc["summary"], doc["results"]
    if "geomean_vs_scaled_mm_tensor" in s:
        tensor = [r for r in results if r.get("scaling") == "tensor"]
        problem = f"{title} ({len(tensor)} shapes, tensor-wise scales), geomean"
        mine = f"{_x(s['geomean_vs_scaled_mm_tensor'])} (torch._scaled_mm)"
        tri = [x for x in (_ratio(r, "triton", "gemmlab_fast") for r in tensor) if x]
        tri = f"{_x(statistics.geometric_mean(tri))} (fast accumulation)" if tri else "-"
    else:
        problem = f"{title} ({len(results)} layers), geomean"
        mine, tri = f"{_x(s['geomean_vs_grouped_mm'])} (torch._grouped_mm)", _x(s.get("geomean_vs_triton"))
    return (f"| {problem} | {doc['settings']['dtype']} | {call} | {mine} | {tri} | {_gpu(e)} | {e['date'][:10]} "
            f"| {_commit(e)} | {_name(e)} |")


# the ladder's canonical runs, where each rung's newest figure at its shape comes from
LADDER_RESULTS = (R + "h100_fp32.json", R + "h100_fp16_tmastore.json", R + "h100_bf16_tmastore.json",
                  R + "h100_tf32.json", R + "h100_3xtf32.json", R + "h100_wgmma_3xtf32_final.json",
                  R + "h100_auto_tf32.json", R + "h100_wgmma_ws_balance_bf16.json",
                  R + "h100_wgmma_ws_balance_fp16.json", R + "h100_fp32_suite_streamk_predicated.json.gz",
                  R + "h100_decode_bf16.json.gz", R + "h100_decode_fp16.json.gz")
# a rung's shape in the ladder: the naive rungs at 2048^3 (hours otherwise), the thin rungs at the
# problems they exist for; everything else at 4096^3
LADDER_SHAPE = {1: (2048,) * 3, 2: (2048,) * 3, 3: (2048,) * 3, 23: (16, 4096, 4096), 24: (16, 4096, 4096)}


def ladder_markdown(root: Path) -> str:
    """Each rung's newest canonical figure at its shape, one row per precision, naming its run."""
    runs = [_load(root, p) for p in LADDER_RESULTS]
    rows = ["| # | rung | dtype | shape | TFLOP/s | vs cuBLAS | GPU | date | commit | result |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for rung in kernels():
        shape = LADDER_SHAPE.get(rung.number, (4096,) * 3)
        best: dict[str, tuple] = {}
        for doc, e in runs:
            for kernel, number in ((rung.slug, None), ("auto", rung.number)):
                r = _row(doc, kernel, shape, number)
                if r is not None and (_prec(r) not in best or e["date"] > best[_prec(r)][1]["date"]):
                    best[_prec(r)] = (r, e)
                    break
        for prec, (r, e) in sorted(best.items()):
            via = "" if r["kernel"] == rung.slug else " (as auto's pick)"
            rows.append(f"| {rung.number} | `{rung.slug}`{via} | {prec} | {_shape(r)} | {r['tflops']:.1f} | "
                        f"{_x(r['vs_cublas'])} | {_gpu(e)} | {e['date'][:10]} | {_commit(e)} | {_name(e)} |")
    return "\n".join(rows)


def runs_markdown(root: Path, paths) -> str:
    """Whole benchmark runs, one table each (bench_markdown), each under the name of its result."""
    return "\n\n".join(f"{_name(e)}: {bench_markdown(doc)}" for doc, e in (_load(root, p) for p in paths))


def suite_markdown(root: Path, paths, bandwidth: bool = False) -> str:
    """A suite in several dtypes side by side: auto's rung, its ratio to cuBLAS and to Triton (or,
    for the decode suite, its share of the copy bandwidth) per shape, and the geomeans."""
    runs = [_load(root, p) for p in paths]
    cols = [f"{doc['settings']['dtype']}: {c}" for doc, _ in runs
            for c in (("rung", "vs cuBLAS", "% of copy bandwidth") if bandwidth else ("rung", "vs cuBLAS", "vs Triton"))]
    rows = ["| shape | " + " | ".join(cols) + " |", "| --- " * (1 + len(cols)) + "|"]
    shapes = [_shape(r) for r in runs[0][0]["results"] if r["kernel"] == "auto"]
    for shape in shapes:
        cells = []
        for doc, _ in runs:
            r = _row(doc, "auto", tuple(map(int, shape.split("x"))))
            third = (f"{r['pct_copy_bw']:.0f}%" if r.get("pct_copy_bw") else "-") if bandwidth else _x(_vs_triton(doc, r))
            cells += [str(r["number"]), _x(r["vs_cublas"]), third]
        rows.append(f"| {shape} | " + " | ".join(cells) + " |")
    geo = []
    for doc, _ in runs:
        s = doc["summary"]
        tri = s.get("triton")
        geo += ["", _x(s["auto"]["geomean_vs_cublas"]),
                "" if bandwidth else _x(s["auto"]["geomean_vs_cublas"] / tri["geomean_vs_cublas"] if tri else None)]
    rows.append("| geomean | " + " | ".join(geo) + " |")
    notes = "; ".join(f"{_name(e)} ({_gpu(e)}, {e['date'][:10]}, commit {_commit(e)})" for _, e in runs)
    return "\n".join(rows) + f"\n\nFrom {notes}."


def heldout_markdown(root: Path, paths) -> str:
    """auto on shapes nobody tuned on: the geomean against cuBLAS, how many fell below 0.8x, the lowest."""
    rows = ["| dtype | shapes | auto vs cuBLAS, geomean | below 0.8x | lowest | GPU | date | commit | result |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for doc, e in (_load(root, p) for p in paths):
        a = doc["summary"]["auto"]
        low = min(a["below_floor"], key=lambda b: b["vs_cublas"], default=None)
        lowest = f"{_x(low['vs_cublas'])} at {_shape(low['shape'])}" if low else "-"
        rows.append(f"| {doc['settings']['dtype']} | {a['shapes']} | {_x(a['geomean_vs_cublas'])} | "
                    f"{len(a['below_floor'])} | {lowest} | {_gpu(e)} | {e['date'][:10]} | {_commit(e)} | {_name(e)} |")
    return "\n".join(rows)


def _ratio(rec: dict, peer: str, mine: str):
    """The peer's median over mine in a record's ``median_ms`` (None where either is missing)."""
    med = rec.get("median_ms") or {}
    return med[peer] / med[mine] if med.get(peer) and med.get(mine) else None


def fp8_markdown(root: Path, path: str) -> str:
    """``bench --suite fp8``'s result (bench/fp8.py): per shape and scaling, gemmlab.scaled_mm's TFLOP/s
    and its ratio to torch._scaled_mm, promoted and with fast accumulation."""
    doc, e = _load(root, path)
    rows = ["| shape | scales | gemmlab TFLOP/s | vs torch._scaled_mm | fast TFLOP/s | fast vs fast | fast vs Triton | "
            "vs bf16 matmul |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc["results"]:
        if not r.get("verified"):
            rows.append(f"| {r['M']}x{r['N']}x{r['K']} | {r['scaling']} | failed accuracy | | | | | |")
            continue
        t = r["tflops"]
        ratio = _x(r["vs_scaled_mm"]) if r.get("vs_scaled_mm") else "refused by torch"
        fast = f"{t['gemmlab_fast']:.0f}" if "gemmlab_fast" in t else "-"
        rows.append(f"| {r['M']}x{r['N']}x{r['K']} | {r['scaling']} | {t['gemmlab']:.0f} | {ratio} | {fast} | "
                    f"{_x(r['vs_scaled_mm_fast']) if r.get('vs_scaled_mm_fast') else '-'} | {_x(_ratio(r, 'triton', 'gemmlab_fast'))} | "
                    f"{_x(r['vs_bf16_matmul'])} |")
    return ("\n".join(rows) + f"\n\nFrom {_name(e)} ({_gpu(e)}, {e['date'][:10]}, commit {_commit(e)}): e4m3 operands, "
            f"a bf16 result, b K-major; torch._scaled_mm and an FP8 Triton matmul timed in the same run (Triton's "
            f"tl.dot sums as use_fast_accum does: compared with gemmlab's fast accumulation).")


def moe_markdown(root: Path, path: str) -> str:
    """``bench --suite moe``'s result (bench/moe.py): per layer, gemmlab.grouped_mm's TFLOP/s, its
    ratios to torch._grouped_mm, the matmul loop and Triton, its share of the memory bound and the
    masked form's time against the contiguous one's."""
    doc, e = _load(root, path)
    rows = ["| experts x tokens x N x K | tokens per expert | gemmlab TFLOP/s | vs torch._grouped_mm | vs matmul loop | "
            "vs Triton | of the memory bound | torch._grouped_mm's | masked / contiguous |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc["results"]:
        shape = f"{r['G']}x{r['T']}x{r['N']}x{r['K']}"
        if not r.get("verified"):
            rows.append(f"| {shape} | | failed verification | | | | | | |")
            continue
        mb = r["of_memory_bound"]
        torch_mb = f"{100 * mb['torch._grouped_mm']:.0f}%" if "torch._grouped_mm" in mb else "-"
        rows.append(f"| {shape} | {r['min_count']}-{r['max_count']} | {r['tflops']['gemmlab']:.0f} | "
                    f"{_x(r.get('vs_grouped_mm'))} | {_x(r['vs_loop'])} | {_x(r.get('vs_triton'))} | "
                    f"{100 * mb['gemmlab']:.0f}% | {torch_mb} | {r['masked_vs_contiguous']:.2f} |")
    copy = doc["settings"].get("copy_bandwidth") or {}
    bw = f"{copy['dram_bw_Bps'] / 1e12:.2f} TB/s" if copy.get("dram_bw_Bps") else "the measured copy bandwidth"
    return ("\n".join(rows) + f"\n\nFrom {_name(e)} ({_gpu(e)}, {e['date'][:10]}, commit {_commit(e)}): "
            f"{doc['settings']['dtype']}, weights K-major, tokens routed unevenly; the peers timed in the same run; the "
            f"memory bound reads every weight and activation once and writes the output once at {bw}.")


def moe_fp8_markdown(root: Path, path: str) -> str:
    """``bench --suite moe --dtype fp8``'s result (bench/moe_fp8.py): per layer, gemmlab.scaled_grouped_mm's
    TFLOP/s promoted, with fast accumulation and with block scales, torch._scaled_grouped_mm's, the
    ratios to it and to the loop of torch._scaled_mm, and the masked form against the contiguous one."""
    doc, e = _load(root, path)
    rows = ["| experts x tokens x N x K | gemmlab TFLOP/s | fast accumulation | block scales | "
            "torch._scaled_grouped_mm | vs it | fast vs it | vs _scaled_mm loop | masked / contiguous |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc["results"]:
        shape = f"{r['G']}x{r['T']}x{r['N']}x{r['K']}"
        if not r.get("verified"):
            rows.append(f"| {shape} | failed verification | | | | | | | |")
            continue
        t = r["tflops"]
        theirs = f"{t['torch._scaled_grouped_mm']:.0f}" if "torch._scaled_grouped_mm" in t else "-"
        rows.append(f"| {shape} | {t['gemmlab']:.0f} | {t['gemmlab fast']:.0f} | {t['gemmlab block']:.0f} | {theirs} | "
                    f"{_x(r.get('vs_scaled_grouped_mm'))} | {_x(r.get('fast_vs_scaled_grouped_mm'))} | "
                    f"{_x(r.get('vs_scaled_mm_loop'))} | {r['masked_vs_contiguous']:.2f} |")
    return ("\n".join(rows) + f"\n\nFrom {_name(e)} ({_gpu(e)}, {e['date'][:10]}, commit {_commit(e)}): e4m3 "
            f"tokens and weights (weights K-major), row-wise scales unless said, bf16 out; tokens routed as the bf16 "
            f"suite routes them; the peers timed in the same run.")


def strategies_markdown(root: Path, path: str) -> str:
    """benchmarks/tune_strategies.py's result: evaluations each strategy took to reach 98% of the
    exhaustive best (median over the seeds, and how many seeds got there), batch 1."""
    doc, e = _load(root, path)
    names = [k for k in doc["problems"][0]["strategies"] if k.endswith("(batch 1)")]
    rows = ["| rung | shape | candidates | " + " | ".join(n.removesuffix(" (batch 1)") for n in names) + " |",
            "| --- " * (3 + len(names)) + "|"]
    for p in doc["problems"]:
        cells = []
        for n in names:
            st = p["strategies"].get(n) or {}
            med = st.get("median")
            cells.append(f"{med:g} ({st.get('reached')})" if med is not None else f"- ({st.get('reached', '-')})")
        rows.append(f"| `{p['rung']}` | {_shape(p['shape'])} | {p['candidates']} | " + " | ".join(cells) + " |")
    return ("\n".join(rows) + f"\n\nMedian evaluations to 98% of the exhaustive best over {doc['seeds']} seeds "
            f"(seeds that got there); from {_name(e)} ({_gpu(e)}, {e['date'][:10]}, commit {_commit(e)}).")


def overhead_markdown(root: Path, paths) -> str:
    """Host time per call (bench --overhead): gemmlab beside the array library's own matmul."""
    rows = ["| dtype | shape | library | gemmlab.gemm | gemmlab.matmul | library matmul(out=) | library matmul | result |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for doc, e in (_load(root, p) for p in paths):
        s = doc["settings"]
        for lib in doc["libs"]:
            res, name = lib["results"], lib["lib"]
            us = [res.get(k, {}).get("median_us") for k in
                  ("gemmlab.gemm", "gemmlab.matmul", f"{name}.matmul(out=)", f"{name}.matmul")]
            cells = " | ".join(f"{u:.1f} us" if u is not None else "-" for u in us)
            rows.append(f"| {s['dtype']} | {_shape(s['shape'])} | {name} | {cells} | {_name(e)}, {e['date'][:10]} |")
    return "\n".join(rows)


def plain_cublas_markdown(root: Path, path: str) -> str:
    """tools/plain_cublas.py's check of the benchmark's cuBLAS figures against a timing without gemmlab."""
    doc, e = _load(root, path)
    rows = ["| dtype | shape | bench | plain, paced | difference | plain, sustained |",
            "| --- | --- | --- | --- | --- | --- |"]
    for r in doc["rows"]:
        sus = f"{r['sustained_ms']:.3f} ms" if r.get("sustained_ms") else "-"
        rows.append(f"| {r['dtype']} | {_shape(r)} | {r['bench_ms']:.3f} ms | {r['plain_ms']:.3f} ms | "
                    f"{100 * r['difference']:+.1f}% | {sus} |")
    return "\n".join(rows) + f"\n\nFrom {_name(e)} ({_gpu(e)}, commit {_commit(e)})."


def sustained_markdown(root: Path, paths) -> str:
    """The sustained mode at the power cap: each entry's time per call against cuBLAS's, and its
    energy per call, power and SM clock, per run."""
    rows = ["| run | dtype | entry | ms per call | vs cuBLAS | mJ per call | W | SM MHz | GPU | date |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for doc, e in (_load(root, p) for p in paths):
        for r in doc["results"]:
            if r.get("ms") is None:
                continue
            who = {"cublas": "cuBLAS", "triton": "Triton"}.get(r["kernel"]) or _who(r)
            mj = f"{r['mj']:.0f}" if r.get("mj") else "-"
            w = f"{r['watts']:.0f}" if r.get("watts") else "-"
            mhz = f"{r['sm_mhz']:.0f}" if r.get("sm_mhz") else "-"
            rows.append(f"| {_name(e)} | {_prec(r)} | {who} | {r['ms']:.3f} | {_x(r['vs_cublas'])} | {mj} | {w} | "
                        f"{mhz} | {_gpu(e)} | {e['date'][:10]} |")
    return "\n".join(rows)


def results_markdown(root: Path, results: list[dict]) -> str:
    """The manifest as a table: every canonical result, what it shows, where and when it was measured."""
    rows = ["| result | what it shows | GPU | date | commit |", "| --- | --- | --- | --- | --- |"]
    for e in results:
        shows = e["shows"].replace("|", "/")
        rows.append(f"| `{e['path'].split('/', 2)[-1]}` | {shows} | {_gpu(e)} | {e['date'][:10]} | {_commit(e)} |")
    return "\n".join(rows)
