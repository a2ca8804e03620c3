"""Rung 26's stream-K tail at last-wave fills from 0.08 to 0.40: for each of two layer families
(8 experts of N = 4096, K = 14336; 32 experts of N = 2048, K = 7168) the token count whose routed
units (bench/moe.py's ``route``; 128x256 tiles) fill the last wave so far, and the time of the
STREAMK=1 build against DEFER=0 without a tail, timed together by the one timing engine:

    python tools/probes/moe_streamk_fills.py LABEL

One line per layer. What schedule.cuh's choice between splitting the last wave's units alone and
splitting them with the wave before them rests on: run it once per tree, the second with that
choice changed, and compare the lines."""
from __future__ import annotations

import sys

import torch

import gemmlab
from gemmlab.bench.moe import route
from gemmlab.core.driver import device_info
from gemmlab.measure.arrays import Lib
from gemmlab.measure.gpu_timing import CudaDevice, NvmlClocks
from gemmlab.measure.timing import Candidate, Engine, Settings

FAMILIES = ((8, 4096, 14336, 2048), (32, 2048, 7168, 4096))   # G, N, K, the first T tried
FILLS = (0.08, 0.15, 0.22, 0.3, 0.4)


def units(counts, N: int) -> int:
    return sum(-(-c // 128) for c in counts) * -(-N // 256)


def tokens_for(G: int, N: int, T: int, fill: float, sms: int) -> tuple[int, list[int]]:
    """The first T from ``T`` up (in 16s) whose routing makes more than a wave of units, the last
    wave ``fill`` full (within 0.02)."""
    while True:
        counts = route(torch, T, G)
        u = units(counts, N)
        if u > sms and abs(u % sms / sms - fill) < 0.02:
            return T, counts
        T += 16


def main(label: str) -> None:
    info = device_info(0)
    st = Settings(l2="cold", max_samples=20, time_cap_s=1.0)
    engine = Engine(CudaDevice(Lib("torch"), 0, info.l2_bytes, flush=True, spin=st.spin), st, NvmlClocks(0))
    for G, N, K, T0 in FAMILIES:
        for fill in FILLS:
            T, counts = tokens_for(G, N, T0, fill, info.sm_count)
            ends = torch.tensor(counts).cumsum(0).to(torch.int32).cuda()
            a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
            out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
            cands = [Candidate(n, (lambda c=c: gemmlab.grouped_mm(a, b, ends, out=out, config=c, check=False)))
                     for n, c in (("sk", {"DEFER": 0, "STREAMK": 1}), ("d0", {"DEFER": 0}))]
            for c in cands:
                c.fn()
            engine.warm_up(cands)
            t = {n: s.median for n, s in engine.measure(cands).samples.items()}
            u = units(counts, N)
            print(label, G, T, N, K, f"units {u} waves {u / info.sm_count:.2f}", f"sk/d0 {t['d0'] / t['sk']:.3f}",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
