"""Problem shapes: the defaults every command uses, and parsing of shapes given on the command
line (``4096``, ``4096^3``, ``127x4097x1023``)."""

from __future__ import annotations

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
SUITES: dict[str, tuple[Shape, ...]] = {"fp32": FP32_SUITE, "llm": LLM_SUITE}
SUITE_DTYPES: dict[str, tuple[str, ...]] = {"fp32": ("fp32",), "llm": ("fp16", "bf16")}   # what each is for


def suite(name: str) -> tuple[Shape, ...]:
    """The shapes of a suite by name; ValueError naming the suites."""
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; suites: {', '.join(SUITES)}")
    return SUITES[name]


def fmt_shape(shape) -> str:
    """``4096^3`` for a cube, ``MxNxK`` otherwise."""
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
