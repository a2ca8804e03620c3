"""Problem shapes: the defaults every command uses, the benchmark suites, and parsing of shapes
given on the command line (``4096``, ``4096^3``, ``127x4097x1023``)."""

from __future__ import annotations

import math
import random
import re

Shape = tuple[int, int, int]

# ---- the defaults: the one place they are defined ---------------------------------------------
BENCH_SHAPE: Shape = (4096, 4096, 4096)       # bench and the report's ladder
REDUCED_SHAPE: Shape = (2048, 2048, 2048)     # the naive rungs (no K tile) in the default bench
THIN_SHAPE: Shape = (4096, 16, 4096)          # the thin rungs (registry.Rung.thin) in the default bench
PROFILE_SHAPE: Shape = (2048, 2048, 2048)     # Nsight Compute replays each kernel many times
SWEEP_SIZES: tuple[int, ...] = (256, 512, 1024, 2048, 4096)  # the report's size sweep (square)
CEILING_SHAPE: Shape = (8192, 8192, 8192)     # cuBLAS at its best: the report's compute ceiling
# verify: odd sizes below and across tile edges, the 1x1x1 corner and a long K
VERIFY_SHAPES: tuple[Shape, ...] = ((127, 129, 65), (1, 1, 1), (257, 31, 1000))
OVERHEAD_SHAPE: Shape = (64, 64, 64)          # bench --overhead: kernels of a few microseconds

