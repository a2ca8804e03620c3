"""How the report writes numbers: counts, bytes, percentages, TFLOP/s, shapes and plain values,
with 'n/a' for what was not measured."""

from __future__ import annotations

import math
from typing import Mapping


def number(v: float | None, digits: int = 2) -> str:
    """1.2e8 style for large/small numbers, plain otherwise; 'n/a' for None."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e4 or a < 1e-2:
        exp = int(math.floor(math.log10(a)))
        mant = v / 10**exp
        s = f"{mant:.{max(digits - 1, 0)}f}".rstrip("0").rstrip(".")
        if s in ("10", "-10"):
            s, exp = ("1" if v > 0 else "-1"), exp + 1
        return f"{s}e{exp}"
    return f"{v:.{digits + 1}g}" if a < 100 else f"{v:,.0f}"


def nbytes(v: float | None) -> str:
    """A byte count with its unit: '1.23 GB'."""
    if v is None:
        return "n/a"
    for div, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(v) >= div:
            return f"{v / div:.3g} {unit}"
    return f"{v:.0f} B"


def percent(v: float | None, digits: int = 0) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}%"


def tflops(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def plain(v) -> str:
    """A value of the environment: floats to 4 significant digits, anything else as str()."""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def shape_label(e: Mapping) -> str:
    """The shape of a bench entry: '4096^3' when square, 'MxNxK' otherwise, '?' when unknown."""
    if not e or e.get("M") is None:
        return "?"
    M, N, K = e["M"], e["N"], e["K"]
    return f"{M}^3" if M == N == K else f"{M}x{N}x{K}"
