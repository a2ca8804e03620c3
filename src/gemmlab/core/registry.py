"""The ladder: one entry per rung, the single source of truth.

The CLI, the benchmark, the report, the docs table and the tests all read ``RUNGS``; nothing else
lists the rungs by hand. An entry (``schema.Rung``) says what the rung is (number, slug, title,
one-line summary, the seed kernels it reproduces), where its source is, which dtypes it takes, its
tunable parameters with defaults, the constraints on them, its search space, the launch geometry,
the static claims its SASS must satisfy (checked in CI by ``tests/test_static_guards.py``), and
its features as parts (core/parts.py: what it reads, how it stores C, how its blocks walk the
tiles, what changes per precision, a thin rung's rule).
The entries are defined by kernel family beside the family's thread counts, shared memory and
constraints (core/families/: simt, tensor, hopper, thin; rung 24's geometry in core/decode.py);
the schema, the launch geometry and the split arithmetic are core/schema.py's. This module puts
the families' entries in ladder order and answers the lookups.
"""

from __future__ import annotations

from .dtypes import get as get_dtype
from .precision import resolve as resolve_precision
from .families import hopper, simt, tensor, thin as thin_family
from .families.common import MAX_SMEM_PER_BLOCK  # noqa: F401 (re-exported)
from .families.thin import THIN_MAX, thin_rule_config, thin_sides  # noqa: F401 (re-exported)
from .schema import (LADDER, MAX_GRID_Y, SPLITK_SPACE, SWITCHES, Launch, Rung, splitk_slice,  # noqa: F401 (re-exported)
                     splitk_slices, streamk_tail, streamk_workspace, workspace_split)
from .splitk import MAX_SPLITK, MAX_SPLITK_CLUSTER  # noqa: F401 (re-exported)

RUNGS: tuple[Rung, ...] = tuple(sorted(simt.RUNGS + tensor.RUNGS + hopper.RUNGS + thin_family.RUNGS, key=lambda r: r.number))
LADDER[:] = RUNGS
_BY_SLUG = {r.slug: r for r in RUNGS}


def kernels() -> tuple[Rung, ...]:
    """The rungs in ladder order."""
    return RUNGS


def landmarks() -> tuple[Rung, ...]:
    """The ladder's landmark rungs (the report's size sweep)."""
    return tuple(r for r in RUNGS if r.landmark)


def for_dtype(dtype: str, arch: str | int | None = None, precision: str | None = None,
              thin: bool | None = None, out: str | None = None, grouped: bool = False) -> tuple[Rung, ...]:
    """The rungs that take ``dtype`` and compute it in ``precision`` (None: the dtype's exact one)
    (and run on ``arch`` when given, and write a C of ``out`` when given: ``Rung.writes``), in ladder
    order; ``thin`` True / False: only the thin rungs (``Rung.thin``) / only the others, None: all.
    The grouped rung (``Rung.grouped``: many products of different M in one launch,
    ``gemmlab.grouped_mm``) only with ``grouped``: a plain product is its one group, which rung 21
    computes without the group table, so ``auto``, the tuner and the ladder's benchmark leave it out."""
    get_dtype(dtype)
    want = resolve_precision(dtype, precision)
    return tuple(r for r in RUNGS if dtype in r.dtypes and want in r.precisions and (arch is None or r.runs_on(arch))
                 and (thin is None or bool(r.thin) == thin) and r.writes(dtype, out) and (grouped or not r.grouped))


def get(name: str) -> Rung:
    """A rung by slug (``"warp_tiling"``) or number (``"15"``)."""
    if isinstance(name, Rung):
        return name
    if not isinstance(name, str):
        raise TypeError(f"kernel must be a rung slug (str), got {type(name).__name__}")
    key = name.strip()
    if key in _BY_SLUG:
        return _BY_SLUG[key]
    if key.isdigit():
        for r in RUNGS:
            if r.number == int(key):
                return r
    raise ValueError(f"unknown kernel {name!r}; available: {', '.join(r.slug for r in RUNGS)}")
