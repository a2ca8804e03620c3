"""What the search needs from whatever measures a candidate: the ``Evaluator`` interface.

The search (``tune.search``) never touches a GPU: it asks an evaluator to compile a batch of
configurations (in parallel) and then to verify and time each one, and records the ``Outcome``.
``tune.gpu.GpuEvaluator`` does it for real (NVRTC in worker processes, ``measure.verify``, the
timing engine of ``measure.timing``); ``ReplayEvaluator`` answers from recorded measurements
(the strategy experiment replays an exhaustive run through it, and the CPU tests run the whole
tuner with it). Worker processes (``--devices``) build their evaluator from a picklable factory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence

from ..core.config import format_config

# The statuses a candidate ends with, and what each means (the database keeps the reason too).
STATUSES = {
    "ok": "verified and timed",
    "slow": "verified; stopped after a short estimate: more than 3x slower than the best so far",
    "invalid": "refused by the registry's constraints before compiling",
    "compile_error": "NVRTC (or ptxas) refused it",
    "spill": "compiles, but spills registers to local memory (core.variant.SpillError)",
    "wrong": "compiled and ran, but failed verification against the float64 reference",
    "error": "failed while running (launch error, out of memory, ...)",
}
MEASURED = ("ok", "slow")


@dataclass
class Outcome:
    """What became of one candidate."""

    status: str
    ms: float | None = None          # median time (for "slow": the short estimate)
    reason: str = ""                 # one line, for every status but "ok"
    detail: dict = field(default_factory=dict)   # samples, noise, verification figures ...

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; one of {', '.join(STATUSES)}")

    def as_dict(self) -> dict:
        return {"status": self.status, "ms": self.ms, "reason": self.reason, "detail": dict(self.detail)}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Outcome":
        return cls(d["status"], d.get("ms"), d.get("reason", ""), dict(d.get("detail") or {}))


class Evaluator(Protocol):
    device: str                      # the tag results are recorded with, e.g. "GPU 0 (00000000:19:00.0)"

    def compile(self, configs: Sequence[dict]) -> list[Outcome | None]:
        """Compile every configuration (in parallel); per configuration None when it compiled,
        else its failure ("compile_error", "spill")."""

    def measure(self, config: dict, cutoff_ms: float | None) -> Outcome:
        """Verify, then time one compiled configuration. Past ``cutoff_ms`` the evaluator may
        stop at a short estimate (the 3x rule; the search decides the status)."""

    def peers(self) -> dict[str, float]:
        """The peers' median times in ms (cuBLAS, Triton ...), timed like the candidates."""

    def close(self) -> None: ...


class EvaluatorFactory(Protocol):
    """Picklable: a worker process rebuilds its evaluator from it."""

    def identity(self, device: int) -> dict:
        """The study key's machine part: gpu_name, arch, driver, nvrtc, gemmlab (and, where
        known, sm_count, which the key leaves out: the dispatch rule's starting point needs it)."""

    def create(self, device: int) -> Evaluator: ...


# ---- replaying recorded measurements ---------------------------------------------------------
class ReplayEvaluator:
    """Answers from a table {config key: Outcome as a dict}: the recorded measurements of an
    exhaustive run (the strategy experiment), or a made-up landscape (the CPU tests). Counts how
    many configurations it was asked to compile and to measure."""

    def __init__(self, table: Mapping[str, Mapping], peers: Mapping[str, float] | None = None,
                 device: str = "replay"):
        self.table = dict(table)
        self._peers = dict(peers or {})
        self.device = device
        self.compiled: list[str] = []
        self.measured: list[str] = []

    @staticmethod
    def key(config: dict) -> str:
        """A full point's key, as ``Space.key`` writes it (the point lists every parameter in
        the rung's order)."""
        return format_config(config)

    def _lookup(self, config: dict) -> Outcome:
        k = self.key(config)
        rec = self.table.get(k)
        if rec is None:
            return Outcome("error", reason=f"{k} is not in the recorded measurements")
        return Outcome.from_dict(rec)

    def compile(self, configs: Sequence[dict]) -> list[Outcome | None]:
        out = []
        for c in configs:
            self.compiled.append(self.key(c))
            o = self._lookup(c)
            out.append(o if o.status in ("compile_error", "spill") else None)
        return out

    def measure(self, config: dict, cutoff_ms: float | None) -> Outcome:
        self.measured.append(self.key(config))
        return self._lookup(config)

    def peers(self) -> dict[str, float]:
        return dict(self._peers)

    def close(self) -> None:
        pass


@dataclass
class ReplayFactory:
    """``EvaluatorFactory`` of ``ReplayEvaluator``; ``identity`` stands for the machine the table
    was measured on."""

    table: dict
    peers: dict = field(default_factory=dict)
    machine: dict = field(default_factory=lambda: {"gpu_name": "replay", "arch": "sm_90a", "driver": "-",
                                                   "nvrtc": "-", "gemmlab": "-"})

    def identity(self, device: int) -> dict:
        return dict(self.machine)

    def create(self, device: int) -> ReplayEvaluator:
        return ReplayEvaluator(self.table, self.peers, device=f"replay {device}")
