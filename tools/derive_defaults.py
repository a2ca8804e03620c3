"""Derive the shipped dispatch defaults of an architecture from the canonical benchmark results,
until the tuner's run on that GPU replaces them (``gemmlab tune RUNG --suite fp32 --emit-defaults FILE``).

    python tools/derive_defaults.py                       # writes src/gemmlab/data/defaults_sm90.json

Entries: every FP32 shape measured in the canonical results (the manifest,
``gemmlab.report.manifest``) on the architecture, with the fastest gemmlab rung there and its
configuration ("source": the file); then the FP32 suite's shapes
not measured, with the dispatch rule's choice for the GPU's SM count ("source": "rule"). FP16 and
BF16 get no entries (``--dtypes`` adds them): their measurements name mma_sync, and with the WGMMA
rung being added an entry naming today's top rung would keep ``auto`` on it near those shapes,
while the rule picks the top rung, whatever it is; the tuner's run fills them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gemmlab.core import dispatch
from gemmlab.core.registry import for_dtype
from gemmlab.core.shapes import FP32_SUITE
from gemmlab.report.manifest import entries, read_result
from gemmlab.tune.export import best_per_shape, write_table

ROOT = Path(__file__).resolve().parent.parent


def measured(root: Path, arch: str, dtypes) -> list[dict]:
    out = []
    for e in entries(root):
        if not e["path"].startswith("benchmarks/results/") or not e["path"].endswith((".json", ".json.gz")):
            continue
        doc = read_result(root / e["path"])
        if not isinstance(doc, dict) or not str((doc.get("env") or {}).get("arch", "")).startswith(arch[:5]):
            continue
        for r in doc.get("results") or []:
            if r.get("peer") or not r.get("tflops") or r.get("status") != "ok" or r["kernel"] == "auto" \
                    or r["dtype"] not in dtypes:
                continue
            out.append({"dtype": r["dtype"], "shape": [r["M"], r["N"], r["K"]], "layout": "rr", "rung": r["kernel"],
                        "config": r["config"], "tflops": round(r["tflops"], 2), "vs_cublas": round(r["vs_cublas"], 3),
                        "source": e["path"]})
    return best_per_shape(out)


def ruled(arch: str, sm_count: int, have: set) -> list[dict]:
    rung = for_dtype("fp32", arch)[-1]
    out = []
    for M, N, K in FP32_SUITE:
        if ("fp32", (M, N, K)) in have:
            continue
        cfg, why = dispatch.rule_config(rung, M, N, K, sm_count)
        out.append({"dtype": "fp32", "shape": [M, N, K], "layout": "rr", "rung": rung.slug, "config": cfg,
                    "source": f"rule ({sm_count} SMs): {why}"})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--sm-count", type=int, default=132, help="SMs of the GPU (H100 SXM: 132)")
    ap.add_argument("--gpu-name", default="NVIDIA H100 80GB HBM3")
    ap.add_argument("--out", default=None, help="default: src/gemmlab/data/defaults_sm<NN>.json")
    ap.add_argument("--dtypes", default="fp32", help="comma-separated dtypes whose measurements become entries")
    args = ap.parse_args()
    table = measured(ROOT, args.arch, args.dtypes.split(","))
    table += ruled(args.arch, args.sm_count, {(e["dtype"], tuple(e["shape"])) for e in table})
    out = args.out or dispatch.defaults_path(args.arch)
    write_table(out, table, arch=args.arch, gpu_name=args.gpu_name,
                source="tools/derive_defaults.py: the canonical FP32 measurements (benchmarks/results/MANIFEST.json) and, for "
                       "the FP32 suite's other shapes, the dispatch rule (fp16/bf16: none yet, the rule answers); to be replaced by the tuner's run on this GPU "
                       "(gemmlab tune RUNG --suite fp32|llm --emit-defaults FILE); each entry names its source")
    print(f"wrote {out} ({len(table)} entries)")


if __name__ == "__main__":
    main()
