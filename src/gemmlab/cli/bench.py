"""``gemmlab bench``: time the rungs beside cuBLAS and the peers on this GPU (see ``gemmlab.bench``)."""

from __future__ import annotations

import dataclasses

from ..bench import overhead, workloads
from ..bench.results import exit_code, write_json
from ..bench.runner import run_bench
from ..bench.table import render
from ..core.config import parse_config
from ..core.epilogue import ACTIVATIONS
from ..core.shapes import (BANDWIDTH_SUITES, EPILOGUE_ACTIVATION, OVERHEAD_SHAPE, SUITE_FORMS, fmt_shape,
                           parse_batched_shapes, parse_shapes, shapes_text, suite)
from ..measure.timing import Settings
from .common import add_config, add_dtype, add_lib, add_precision, add_timing, checked, suite_name, timing_settings

SUSTAINED_S = 2.0   # seconds of GPU time per block: NVML's energy counter moves every ~100 ms, ~20 steps a block


def register(sub) -> None:
    p = sub.add_parser(
        "bench", help="time the rungs beside cuBLAS and Triton on this GPU (verified first, one timing engine)",
        description="Time the rungs of the ladder, cuBLAS and the peers a user would pick instead (Triton) on the "
                    "same random inputs in the same run: verify each first, then interleaved rounds in a balanced "
                    "order (L2 flushed and the GPU kept busy before every timed launch) until each entry's noise "
                    "target is met; report medians, TFLOP/s, the ratios to cuBLAS and to the best peer, % of the "
                    "GPU's peak, and a self-check of the cuBLAS baseline timed alone. Without --shape the shape "
                    "is 4096^3 (the naive rungs 2048^3, beside cuBLAS at 2048^3).")
    p.add_argument("rungs", nargs="*", metavar="RUNG",
                   help="rung slugs or numbers, and auto (what kernel=\"auto\" picks for each shape) "
                        "(default: every rung that supports --dtype)")
    p.add_argument("--shape", "--shapes", dest="shapes", action="append", metavar="SHAPES", type=checked(_shapes_text),
                   help="N, N^3 or MxNxK, comma-separated; repeatable (default 4096^3, naive rungs 2048^3); "
                        "BxMxNxK with --suite batched, GxTxNxK (experts, tokens) with --suite moe")
    p.add_argument("--suite", type=_suite_or_workload, default=None, metavar="SUITE",
                   help=f"the shapes of a benchmark suite (core/shapes.py; with --shape: both): {SUITE_FORMS}; "
                        "random draws N shapes (default 48) from SEED (default 0), the same on every machine; the "
                        "table and JSON end with each kernel's geomean ratio to cuBLAS and its shapes below 0.8x; "
                        "decode adds GB/s and %% of the copy bandwidth measured in the run. Workloads, gemmlab's "
                        "call against PyTorch's (bench/workloads.py; --dtype, --activation, timing options): batched "
                        "(matmul of (B, M, K) @ (B, K, N) against torch.bmm), epilogue (bias + activation fused, "
                        "against the plain GEMM, torch._addmm_activation and unfused PyTorch) and out_dtype (an "
                        "FP32 result of fp16/bf16 operands against torch.mm(out_dtype=float32)), fp8 "
                        "(gemmlab.scaled_mm against torch._scaled_mm, tensor-wise and row-wise scales, promoted "
                        "and fast accumulation; also --dtype fp8 without a RUNG) and moe (gemmlab.grouped_mm "
                        "over the experts against torch._grouped_mm, a loop of matmuls and Triton, with the "
                        "memory bound; bf16 unless --dtype fp16; --dtype fp8: gemmlab.scaled_grouped_mm against "
                        "torch._scaled_grouped_mm and a loop of torch._scaled_mm)")
    p.add_argument("--activation", default=None, choices=list(ACTIVATIONS),
                   help=f"the epilogue suite's activation (default {EPILOGUE_ACTIVATION})")
    p.add_argument("--bandwidth", action="store_true",
                   help="measure the copy bandwidth in the run and report each entry's GB/s and %% of it "
                        "(on with --suite decode)")
    add_dtype(p, "fp32")
    add_precision(p)
    p.add_argument("--peers", default=None, metavar="NAMES",
                   help="comma-separated peers to time beside the rungs (cublas, triton); default: every peer "
                        "usable here (cuBLAS always)")
    p.add_argument("--no-verify", dest="verify", action="store_false", help="time without checking results first")
    add_config(p, "the one rung named")
    add_lib(p)
    add_timing(p)
    p.add_argument("--sustained", type=float, nargs="?", const=SUSTAINED_S, default=0.0, metavar="S",
                   help="time blocks of back-to-back launches, about S GPU seconds each (default "
                        f"{SUSTAINED_S:g}), in serpentine rounds, as a loop calling the GEMM gets it: the GPU at its "
                        "steady state (for a large tensor-core GEMM, the power cap); adds each entry's energy per "
                        "call, power, SM clock and GFLOP/J (NVML)")
    p.add_argument("--sustained-rounds", type=int, default=Settings().sustained_rounds, metavar="N",
                   help=f"blocks per entry with --sustained (even; default {Settings().sustained_rounds})")
    p.add_argument("--overhead", action="store_true",
                   help="measure host time per call instead: gemmlab.gemm / gemmlab.matmul beside cupy.matmul and "
                        f"torch.matmul on a problem seen before (one RUNG or auto; --shape, default {fmt_shape(OVERHEAD_SHAPE)})")
    p.add_argument("--json", metavar="FILE", default=None, help="write every figure and the environment to FILE")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar on stderr")
    p.set_defaults(func=run)


