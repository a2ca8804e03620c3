"""What ``gemmlab bench`` runs: the rungs, the shapes, the groups of jobs timed on one set of
operands, and how many repeats a slow entry gets. Pure: no GPU.

Keeping the default run bounded (a few minutes on an H100, most of it compiling)
---------------------------------------------------------------------------------
* Without ``--shape`` the shape is 4096^3, except for the naive rungs -- those without a K tile
  (no ``BK`` parameter: every thread reads A and B straight from global memory, rungs 1-3 today),
  which reach 0.5-7 TFLOP/s -- timed at 2048^3, with a note in the table and the JSON; cuBLAS is
  timed at 2048^3 too, so their ratio compares like with like. A shape given with ``--shape`` is
  used for every rung as given.
* Any entry whose estimate run takes more than ``SLOW_RUN_MS`` (200 ms) skips the remaining
  warm-up and is timed ``min(repeats, max(3, SLOW_BUDGET_MS // estimate))`` times (a ~2 s
  budget, never fewer than 3 repeats); the table's note says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..core.dtypes import get as get_dtype
from ..core.registry import Rung, for_dtype, get
from ..core.shapes import BENCH_SHAPE as DEFAULT_SHAPE
from ..core.shapes import REDUCED_SHAPE, Shape, fmt_shape, parse_shapes

DEFAULT_REPEATS = 50
DEFAULT_WARMUP = 5
SLOW_RUN_MS = 200.0
SLOW_BUDGET_MS = 2000.0
MIN_REPEATS = 3


def is_naive(rung: Rung) -> bool:
    """A naive rung has no K tile (no BK): it reads every operand from global memory per FMA."""
    return "BK" not in rung.params


def select_rungs(names: Iterable[str | Rung] | None, dtype: str) -> list[Rung]:
    """Rungs by slug or number, in ladder order; default: every rung that supports ``dtype``."""
    get_dtype(dtype)
    if not names:
        rungs = list(for_dtype(dtype))
        if not rungs:
            raise ValueError(f"no rung supports dtype {dtype}")
        return rungs
    rungs = []
    for n in names:
        r = get(n)
        if not r.supports(dtype):
            raise ValueError(f"rung {r.slug!r} does not support dtype {dtype}; it supports "
                             f"{', '.join(r.dtypes)} (use --dtype {r.dtypes[0]})")
        if r not in rungs:
            rungs.append(r)
    return sorted(rungs, key=lambda r: r.number)


def as_shapes(shapes) -> list[Shape] | None:
    """``shapes`` (None, a "4096,127x4097x1023" string or (M, N, K) tuples) as a list of distinct
    (M, N, K) tuples in the order given; None stays None (the default shape rule)."""
    if shapes is None:
        return None
    if isinstance(shapes, str):
        out = parse_shapes(shapes)
    else:
        out = [tuple(int(d) for d in s) for s in shapes]
    for s in out:
        if len(s) != 3 or min(s) < 1:
            raise ValueError(f"shape {s!r} must be three positive sizes (M, N, K)")
    dedup: list[Shape] = []
    for s in out:
        if s not in dedup:
            dedup.append(s)  # type: ignore[arg-type]
    if not dedup:
        raise ValueError("no shape given")
    return dedup


@dataclass(frozen=True)
class Job:
    """One kernel timed at one shape; ``rung`` None is cuBLAS."""

    rung: Rung | None
    requested: Shape
    shape: Shape
    note: str = ""

    @property
    def slug(self) -> str:
        return self.rung.slug if self.rung else "cublas"


@dataclass
class Group:
    """Everything timed on one set of operands: cuBLAS first, then the rungs in ladder order."""

    shape: Shape
    jobs: list[Job] = field(default_factory=list)


def schedule(rungs: Sequence[Rung], shapes: Sequence[Shape] | None = None) -> list[Group]:
    """The groups to time. ``shapes`` None means the default shape, where naive rungs move to
    ``REDUCED_SHAPE`` (see the module docstring); given shapes apply to every rung."""
    groups: dict[Shape, Group] = {}

    def add(requested: Shape, shape: Shape, rung: Rung | None, note: str):
        g = groups.get(shape)
        if g is None:
            g = groups[shape] = Group(shape)
        if not any(j.rung is rung for j in g.jobs):
            g.jobs.append(Job(rung, requested, shape, note))

    if shapes is None:
        reduced_note = f"naive rung: timed at {fmt_shape(REDUCED_SHAPE)} to keep the run bounded"
        full = [r for r in rungs if not is_naive(r)]
        naive = [r for r in rungs if is_naive(r)]
        if full:
            add(DEFAULT_SHAPE, DEFAULT_SHAPE, None, "")
            for r in full:
                add(DEFAULT_SHAPE, DEFAULT_SHAPE, r, "")
        if naive:
            add(DEFAULT_SHAPE, REDUCED_SHAPE, None,
                f"the reference of the naive rungs at {fmt_shape(REDUCED_SHAPE)}" if full else "")
            for r in naive:
                add(DEFAULT_SHAPE, REDUCED_SHAPE, r, reduced_note)
    else:
        for s in shapes:
            add(s, s, None, "")
            for r in rungs:
                add(s, s, r, "")
    for g in groups.values():
        g.jobs.sort(key=lambda j: j.rung.number if j.rung else 0)
    return list(groups.values())


def slow_repeats(estimate_ms: float, repeats: int) -> int:
    """Repeats for an entry whose one run takes ``estimate_ms`` (the dynamic bound of the docstring)."""
    if estimate_ms <= SLOW_RUN_MS:
        return repeats
    return min(repeats, max(MIN_REPEATS, int(SLOW_BUDGET_MS // estimate_ms)))
