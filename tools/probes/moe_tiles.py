"""Rung 26's tiles and switches on mixture-of-experts layers, beside torch._grouped_mm, timed together
per shape by the one timing engine (cold L2, NVML clocks), the tokens routed as bench --suite moe
routes them (bench/moe.py, ``route``):

    python tools/probes/moe_tiles.py OUT.json [GxTxNxK ...]
    python tools/probes/moe_tiles.py OUT.json --random COUNT [--seed S]

What the grouped rule's tile choice rests on (core/families/hopper.py, ``grouped_config``): the
suite's shapes and others. ``--random``: a held-out sample of layers the rule was not set on
(``held_out``), timed beside the rule's alternatives, so that auto's share of the best configuration
is judged away from the shapes that chose it. One JSON, TFLOP/s per configuration."""
from __future__ import annotations

import json
import math
import random
import sys

import torch

import gemmlab
from gemmlab.bench.moe import route
from gemmlab.core import grouped
from gemmlab.measure.timing import Candidate

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import timed  # noqa: E402

SHAPES = ["8x4096x14336x4096", "8x4096x4096x14336", "64x8192x2048x7168", "128x4096x768x2048",
          # not in the suite: a smaller Mixtral-like layer, many experts of mid size, few tokens each
          "8x1024x14336x4096", "16x8192x2816x2048", "32x2048x5120x1536", "256x8192x2048x7168"]
CONFIGS = {"128x256": "128x256", "128x256_d0": {"DEFER": 0}, "128x256_c2": "128x256_cluster", "128x128": "128x128",
           "128x128_s4": {"BN": 128, "STAGES": 4, "DEFER": 0}, "128x64": "128x64",
           "128x256_sk": {"DEFER": 0, "STREAMK": 1}, "128x128_sk": {"BN": 128, "STAGES": 6, "DEFER": 0, "STREAMK": 1}}
# what a held-out layer is timed with: the rule's choices (auto picks among them) and torch's
HELD_OUT_CONFIGS = ("128x256", "128x256_d0", "128x256_sk", "128x128", "128x64")


def held_out(count: int, seed: int) -> list[str]:
    """``count`` random layers: G experts of 4 to 256, T tokens of 256 to 32768 (log-uniform), N and K
    multiples of 128 from 512 to 16384 (log-uniform), at most 2^32 elements per operand."""
    rnd, out = random.Random(seed), []

    def log_uniform(lo, hi, step):
        return max(lo, round(math.exp(rnd.uniform(math.log(lo), math.log(hi))) / step) * step)
    while len(out) < count:
        G, T = rnd.choice((4, 8, 16, 32, 64, 128, 256)), log_uniform(256, 32768, 1)
        N, K = log_uniform(512, 16384, 128), log_uniform(512, 16384, 128)
        if G * N * K < 2 ** 32 and T * max(N, K) < 2 ** 32:
            out.append(f"{G}x{T}x{N}x{K}")
    return out


def layers(args: list[str], default: list[str]) -> tuple[list[str], bool]:
    """The layers a tiles probe's arguments name and whether they are a held-out draw: ``--random
    COUNT [--seed S]`` (``held_out``), else the GxTxNxK given, else ``default``."""
    if args[:1] == ["--random"]:
        return held_out(int(args[1]), int(args[args.index("--seed") + 1]) if "--seed" in args else 0), True
    return args or default, False


def engine_and_doc():
    """The timing engine (cold L2, NVML clocks) and the result document the tiles probes fill."""
    return timed.engine_and_doc(30, 1.5)


def record(engine, doc: dict, shape: str, counts: list, cands: list, plans: dict) -> None:
    """One layer's candidates timed together, its TFLOP/s per candidate appended to ``doc``."""
    G, T, N, K = (int(x) for x in shape.split("x"))
    res, tflops = timed.measure(engine, cands, 2.0 * T * N * K)
    doc["runs"].append({"shape": [G, T, N, K], "counts": counts, "tflops": tflops, "plans": plans, "samples": res})
    print(shape, {k: round(v) for k, v in sorted(tflops.items(), key=lambda kv: -kv[1])}, flush=True)


def main(out_path: str, shapes: list[str], configs: dict) -> None:
    engine, doc = engine_and_doc()
    for shape in shapes:
        G, T, N, K = (int(x) for x in shape.split("x"))
        counts = route(torch, T, G)
        ends = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(torch.int32).cuda()
        a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
        out = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
        cands, plans = [], {}
        for name, cfg in {**configs, "auto": None}.items():
            try:
                gemmlab.grouped_mm(a, b, ends, out=out, config=cfg, check=False)
            except ValueError as exc:   # a configuration the shape's launch refuses
                plans[name] = f"refused: {exc}"
                continue
            plans[name] = repr(grouped.plans()[-1])
            cands.append(Candidate(name, lambda cfg=cfg: gemmlab.grouped_mm(a, b, ends, out=out, config=cfg, check=False)))
        cands.append(Candidate("torch_grouped_mm", lambda: torch._grouped_mm(a, b, offs=ends)))
        record(engine, doc, shape, counts, cands, plans)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    shapes, drawn = layers(sys.argv[2:], SHAPES)
    main(sys.argv[1], shapes, {k: CONFIGS[k] for k in HELD_OUT_CONFIGS} if drawn else CONFIGS)
