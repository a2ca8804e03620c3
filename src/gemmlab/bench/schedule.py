"""What ``gemmlab bench`` runs: the rungs, the shapes, the groups of jobs timed on one set of
operands, and how many repeats a slow entry gets. Pure: no GPU.

Keeping the default run bounded
-------------------------------
Without ``--shape`` the shape is 4096^3, except for the naive rungs -- those without a K tile (no
``BK`` parameter: every thread reads A and B straight from global memory, rungs 1-3 today), which
reach 0.5-7 TFLOP/s -- timed at 2048^3, with a note in the table and the JSON; cuBLAS and the
peers are timed at 2048^3 too, so their ratio compares like with like. The thin rungs (those for
a C with a side of at most 16, ``Rung.thin``) are timed at ``THIN_SHAPE`` (4096x16x4096) instead,
with the peers beside them: at 4096^3 such a rung reads A once per 16 columns of C, which says
nothing about what it is for. A shape given with
``--shape`` is used for every rung as given. How many samples each entry gets is the timing
engine's stopping rule (``gemmlab.measure.timing``), whose time cap bounds a slow entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..core.dtypes import get as get_dtype
from ..core.precision import resolve as resolve_precision
from ..core.registry import Rung, for_dtype, get
from ..core.shapes import BENCH_SHAPE as DEFAULT_SHAPE
from ..core.shapes import REDUCED_SHAPE, THIN_SHAPE, Shape, fmt_shape, parse_shapes

PEER_TITLES = {"cublas": "cuBLAS", "triton": "Triton (autotuned)"}
AUTO = "auto"   # a bench entry of its own: what kernel="auto" picks for each shape (rung and config)


def is_naive(rung: Rung) -> bool:
    """A naive rung has no K tile (no BK): it reads every operand from global memory per FMA."""
    return "BK" not in rung.params


def wants_auto(names: Iterable[str | Rung] | None) -> bool:
    """Whether ``auto`` is among the entries named."""
    return any(n == AUTO for n in names or ())


def select_rungs(names: Iterable[str | Rung] | None, dtype: str, precision: str | None = None) -> list[Rung]:
    """Rungs by slug or number, in ladder order (``auto`` is not a rung: ``wants_auto``); default:
    every rung that computes ``dtype`` in ``precision`` (None: the dtype's exact one). Only
    ``auto`` named: no rung. A named rung that cannot compute the dtype in it is a ValueError."""
    get_dtype(dtype)
    if names and all(n == AUTO for n in names):
        return []
    names = [n for n in names or () if n != AUTO]
    if not names:
        rungs = list(for_dtype(dtype, precision=precision))
        if not rungs:
            raise ValueError(f"no rung supports dtype {dtype}" + (f" in precision {precision}" if precision else ""))
        return rungs
    rungs = []
    for n in names:
        r = get(n)
        if not r.supports(dtype):
            raise ValueError(f"rung {r.slug!r} does not support dtype {dtype}; it supports "
                             f"{', '.join(r.dtypes)} (use --dtype {r.dtypes[0]})")
        r.require(dtype, precision=resolve_precision(dtype, precision))   # the exact one unless asked
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
    """One kernel timed at one shape: a rung, or a peer (``peer``: "cublas", "triton") when
    ``rung`` is None."""

    rung: Rung | None
    requested: Shape
    shape: Shape
    note: str = ""
    peer: str = "cublas"
    auto: bool = False                   # the dispatch's choice (rung None, not a peer)

    @property
    def slug(self) -> str:
        return self.rung.slug if self.rung else AUTO if self.auto else self.peer

    @property
    def title(self) -> str:
        if self.auto:
            return "auto (gemmlab's choice of rung and configuration)"
        return self.rung.title if self.rung else PEER_TITLES.get(self.peer, self.peer)


@dataclass
class Group:
    """Everything timed on one set of operands: the peers (cuBLAS first), then the rungs in ladder
    order."""

    shape: Shape
    jobs: list[Job] = field(default_factory=list)


def schedule(rungs: Sequence[Rung], shapes: Sequence[Shape] | None = None,
             peers: Sequence[str] = ("cublas",), auto: bool = False) -> list[Group]:
    """The groups to time. ``shapes`` None means the default shape, where naive rungs move to
    ``REDUCED_SHAPE`` (see the module docstring); given shapes apply to every rung. Every group
    times every peer (cuBLAS is always the first: the baseline); ``auto``: the dispatch's choice
    too, after the rungs, at every shape."""
    peers = ["cublas"] + [p for p in peers if p != "cublas"]
    groups: dict[Shape, Group] = {}

    def add(requested: Shape, shape: Shape, rung: Rung | None, note: str, peer: str = "cublas"):
        g = groups.get(shape)
        if g is None:
            g = groups[shape] = Group(shape)
        if not any(j.rung is rung and (rung is not None or j.peer == peer) for j in g.jobs):
            g.jobs.append(Job(rung, requested, shape, note, peer))

    def add_peers(requested: Shape, shape: Shape, note: str):
        for p in peers:
            add(requested, shape, None, note if p == "cublas" else "", p)

    if auto:
        for s in shapes or [DEFAULT_SHAPE]:
            add_peers(s, s, "")
            groups[s].jobs.append(Job(None, s, s, "", peer=AUTO, auto=True))
    if shapes is None:
        reduced_note = f"naive rung: timed at {fmt_shape(REDUCED_SHAPE)} to keep the run bounded"
        thin_note = f"thin rung: timed at {fmt_shape(THIN_SHAPE)}, the kind of problem it is for"
        full = [r for r in rungs if not is_naive(r) and not r.thin]
        naive = [r for r in rungs if is_naive(r)]
        thin = [r for r in rungs if r.thin]
        if full:
            add_peers(DEFAULT_SHAPE, DEFAULT_SHAPE, "")
            for r in full:
                add(DEFAULT_SHAPE, DEFAULT_SHAPE, r, "")
        if naive:
            add_peers(DEFAULT_SHAPE, REDUCED_SHAPE,
                      f"the reference of the naive rungs at {fmt_shape(REDUCED_SHAPE)}" if full else "")
            for r in naive:
                add(DEFAULT_SHAPE, REDUCED_SHAPE, r, reduced_note)
        if thin:
            add_peers(DEFAULT_SHAPE, THIN_SHAPE, f"the reference of the thin rungs at {fmt_shape(THIN_SHAPE)}")
            for r in thin:
                add(DEFAULT_SHAPE, THIN_SHAPE, r, thin_note)
    else:
        for s in shapes:
            add_peers(s, s, "")
            for r in rungs:
                add(s, s, r, "")
    for g in groups.values():
        g.jobs.sort(key=lambda j: (j.rung.number, 0) if j.rung else (10**6, 0) if j.auto else (0, peers.index(j.peer)))
    return list(groups.values())
