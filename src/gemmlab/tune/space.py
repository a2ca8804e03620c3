"""The search space of a rung, read from the registry: the values of each tunable parameter
(``Rung.space``, plus the values its defaults and presets take), every other parameter at its default, and the constraints that prune the product
before anything compiles (``Rung.check_config``: the rung's rules and the block size, with
readable reasons; ``Rung.check_resources``: shared memory against the architecture's limit).

A point of the space is a full configuration (a dict of every parameter of the rung). The
strategies see a point as one integer per searched parameter, the index of its value in the
value list (``encode``/``decode``): indices keep the order of the values, which TPE and CMA-ES
use (a categorical would not), and every index maps to a value the rung can compile.

A tuning run widens the space by the values of its starting points (``widened``: a shipped
configuration such as SPLITK=64 at 256x256x65536 lies outside the SPLITK grid, and a tuner that
cannot measure it cannot beat it; a point that sets a parameter the grid holds at its default, as
rung 22's 256x128 preset sets BM and WM, makes that parameter a searched one), and a study keeps the value lists it was first run with
(``aligned``): values that arrive later are appended, so the indices its trials were told keep
naming the same values.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Iterable, Iterator, Mapping, Sequence

from ..core.arch import ArchLimits, limits as arch_limits
from ..core.config import format_config
from ..core.registry import SWITCHES, Rung, get


# The pruned spaces this process has computed, by (rung, value lists, limits, precision), each as
# its points' values in the rung's parameter order, the most recently used last: a run prunes its
# space twice (``tune``, then its worker's search), and pruning rung 18's 933,120 points takes 3.3 s
# of CPU (5.8 s while ``points`` went through ``point`` for each). The rung is kept to compare by
# identity: one changed by ``dataclasses.replace`` is another rung of the same slug.
_PRUNED: dict[tuple, tuple[Rung, tuple[tuple[int, ...], ...]]] = {}
_PRUNED_KEPT = 64   # spaces (all the rungs' of one architecture and precision, and then some)


@dataclass(frozen=True)
class Space:
    rung: Rung
    params: dict[str, tuple[int, ...]]      # searched parameter -> its values, ascending (``aligned``: a study's order)
    limits: ArchLimits | None = None        # shared-memory limit of the target; None: not checked
    precision: str | None = None            # what the rung computes in (None: its default); rung 22's
                                            # 3xtf32 has its own defaults, presets and constraints

    @classmethod
    def of(cls, rung: Rung | str, arch: str | None = None,
           overrides: Mapping[str, tuple[int, ...]] | None = None, precision: str | None = None) -> "Space":
        """The registry's space of ``rung`` (``overrides`` replaces the values of some parameters);
        ValueError when the rung has nothing to tune or a parameter is unknown."""
        rung = get(rung) if isinstance(rung, str) else rung
        values = dict(rung.space)
        for k, v in (overrides or {}).items():
            if k not in rung.params:
                raise ValueError(f"rung {rung.slug!r} has no parameter {k!r}; parameters: {sorted(rung.params)}")
            if k in SWITCHES:
                if not v or any(isinstance(x, bool) or not isinstance(x, int) or x not in (0, 1) for x in v):
                    raise ValueError(f"values of {k} must be 0 or 1 (a switch), got {v!r}")
            elif not v or any(isinstance(x, bool) or not isinstance(x, int) or x <= 0 for x in v):
                raise ValueError(f"values of {k} must be positive integers, got {v!r}")
            values[k] = tuple(v)
        if not values:
            raise ValueError(f"rung {rung.slug!r} has no tunable parameters (no search space in the registry)")
        # the rung's own configurations (its defaults and presets) are points of its space: a tuner
        # that could not propose the "tall" preset (BN=32) lost to it at 4096x16x4096 by a wide
        # margin (TPE over a BN grid starting at 64)
        for cfg in (rung.defaults_for(precision), *rung.presets_for(precision).values()):
            for k, v in cfg.items():
                if k in values and k not in (overrides or {}):
                    values[k] = tuple(values[k]) + (v,)
        params = {k: tuple(sorted(set(values[k]))) for k in rung.params if k in values}
        return cls(rung, params, arch_limits(arch) if arch else None, precision)

    def widened(self, configs: Iterable[Mapping[str, int]]) -> "Space":
        """The space with every value ``configs`` take added (sorted in): to a searched parameter's
        values, and as a searched parameter of its own (its default and those values) where a
        config sets one the space held at its default. A point is measured as its indices decode,
        so a starting point's WM=128 or switch outside the grid would otherwise be measured at the
        default in silence (rung 22's 256x128 preset, BM=256 and WM=128, ran as 128x256)."""
        configs = list(configs)
        default = self.point({})
        params = {}
        for k in self.rung.params:
            seen = {int(c[k]) for c in configs if k in c}
            if k in self.params:
                params[k] = tuple(sorted(set(self.params[k]) | seen))
            elif seen - {default[k]}:
                params[k] = tuple(sorted(seen | {default[k]}))
        return replace(self, params=params)

    def aligned(self, recorded: Mapping[str, Sequence[int]] | None) -> "Space":
        """The space with each parameter's values in the order ``recorded`` (a study's value lists)
        holds them, its own other values appended in order; values only ``recorded`` holds are kept,
        and so are parameters only ``recorded`` searched (a run that widened the space by them), so
        every index a study's trials were told still decodes to the value it named then."""
        if not recorded:
            return self
        params = {}
        for k in self.rung.params:
            own = self.params.get(k)
            if k in recorded:
                old = tuple(int(x) for x in recorded[k])
                params[k] = old + tuple(x for x in (own or ()) if x not in old)
            elif own is not None:
                params[k] = own
        return replace(self, params=params)

    # ---- points ----------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Points in the product, before pruning."""
        n = 1
        for v in self.params.values():
            n *= len(v)
        return n

    def point(self, values: Mapping[str, int]) -> dict[str, int]:
        """The full configuration: the rung's defaults with ``values`` on top, in parameter order."""
        cfg = self.rung.defaults_for(self.precision)
        cfg.update({k: int(v) for k, v in values.items()})
        return cfg

    def points(self) -> Iterator[dict[str, int]]:
        """Every point of the product, in a fixed order (the last parameter fastest)."""
        names = list(self.params)
        base = self.point({})
        for combo in itertools.product(*self.params.values()):   # ``point`` of each, inlined
            cfg = base.copy()
            cfg.update(zip(names, combo))
            yield cfg

    def encode(self, cfg: Mapping[str, int]) -> dict[str, int]:
        """Point -> {parameter: index of its value}."""
        return {k: self.params[k].index(cfg[k]) for k in self.params}

    def decode(self, indices: Mapping[str, int]) -> dict[str, int]:
        """{parameter: index} -> point."""
        return self.point({k: self.params[k][int(i)] for k, i in indices.items()})

    def key(self, cfg: Mapping[str, int]) -> str:
        """The point's canonical text, ``BM=64,BN=128,...`` (the database's config key)."""
        return format_config({k: cfg[k] for k in self.rung.params})

    def contains(self, cfg: Mapping[str, int]) -> bool:
        """Whether every searched parameter of ``cfg`` takes one of the space's values."""
        return all(cfg.get(k) in v for k, v in self.params.items())

    # ---- pruning ---------------------------------------------------------------------------
    def check(self, cfg: Mapping[str, int]) -> list[str]:
        """Why the rung cannot take ``cfg`` (empty: it can)."""
        reasons = self.rung.check_config(cfg, self.precision)
        if not reasons and self.limits is not None:
            try:
                self.rung.check_resources(cfg, self.limits, self.precision)
            except ValueError as exc:
                reasons.append(str(exc))
        return reasons

    def candidates(self) -> list[dict[str, int]]:
        """The pruned space: every point the constraints accept, in ``points`` order (fresh dicts;
        the process remembers the space, see ``_PRUNED``)."""
        key = (self.rung.slug, tuple(self.params.items()), self.limits, self.precision)
        kept = _PRUNED.pop(key, None)
        if kept is None or kept[0] is not self.rung:
            kept = (self.rung, tuple(tuple(p.values()) for p in self.points() if not self.check(p)))
        _PRUNED[key] = kept
        while len(_PRUNED) > _PRUNED_KEPT:
            del _PRUNED[next(iter(_PRUNED))]
        names = list(self.point({}))
        return [dict(zip(names, values)) for values in kept[1]]

    def pruned(self) -> list[tuple[dict[str, int], list[str]]]:
        """The points the constraints refuse, each with its reasons."""
        out = []
        for p in self.points():
            reasons = self.check(p)
            if reasons:
                out.append((p, reasons))
        return out

    def describe(self) -> str:
        vals = "; ".join(f"{k} in {{{', '.join(map(str, v))}}}" for k, v in self.params.items())
        return f"{self.rung.slug}: {vals} ({self.size} points before pruning)"
