"""The benchmark's result as a file, and as an exit status.

The JSON (``--json FILE``, also the return value of ``run_bench``) has the keys
``gemmlab_version``, ``timestamp`` (ISO UTC), ``env`` (``analysis.environment.collect()`` plus
``clocks_before`` / ``clocks_after``), ``settings`` and ``results``: one entry per (kernel, shape)
with kernel, number (0 for cuBLAS), dtype, M, N, K, ms (median), ms_min, ms_max, times_ms,
tflops, vs_cublas, pct_peak, verified, rel_error, config, note -- and more (status,
requested_shape, repeats, ...). ``report`` reads it.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Mapping


def _clean(x):
    """JSON-safe copy: non-finite floats become None (strict JSON for every reader)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def write_json(result: dict, path: str | os.PathLike) -> Path:
    """Write the result dict as strict JSON (atomically: a temporary file then a rename)."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_clean(result), indent=2, allow_nan=False) + "\n")
    tmp.replace(path)
    return path


def exit_code(result: dict) -> int:
    """0 when every rung verified (or verification was off) and ran; 1 when one failed or errored."""
    return 1 if any(r.get("status") in ("failed", "error") for r in result.get("results", [])) else 0
