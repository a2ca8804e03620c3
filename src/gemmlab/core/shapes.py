"""Problem shapes: the defaults every command uses, and parsing of shapes given on the command
line (``4096``, ``4096^3``, ``127x4097x1023``)."""

from __future__ import annotations

Shape = tuple[int, int, int]

# ---- the defaults: the one place they are defined ---------------------------------------------
BENCH_SHAPE: Shape = (4096, 4096, 4096)       # bench and the report's ladder
REDUCED_SHAPE: Shape = (2048, 2048, 2048)     # the naive rungs (no K tile) in the default bench
PROFILE_SHAPE: Shape = (2048, 2048, 2048)     # Nsight Compute replays each kernel many times
SWEEP_SIZES: tuple[int, ...] = (256, 512, 1024, 2048, 4096)  # the report's size sweep (square)
CEILING_SHAPE: Shape = (8192, 8192, 8192)     # cuBLAS at its best: the report's compute ceiling
# verify: odd sizes below and across tile edges, the 1x1x1 corner and a long K
VERIFY_SHAPES: tuple[Shape, ...] = ((127, 129, 65), (1, 1, 1), (257, 31, 1000))
OVERHEAD_SHAPE: Shape = (64, 64, 64)          # bench --overhead: kernels of a few microseconds


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