# ---- the benchmark suites: defined here once; bench and tune take them by name (--suite) ----------
# FP32 (issue 9, section 4): squares, the shapes of layers, odd sizes, and few output tiles with a
# long K (the split-K shapes: 256x256x65536, 16x4096x4096, 4096x16x4096).
FP32_SUITE: tuple[Shape, ...] = (
    (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
    (4096, 4096, 1024), (8192, 1024, 8192), (16384, 16384, 512), (4096, 14336, 4096),
    (1000, 1000, 1000), (127, 4097, 1023), (256, 256, 65536), (16, 4096, 4096), (4096, 16, 4096),
)
# LLM (issue 10, section 3): M tokens against the N x K weights of a 7-8B model's projections
# (attention 4096x4096 and 6144x4096 fused QKV, MLP up 14336x4096 and down 4096x14336), plus an odd
# cube, an odd small shape and the long-K shape.
LLM_TOKENS: tuple[int, ...] = (128, 1024, 4096, 8192)
LLM_WEIGHTS: tuple[tuple[int, int], ...] = ((4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336))   # N x K
LLM_SUITE: tuple[Shape, ...] = tuple((m, n, k) for m in LLM_TOKENS for n, k in LLM_WEIGHTS) + (
    (4093, 4093, 4093), (127, 4097, 1023), (256, 256, 65536))
# Decode (issue 40): M of 1 to 32 tokens against the same weights; memory-bound, so the bench
# reports GB/s and the share of the measured copy bandwidth beside the ratio to cuBLAS.
DECODE_TOKENS: tuple[int, ...] = (1, 4, 16, 32)
DECODE_SUITE: tuple[Shape, ...] = tuple((m, n, k) for n, k in LLM_WEIGHTS for m in DECODE_TOKENS)
SUITES: dict[str, tuple[Shape, ...]] = {"fp32": FP32_SUITE, "llm": LLM_SUITE, "decode": DECODE_SUITE}
# The workload suites (issue 41; bench/workloads.py), timed against PyTorch's peers rather than as
# rungs beside cuBLAS. Batched: (B, M, N, K) of (B, M, K) @ (B, K, N): the five (attention
# scores and values of 64-wide heads, a few tiles per element, a large batch of small products, few
# large ones), then attention of 128-wide heads at 1024 and 4096 tokens (B = batch x heads).
BatchedShape = tuple[int, int, int, int]
BATCHED_SUITE: tuple[BatchedShape, ...] = (
    (32, 512, 512, 64), (32, 512, 64, 512), (16, 1024, 1024, 128), (64, 128, 128, 128), (8, 2048, 2048, 2048),
    (32, 1024, 1024, 128), (32, 1024, 128, 1024), (8, 4096, 4096, 128), (8, 4096, 128, 4096))
# Epilogue: a linear layer with bias and activation, act(x @ W + b): the three (an MLP's up
# projection at 4096 and 128 tokens, a cube), and the 7-8B model's MLP at 1024 tokens and its
# attention projection at 4096.
EPILOGUE_SUITE: tuple[Shape, ...] = ((4096, 14336, 4096), (128, 14336, 4096), (8192, 8192, 8192),
                                     (1024, 14336, 4096), (4096, 4096, 4096))
EPILOGUE_ACTIVATION = "gelu_tanh"   # the one cuBLASLt fuses too (torch._addmm_activation)
# An FP32 output from 16-bit operands: a language model's logits (4096 and 128 tokens over a 32000
# vocabulary, and 16 tokens of decoding), a MoE router's 64 experts, an MLP projection at 1024
# tokens, and two cubes.
OUT_DTYPE_SUITE: tuple[Shape, ...] = ((4096, 4096, 4096), (8192, 8192, 8192), (4096, 32000, 4096),
                                      (1024, 14336, 4096), (128, 32000, 4096), (4096, 64, 4096), (16, 32000, 4096))
# FP8 (issue 42's shapes): two cubes, an MLP's up projection at 4096 and 128 tokens, its down
# projection at 1024 tokens, and DeepGEMM's published 4096x7168x16384.
FP8_SUITE: tuple[Shape, ...] = ((4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (128, 14336, 4096),
                                (1024, 4096, 14336), (4096, 7168, 16384))
# Mixture-of-experts layers (G experts, T tokens, N, K; bench --suite moe): a Mixtral-like layer's
# up and down projections (8 experts), a DeepSeek-V3-like one (64 experts of 2048 x 7168) and a
# fine-grained one (128 small experts); the grouped GEMM issue's anchors.
MOE_SUITE: tuple[tuple[int, int, int, int], ...] = ((8, 4096, 14336, 4096), (8, 4096, 4096, 14336),
                                                    (64, 8192, 2048, 7168), (128, 4096, 768, 2048))
SUITE_DTYPES: dict[str, tuple[str, ...]] = {"fp32": ("fp32",), "llm": ("fp16", "bf16"), "decode": ("fp16", "bf16"),
                                            "random": ("fp32", "fp16", "bf16")}   # what each is for
BANDWIDTH_SUITES = ("decode",)   # bench shows GB/s and % of the copy bandwidth for these

# Random (issue 40): shapes nobody tuned on. ``random[:N][@SEED]`` draws N shapes from SEED,
# log-uniformly per dimension in these bounds, with Python's Mersenne Twister (random.Random: the
# same numbers from the same integer seed on every platform and Python 3 version).
RANDOM_N = 48
RANDOM_SEED = 0
RANDOM_BOUNDS: tuple[tuple[int, int], ...] = ((1, 12288), (16, 12288), (16, 12288))   # M, N, K
SUITE_FORMS = "fp32, llm, decode, random[:N][@SEED] (e.g. random, random:64, random@7, random:64@7)"
_RANDOM = re.compile(r"random(?::(?P<n>[^@]*))?(?:@(?P<seed>.*))?")
_DIGITS = re.compile(r"[0-9]+")


def random_shapes(n: int = RANDOM_N, seed: int = RANDOM_SEED) -> tuple[Shape, ...]:
    """``n`` shapes drawn from ``seed``: each of M, N, K log-uniform in ``RANDOM_BOUNDS``
    (exp of a uniform draw between the logs of the bounds, rounded to the nearest integer), M then
    N then K for each shape in turn."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"a random suite needs at least one shape, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"a random suite's seed must be a non-negative int, got {seed!r}")
    rng = random.Random(seed)

    def draw(lo: int, hi: int) -> int:
        return min(hi, max(lo, round(math.exp(rng.uniform(math.log(lo), math.log(hi))))))

    return tuple(tuple(draw(lo, hi) for lo, hi in RANDOM_BOUNDS) for _ in range(n))   # type: ignore[misc]


def parse_random(name: str) -> tuple[int, int] | None:
    """(N, SEED) of a ``random[:N][@SEED]`` suite name; None for another name; ValueError for a
    random one that is malformed."""
    m = _RANDOM.fullmatch(name)
    if m is None:
        return None
    n, seed = m.group("n"), m.group("seed")
    # ASCII digits only: int() would also take " 5", "+5", "5_0" and other scripts' digits, forms
    # that the help does not show and that a reader of a result file would not take for a number
    if any(part is not None and not _DIGITS.fullmatch(part) for part in (n, seed)):
        raise ValueError(f"suite {name!r}: N and SEED must be integers; suites: {SUITE_FORMS}")
    count = RANDOM_N if n is None else int(n)
    start = RANDOM_SEED if seed is None else int(seed)
    if count < 1 or start < 0:
        raise ValueError(f"suite {name!r}: N must be at least 1 and SEED at least 0; suites: {SUITE_FORMS}")
    return count, start


def suite(name: str) -> tuple[Shape, ...]:
    """The shapes of a suite by name (``fp32``, ``llm``, ``decode``, ``random[:N][@SEED]``);
    ValueError naming the suites."""
    if not isinstance(name, str):
        raise ValueError(f"a suite is named by a string; suites: {SUITE_FORMS}")
    if name in SUITES:
        return SUITES[name]
    drawn = parse_random(name)
    if drawn is None:
        raise ValueError(f"unknown suite {name!r}; suites: {SUITE_FORMS}")
    return random_shapes(*drawn)


def suite_kind(name: str) -> str:
    """The family of a valid suite name: itself, or ``random`` for any ``random[:N][@SEED]``."""
    return "random" if parse_random(name) is not None else name


def fmt_shape(shape) -> str:
    """``4096^3`` for a cube, ``MxNxK`` otherwise (any other number of dimensions joined by x: a
    grouped layer's GxTxNxK)."""
    if len(shape) != 3:
        return "x".join(map(str, shape))
    M, N, K = shape
    return f"{M}^3" if M == N == K else f"{M}x{N}x{K}"


def shapes_text(shapes) -> str:
    """The comma-separated ``MxNxK`` text of shapes (parses back with ``parse_shapes``)."""
    return ",".join("x".join(map(str, s)) for s in shapes)


def parse_shape(text: str) -> tuple[int, int, int]:
    t = text.strip().lower()
    try:
        if t.endswith("^3"):
            n = int(t[:-2])
            dims = (n, n, n)
        elif "x" in t:
            parts = [int(p) for p in t.split("x")]
            if len(parts) != 3:
                raise ValueError
            dims = tuple(parts)
        else:
            n = int(t)
            dims = (n, n, n)
    except ValueError:
        raise ValueError(f"shape {text!r} is not N, N^3 or MxNxK (e.g. 4096, 4096^3, 127x4097x1023)") from None
    if min(dims) < 1:
        raise ValueError(f"shape {text!r} has a dimension < 1")
    return dims  # type: ignore[return-value]


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    return [parse_shape(s) for s in text.split(",") if s.strip()]


def parse_batched_shapes(text: str) -> list[BatchedShape]:
    """Comma-separated ``BxMxNxK`` (a batch of B products of M x N x K), e.g. ``32x512x512x64``."""
    out = []
    for part in (p.strip().lower() for p in text.split(",")):
        if not part:
            continue
        try:
            dims = tuple(int(x) for x in part.split("x"))
        except ValueError:
            dims = ()
        if len(dims) != 4 or min(dims) < 1:
            raise ValueError(f"batched shape {part!r} is not BxMxNxK with every dimension >= 1 (e.g. 32x512x512x64)")
        out.append(dims)
    if not out:
        raise ValueError("no batched shapes given")
    return out
