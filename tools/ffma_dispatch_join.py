"""Join Nsight Compute's per-instruction samples with the SASS's reuse flags: dispatch-stall samples
of rung 18's FFMAs by how many sources each reads from the register file, and whether two of them
share a bank (mod 4) — the figures behind SNAKE in kernels/18_async_simt.cu and benchmarks/NOTES.md.

    python tools/ffma_dispatch_join.py SOURCE.csv[.gz] LISTING.sass[.gz] OUT.json

SOURCE: ``ncu -i REPORT --page source --csv --print-source sass`` of one launch (the kernel
``gemm``); LISTING: ``nvdisasm -c -hex`` of the same cubin (the same NVRTC build: the addresses
must match, which the script checks).
"""

from __future__ import annotations

import gzip
import json
import sys

from gemmlab.analysis import disasm, hotpath
from gemmlab.analysis.ncu.source import SAMPLES, parse_source_csv


def _read(path: str) -> str:
    return (gzip.open(path, "rt") if path.endswith(".gz") else open(path)).read()


def main(src: str, listing: str, out: str) -> None:
    rows = parse_source_csv(_read(src))["gemm"]
    insns = disasm.parse_sass(_read(listing))
    path = hotpath.hot_path(insns, disasm.hot_loop(insns))
    base = int(rows[0]["Address"], 16)
    by_off = {int(r["Address"], 16) - base: r for r in rows}
    groups: dict[str, dict] = {}
    for i, reads, collide in hotpath.ffma_register_reads(path):
        r = by_off[i.offset]
        if r["Source"].strip().split(" ")[0].split(".")[0] != "FFMA":
            raise SystemExit(f"the listing does not match the samples at offset {i.offset:#x}")
        key = f"{len(reads)} reads" + (", a bank shared" if collide else (", banks apart" if len(reads) == 3 else ""))
        g = groups.setdefault(key, {"ffma": 0, "dispatch_samples": 0.0, "samples": 0.0})
        g["ffma"] += 1
        g["dispatch_samples"] += float(r["stall_dispatch"])
        g["samples"] += float(r[SAMPLES])
    for g in groups.values():
        g["dispatch_per_ffma"] = round(g["dispatch_samples"] / g["ffma"], 1)
    doc = {"source": src, "listing": listing, "interior_path_ffma": sum(g["ffma"] for g in groups.values()),
           "groups": dict(sorted(groups.items()))}
    json.dump(doc, open(out, "w"), indent=1)
    print(json.dumps(doc["groups"], indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:4])
