"""Parsing of problem shapes given on the command line: ``4096``, ``4096^3``, ``127x4097x1023``."""

from __future__ import annotations


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