def _shapes_text(text: str):
    """argparse check of ``--shape``: MxNxK shapes (parse_shapes) or BxMxNxK ones (the batched
    suite's); the MxNxK error where neither reads it."""
    try:
        return parse_shapes(text)
    except ValueError as exc:
        try:
            return parse_batched_shapes(text)
        except ValueError:
            raise exc from None


def _suite_or_workload(text: str) -> str:
    """argparse type of bench's ``--suite``: a workload suite's name, or a GEMM suite's (suite_name)."""
    return text if text in workloads.WORKLOADS else suite_name(text)


def run_workload(args, settings: Settings) -> int:
    """``--suite batched`` / ``epilogue`` / ``out_dtype`` / ``fp8`` (also ``--dtype fp8`` without a RUNG) /
    ``moe``: bench/workloads.py, on the suite's shapes or those of ``--shape`` (BxMxNxK for batched,
    GxTxNxK for moe, MxNxK for the others)."""
    for flag, given in (("RUNG", args.rungs), ("--config", args.config), ("--peers", args.peers),
                        ("--precision", args.precision), ("--sustained", args.sustained)):
        if given:
            raise ValueError(f"--suite {args.suite} times gemmlab's call against PyTorch's: {flag} does not apply")
    if args.activation and args.suite != "epilogue":
        raise ValueError("--activation is the epilogue suite's")
    shapes = None
    if args.shapes:
        text = ",".join(args.shapes)
        shapes = parse_batched_shapes(text) if args.suite in ("batched", "moe") else parse_shapes(text)
    result = workloads.run_workload(args.suite, args.dtype, settings, shapes=shapes, activation=args.activation,
                                    progress=args.progress)
    workloads.render(result)
    if args.json:
        print(f"wrote {write_json(result, args.json)}")
    return workloads.exit_code(result)


def suite_shapes(name: str | None, shapes: list[str] | None) -> str | None:
    """The shapes of ``--suite`` then those of ``--shape`` as one comma-separated text (None: neither)."""
    parts = ([shapes_text(suite(name))] if name else []) + list(shapes or [])
    return ",".join(parts) if parts else None


def run_overhead(args) -> int:
    if len(args.rungs) > 1:
        raise ValueError("bench --overhead takes one RUNG (or none: auto)")
    shapes = parse_shapes(",".join(args.shapes)) if args.shapes else [OVERHEAD_SHAPE]
    if len(shapes) != 1:
        raise ValueError("bench --overhead takes one --shape")
    result = overhead.run_overhead(shapes[0], args.dtype, args.rungs[0] if args.rungs else "auto",
                                   [args.lib] if args.lib else None)
    overhead.render(result)
    if args.json:
        print(f"wrote {write_json(result, args.json)}")
    return overhead.exit_code(result)


def bench_settings(args) -> Settings:
    """The timing engine's settings of ``bench``: the shared timing options and --sustained."""
    if args.sustained and args.overhead:
        raise ValueError("--sustained times the GPU and --overhead the host: pick one")
    return dataclasses.replace(timing_settings(args), sustained_s=args.sustained,
                               sustained_rounds=args.sustained_rounds)


def run(args) -> int:
    settings = bench_settings(args)
    if args.overhead:
        return run_overhead(args)
    if args.dtype == "fp8" and args.suite in (None, "fp8") and not args.rungs:   # FP8 takes scales: scaled_mm
        args.suite = "fp8"
    if args.suite in workloads.WORKLOADS:
        return run_workload(args, settings)
    if args.activation:
        raise ValueError("--activation is the epilogue suite's (--suite epilogue)")
    config = parse_config(args.config)
    shapes = suite_shapes(args.suite, args.shapes)
    peers = [s.strip() for s in args.peers.split(",") if s.strip()] if args.peers is not None else None
    result = run_bench(rungs=args.rungs or None, shapes=shapes, dtype=args.dtype,
                       timing_settings=settings, verify=args.verify, lib=args.lib,
                       progress=args.progress, config=config, peers=peers, precision=args.precision,
                       bandwidth=args.bandwidth or args.suite in BANDWIDTH_SUITES)
    render(result)
    if args.json:
        path = write_json(result, args.json)
        print(f"wrote {path}")
    return exit_code(result)
