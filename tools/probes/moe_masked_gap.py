"""Where the masked form's time goes at the moe suite's 128-expert layer (bench/moe.py's routing):
the contiguous form, the masked form (its group_maps kernel, then the GEMM through each group's map
of A), the masked form's GEMM through A's one map (the padding read; no group_maps launch), and
group_maps alone. Without arguments: CUDA events, warm L2, median and minimum of 200 calls each.
With ``ncu``: two rounds, for Nsight Compute to profile the second:

    ncu --clock-control none -k regex:"gemm|group_maps" --launch-skip 5 --launch-count 5 --csv \\
        --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,\\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed python tools/probes/moe_masked_gap.py ncu

(The first profiled kernels are the first round's masked GEMM, its one-map GEMM and group_maps
alone, then the second round's contiguous GEMM and its masked call's group_maps: the three module-
level calls shift the count.)"""
import statistics
import sys

import torch

import gemmlab
from gemmlab.core import grouped
from moe_ncu import G, layer   # the same layer and padded buffer (run from tools/probes: its own folder)

counts, ends, a, b, am, cnt = layer()
outm = gemmlab.grouped_mm_masked(am, b, cnt, check=False)
mplan = grouped.plans()[-1]
out = gemmlab.grouped_mm(a, b, ends, check=False)

def masked_one_map():
    mplan._params.group_src(cnt.data_ptr())
    mplan.launch(am.data_ptr(), b.data_ptr(), outm.data_ptr(), 1.0, 0.0, None, 0)

def maps_only():
    from gemmlab.core import workspace, tensormaps
    st = torch.cuda.current_stream().cuda_stream
    ws = workspace.acquire(mplan.ordinal, st, tensormaps.MAP_BYTES * G)
    mplan._launch_group_maps(cnt.data_ptr(), ws, st)
    workspace.release(mplan.ordinal, st, ws)

cases = {"contiguous": lambda: gemmlab.grouped_mm(a, b, ends, check=False, out=out),
         "masked": lambda: gemmlab.grouped_mm_masked(am, b, cnt, check=False, out=outm),
         "masked_one_map": masked_one_map, "group_maps_only": maps_only}
if sys.argv[1:] == ["ncu"]:
    for _ in range(2):
        for f in cases.values():
            f()
    torch.cuda.synchronize()
    sys.exit()
for name, f in cases.items():
    for _ in range(20):
        f()
    ts = []
    for _ in range(200):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); f(); e1.record(); torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e3)
    print(f"{name:18s} median {statistics.median(ts):8.2f} us  min {min(ts):8.2f} us")
