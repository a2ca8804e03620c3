"""How many clusters of a cluster split (rung 18, SKCLUSTER=1) the GPU holds at once, and how long
the kernel runs, under each cluster scheduling policy (default, spread, load-balancing).

Why: a cluster's blocks are placed together inside one GPC, so the clusters the GPU holds at once
can be fewer than its block slots divided by the cluster size; a grid with more clusters than that
runs a second wave. Per configuration it reports the blocks per SM (cuOccupancyMaxActiveBlocks-
PerMultiprocessor), the clusters per policy (cuOccupancyMaxActiveClusters), and the mean time of
50 back-to-back launches per policy (cuLaunchKernelEx, CUDA events; a probe beside the
benchmark's engine, not a replacement for it), and, for the plan's own launch, the same.

Run on a GPU: ``python tools/cluster_policy_probe.py OUT.json``.
"""

from __future__ import annotations

import json
import sys

T64 = "BM=64,BN=128,BK=8,WM=64,WN=64,TM=8,TN=16,STAGES=3"
T127 = "BM=128,BN=64,BK=16,WM=64,WN=32,TM=16,TN=4,STAGES=4"
CASES = [(1024, 1024, 1024, T64 + ",SPLITK=2,SKCLUSTER=1"), (1024, 1024, 1024, T64 + ",SPLITK=4,SKCLUSTER=1"),
         (1024, 1024, 1024, T64 + ",SPLITK=4"), (1024, 1024, 1024, T64 + ",SPLITK=8,SKCLUSTER=1"),
         (1024, 1024, 1024, "BM=64,BN=256,BK=8,WM=64,WN=64,TM=8,TN=16,STAGES=3,SPLITK=4,SKCLUSTER=1"),
         (1024, 1024, 1024, "128x256,SPLITK=4,SKCLUSTER=1"), (1024, 1024, 1024, "128x256,SPLITK=2,SKCLUSTER=1"),
         (127, 4097, 1023, T127 + ",SPLITK=2,SKCLUSTER=1"), (127, 4097, 1023, T127 + ",SPLITK=4,SKCLUSTER=1")]
LAUNCHES = 50


def _mean_us(torch, launch) -> float:
    for _ in range(5):
        launch()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(LAUNCHES):
        launch()
    e1.record()
    torch.cuda.synchronize()
    return round(e0.elapsed_time(e1) * 1000 / LAUNCHES, 2)


def probe(M: int, N: int, K: int, config: str) -> dict:
    import torch
    from cuda.bindings import driver as cu

    import gemmlab

    policies = {"default": cu.CUclusterSchedulingPolicy.CU_CLUSTER_SCHEDULING_POLICY_DEFAULT,
                "spread": cu.CUclusterSchedulingPolicy.CU_CLUSTER_SCHEDULING_POLICY_SPREAD,
                "balance": cu.CUclusterSchedulingPolicy.CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING}
    a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
    c = torch.zeros(M, N, device="cuda")
    plan = gemmlab.plan(a, b, c, kernel="async_simt", config=config)
    g = plan.geometry
    row = {"shape": f"{M}x{N}x{K}", "config": config, "grid": g.grid, "block": g.block, "smem": g.smem,
           "blocks_per_sm": int(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(plan.function, g.block[0], g.smem)[1])}
    for name, policy in policies.items():
        lc = cu.CUlaunchConfig()
        lc.gridDimX, lc.gridDimY, lc.gridDimZ = g.grid
        lc.blockDimX, lc.blockDimY, lc.blockDimZ = g.block
        lc.sharedMemBytes, lc.hStream = g.smem, torch.cuda.current_stream().cuda_stream
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
        attr.value.clusterSchedulingPolicyPreference = policy
        lc.attrs, lc.numAttrs = [attr], 1
        err, n = cu.cuOccupancyMaxActiveClusters(plan.function, lc)
        row[f"clusters_{name}"] = int(n) if not int(err) else None   # None: not a cluster kernel
        if row[f"clusters_{name}"] is not None:
            plan.run()   # the parameter block holds this problem's operands
            row[f"us_{name}"] = _mean_us(torch, lambda: cu.cuLaunchKernelEx(lc, plan.function, plan.kernel_params, 0))
    row["us_plan"] = _mean_us(torch, plan.run)
    return row


def main(argv: list[str]) -> int:
    import torch

    rows = []
    for case in CASES:
        rows.append(probe(*case))
        print(json.dumps(rows[-1]))
    doc = {"gpu": torch.cuda.get_device_name(), "launches": LAUNCHES, "rows": rows}
    if argv:
        with open(argv[0], "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
