"""The sweep behind the batched rules (core/families/hopper.py batched_config, core/families/simt.py
simt_batched_config): each configuration they weigh, timed as a batch in one launch beside torch.bmm
on the timing engine (cold L2, the GPU busy before each launch, candidates interleaved), after a
check against float64. Rung 21 (bf16): 128-row tiles of 256/128/64 columns, DEFER 0/1, 4 or 6
stages, clusters of 1 or 2; rung 18 (fp32): the presets of SIMT_BATCHED_RATE. On sizes whose rows
are not whole 16-byte vectors (ODD_SHAPES), the rule's tile with and without copying them first
(PACK 0 / 1).

    python tools/batched_sweep.py --json benchmarks/results/h200_batched_sweep.json
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

import gemmlab
from gemmlab.analysis import environment
from gemmlab.bench import workloads
from gemmlab.core.driver import device_info
from gemmlab.core.families.hopper import batched_config
from gemmlab.core.families.simt import SIMT_BATCHED_RATE, simt_batched_config
from gemmlab.core.registry import get
from gemmlab.measure import timing

SHAPES = ((32, 512, 512, 64), (32, 512, 64, 512), (16, 1024, 1024, 128), (64, 128, 128, 128), (8, 2048, 2048, 2048),
          (32, 1024, 1024, 128), (8, 4096, 4096, 128), (8, 4096, 128, 4096))
ODD_SHAPES = ((9, 114, 90, 1431), (19, 640, 383, 158), (34, 418, 901, 501), (52, 250, 86, 60), (33, 90, 560, 423),
              (3, 911, 54, 1177), (52, 108, 733, 673), (3, 593, 76, 1428))
RUNG21 = {"256 DEFER=1": {"BN": 256, "DEFER": 1, "STAGES": 4}, "256 DEFER=0": {"BN": 256, "DEFER": 0, "STAGES": 4},
          "256 CLUSTER=2": {"BN": 256, "DEFER": 1, "STAGES": 4, "CLUSTER": 2},
          "128 4 stages": {"BN": 128, "DEFER": 0, "STAGES": 4}, "128 6 stages": {"BN": 128, "DEFER": 0, "STAGES": 6},
          "128 DEFER=1": {"BN": 128, "DEFER": 1, "STAGES": 4},
          "128 CLUSTER=2": {"BN": 128, "DEFER": 0, "STAGES": 4, "CLUSTER": 2},
          "64 4 stages": {"BN": 64, "DEFER": 0, "STAGES": 4}, "64 8 stages": {"BN": 64, "DEFER": 0, "STAGES": 8}}


def _pack_configs(dtype: str, shape, sm_count: int) -> dict:
    """The batched rule's tile for ``shape`` with PACK 0 and 1."""
    B, M, N, K = shape
    if dtype == "fp32":
        r = get("async_simt")
        cfg = r.config(simt_batched_config(M, N, K, B, sm_count, {n: r.config(n) for n in SIMT_BATCHED_RATE})[0])
        kernel = "async_simt"
    else:
        cfg, kernel = batched_config(M, N, K, B, sm_count)[0], "wgmma_ws"
    return {f"PACK={p}": (kernel, {**cfg, "PACK": p}) for p in (0, 1)}


def _configs(dtype: str, M: int, N: int) -> dict:
    if dtype == "fp32":
        return {name: ("async_simt", name) for name in SIMT_BATCHED_RATE}
    out = {}
    for name, cfg in RUNG21.items():
        if cfg["BN"] > 64 and N <= cfg["BN"] // 2 or cfg.get("CLUSTER", 1) == 2 and M <= 128:
            continue
        out[name] = ("wgmma_ws", {"BM": 128, "WM": 64, "BK": 64, "CLUSTER": 1, **cfg})
    return out


def sweep(shape, dtype: str, engine, configs: dict | None = None) -> dict:
    B, M, N, K = shape
    tdt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    a, b = torch.randn(B, M, K, device="cuda", dtype=tdt), torch.randn(B, K, N, device="cuda", dtype=tdt)
    out, peer = torch.empty(B, M, N, device="cuda", dtype=tdt), torch.empty(B, M, N, device="cuda", dtype=tdt)
    want = torch.bmm(a.double(), b.double())
    cands = [timing.Candidate("torch.bmm", lambda: torch.bmm(a, b, out=peer)),
             timing.Candidate("auto", lambda: gemmlab.matmul(a, b, out=out))]
    errors = {}
    for name, (kernel, cfg) in (configs or _configs(dtype, M, N)).items():
        gemmlab.matmul(a, b, out=out, kernel=kernel, config=cfg)
        errors[name] = float((out.double() - want).norm() / want.norm())
        cands.append(timing.Candidate(name, lambda kernel=kernel, cfg=cfg: gemmlab.matmul(a, b, out=out, kernel=kernel,
                                                                                         config=cfg)))
    run = engine.measure(cands)
    med = {k: s.median for k, s in run.samples.items()}
    return {"B": B, "M": M, "N": N, "K": K, "dtype": dtype, "rel_error": errors, "median_ms": med,
            "vs_torch_bmm": {k: med["torch.bmm"] / v for k, v in med.items() if k != "torch.bmm"},
            "samples": {k: s.as_dict() for k, s in run.samples.items()}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dtype", action="append", choices=("bf16", "fp32"))
    p.add_argument("--json")
    args = p.parse_args(argv)
    info = device_info(0)
    st = timing.Settings()
    engine = workloads.engine(0, st)
    rows, bad = [], 0
    for dtype in args.dtype or ("bf16", "fp32"):
        for shape, configs in [(s, None) for s in SHAPES] + [(s, _pack_configs(dtype, s, info.sm_count)) for s in ODD_SHAPES]:
            r = sweep(shape, dtype, engine, configs)
            tol = 1e-2 if dtype == "bf16" else 1e-5
            bad += sum(e > tol for e in r["rel_error"].values())
            rows.append(r)
            print(f"{dtype} {'x'.join(map(str, shape))}: " + ", ".join(f"{k} {v:.3f}x" for k, v in r["vs_torch_bmm"].items()),
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": environment.collect(0), "settings": st.as_dict(), "results": rows}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
