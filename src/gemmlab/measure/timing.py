"""The one timing engine: bench, report, verify's timing and the tuner all time through it.

How a sample is taken
---------------------
Every timed launch is enqueued as::

    [flush L2]  spin(spin_us)  event(start)  launch  event(end)

on the current stream. The *spin* is a one-thread kernel (kernels/spin.cu) that keeps the GPU
busy for a fixed time while the host enqueues the start event and the launch; without it, a
start event enqueued on an idle GPU fires at once and the interval then contains the host's
latency until the launch arrives (on the H100 a host enqueue longer than the pre-roll inflated
every cuBLAS time that came first in a round: docs/journal/timing.md). The flush (cold-L2 mode,
the default) reads a buffer of twice the L2 size before the spin (kernels/spin.cu, flush_read),
so the launch starts with none of its operands in L2 and with no dirty line to write back; hot-L2
mode (``l2="hot"``) leaves them there. (The flush was once a memset: it left an L2 of dirty lines
whose write-back ran inside the next timed interval, a large share of a short memory-bound launch
(kernels/spin.cu); the JSONs written since record ``"flush": "read"`` in their settings.)

Rounds and order
----------------
Candidates (the rungs, cuBLAS, the peers) are timed in rounds: each round takes one sample of
every candidate still running, then the host synchronizes once and reads all the events. A launch
leaves the GPU warmer (and, near the power cap, its clock lower) for the one after it: measured on
the H100 (``benchmarks/results/h100_tf32_rotating_order_1.json``, ``_2.json``), rung 22 took measurably
longer at 8192^3 when it came right after Triton's long TF32 launch than when it led its round. So the
order (``order="balanced"``, the default) is a Williams design: over every n rounds (2n for an odd
n of candidates) each candidate leads equally often and comes right after each other candidate
equally often. ``order="rotate"`` (round r starts with candidate r mod n, the former
default) leads each alike but keeps every candidate behind the same neighbour;
``order="shuffle"`` draws each round's order from a recorded seed.

When to stop
------------
A candidate stops when it has ``min_samples`` and the relative standard error of its median
(1.2533 x standard deviation / sqrt(n) / median) is at most ``target_error``; or at
``max_samples``; or once its timed GPU time passes ``time_cap_s`` (with at least 3 samples).
Each result says why it stopped, with its median, minimum, and noise (relative standard
deviation of the samples).

Clocks
------
A background thread reads the SM clock and the clock-event reasons through NVML while each
round runs (``gpu_timing.NvmlClocks``; ``gpu_timing`` also holds the real ``Device``). A round whose busy readings fall below ``throttle_fraction`` of the
maximum SM clock, or show a thermal or hardware slowdown, marks its samples ``throttled``; the
results count them.

Self-check
----------
``self_check`` compares a baseline timed interleaved with the same baseline timed alone (its
own rounds, back to back): when the two medians differ by more than ``self_check_tolerance``
(3 %) the result says so in plain words.

Sustained mode
--------------
``sustained_s > 0`` measures what a loop that calls the GEMM back to back gets (a training step):
no flush, nothing between the launches, the GPU kept busy until it sits at its steady state -- for
a large tensor-core GEMM, the board's power cap, where the SM clock is set by the power drawn and
the time of a call follows the energy it takes. A sample is then a *block*: the spin (the host's
enqueue kept out of the interval, as above), ``record(start)``, the candidate's launches back to
back for about ``sustained_s`` seconds of GPU time, ``record(end)``; its time per call is the
block's over the launches. Before the rounds each candidate is called once untimed (a library's
lazy set-up on its first call stays out of what follows), timed over a few calls behind the spin
(which sets its block's launch count) and runs one untimed block (the GPU reaches its steady
state). The rounds are ``sustained_rounds`` (even) in serpentine order (forward, backward, ...), so
a clock that drifts linearly over the run (the GPU warming) weighs on every candidate alike.

With an ``Energy`` reader (NVML's total-energy counter, polled by a thread) each block also gives
the board's mean power -- the counter's slope between the first and last instants it changed in
the block (it moves in ~100 ms steps: its difference across a 2 s block would be off by up to a
step at either end, 5 %) -- and from it the energy per call; the clock thread gives the block's
mean busy SM clock. A candidate whose call costs the host more time than the GPU (in those few
calls) has its blocks marked host-bound: back to back, the GPU waits for the host, and the figure
is the host's launch rate, not the kernel's. The power cap is the steady state being measured, so
only a thermal or hardware slowdown marks a sustained round throttled.

Everything GPU-specific is behind the small ``Device`` interface, so the scheduling, ordering,
stopping and marking logic is tested on the CPU with a simulated GPU timeline.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

L2_MODES = ("cold", "hot")
FLUSH_KIND = "read"   # how cold-L2 mode flushes (CudaDevice.flush); recorded in every JSON's settings
# the round orders, and how tables and reports name them (older JSONs say rotate or shuffle)
ORDER_WORDS = {"balanced": "a balanced order (each entry right after each other equally often)",
               "rotate": "a rotating order", "shuffle": "a shuffled order"}
ORDERS = tuple(ORDER_WORDS)
SPINS = ("busy", "idle")
SLOWDOWN_REASONS = frozenset({"HwSlowdown", "HwThermalSlowdown", "SwThermalSlowdown", "HwPowerBrakeSlowdown"})
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)   # standard error of a median / that of a mean (normal data)


def describe_order(order) -> str:
    """A recorded ``settings["timing"]["order"]`` in words, for tables and reports."""
    return ORDER_WORDS.get(order, f"{order!r} order")


def balanced_order(n: int, index: int) -> list[int]:
    """Round ``index``'s order of candidates 0..n-1 in a Williams design: row r is the first row
    0, 1, n-1, 2, n-2, ... shifted by r (mod n); for an odd n rows n..2n-1 are rows 0..n-1
    reversed. Over any n (odd n: 2n) consecutive rounds each candidate leads equally often and
    each ordered pair of candidates is adjacent equally often."""
    if n < 1:
        raise ValueError(f"an order of {n} candidates")
    first = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]
    r = index % (n if n % 2 == 0 else 2 * n)
    row = [(a + r) % n for a in first]
    return row if r < n else row[::-1]


# ---- settings and results ----------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    l2: str = "cold"                 # "cold": flush L2 before every sample; "hot": do not
    spin_us: float = 1000.0          # GPU busy time before every timed launch
    spin: str = "busy"               # "busy": every SM reads a small buffer; "idle": one thread
    warmup: int = 3                  # untimed runs of each candidate before the first round
    min_samples: int = 10
    max_samples: int = 100
    target_error: float = 0.005      # relative standard error of the median to stop at
    time_cap_s: float = 2.0          # timed GPU seconds per candidate
    order: str = "balanced"          # "balanced" | "rotate" | "shuffle"
    seed: int | None = None          # the shuffle's seed (drawn and recorded when None)
    throttle_fraction: float = 0.9   # a busy SM clock below this share of the maximum is throttled
    self_check_tolerance: float = 0.03
    sustained_s: float = 0.0         # > 0: sustained mode, blocks of back-to-back launches this long (GPU s)
    sustained_rounds: int = 4        # sustained mode's rounds (even: serpentine order)

    def __post_init__(self):
        if self.l2 not in L2_MODES:
            raise ValueError(f"l2 must be one of {', '.join(L2_MODES)}, got {self.l2!r}")
        if self.spin not in SPINS:
            raise ValueError(f"spin must be one of {', '.join(SPINS)}, got {self.spin!r}")
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        for name in ("min_samples", "max_samples"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.max_samples < self.min_samples:
            raise ValueError(f"max_samples ({self.max_samples}) is below min_samples ({self.min_samples})")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be a non-negative integer, got {self.warmup!r}")
        for name in ("spin_us", "target_error", "time_cap_s", "sustained_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        r = self.sustained_rounds
        if isinstance(r, bool) or not isinstance(r, int) or r < 2 or r % 2:
            raise ValueError(f"sustained_rounds must be an even integer >= 2 (serpentine order), got {r!r}")

    @property
    def sustained(self) -> bool:
        return self.sustained_s > 0

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class Candidate:
    name: str
    fn: Callable[[], None]           # enqueues one launch on the current stream; no host sync


@dataclass
class Samples:
    """The samples of one candidate and the statistics a table shows."""

    name: str
    times_ms: list[float] = field(default_factory=list)
    throttled: list[bool] = field(default_factory=list)
    stop_reason: str = ""
    blocks: list["Block"] = field(default_factory=list)   # sustained mode: what each sample's block drew

    @property
    def n(self) -> int:
        return len(self.times_ms)

    @property
    def median(self) -> float | None:
        return statistics.median(self.times_ms) if self.times_ms else None

    @property
    def minimum(self) -> float | None:
        return min(self.times_ms) if self.times_ms else None

    @property
    def noise(self) -> float | None:
        """Relative standard deviation of the samples."""
        if self.n < 2:
            return None
        mean = statistics.fmean(self.times_ms)
        return statistics.stdev(self.times_ms) / mean if mean > 0 else None

    @property
    def median_error(self) -> float | None:
        """Relative standard error of the median."""
        noise = self.noise
        if noise is None:
            return None
        mean, med = statistics.fmean(self.times_ms), self.median
        return MEDIAN_SE_FACTOR * noise * mean / math.sqrt(self.n) / med if med else None

    def as_dict(self) -> dict:
        d = {"name": self.name, "n": self.n, "median_ms": self.median, "min_ms": self.minimum,
             "max_ms": max(self.times_ms) if self.times_ms else None, "noise": self.noise,
             "median_error": self.median_error, "stop_reason": self.stop_reason,
             "throttled_samples": sum(self.throttled), "times_ms": list(self.times_ms)}
        if self.blocks:
            d["blocks"] = [b.as_dict() for b in self.blocks]
        return d


@dataclass(frozen=True)
class Block:
    """One sustained-mode sample: ``calls`` launches back to back; the board's mean power (W) from
    the energy counter and the energy per call (mJ) it gives, the mean busy SM clock (MHz); None
    where not read. ``host_bound``: a call costs the host more than the GPU (``Engine._calibrate``)."""

    calls: int
    mj_per_call: float | None = None
    watts: float | None = None
    sm_mhz: float | None = None
    host_bound: bool = False

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# ---- what the engine needs from the GPU --------------------------------------------------------
class Device(Protocol):
    def new_event(self) -> object: ...
    def record(self, event: object) -> None: ...
    def elapsed_ms(self, start: object, end: object) -> float: ...
    def spin(self, ns: int) -> None: ...
    def flush(self) -> None: ...
    def synchronize(self) -> None: ...


@dataclass(frozen=True)
class ClockReading:
    t: float                         # host seconds (monotonic)
    sm_mhz: int | None
    reasons: tuple[str, ...] = ()


class Clocks(Protocol):
    max_sm_mhz: int | None
    def start(self) -> None: ...
    def stop(self) -> list[ClockReading]: ...


class Energy(Protocol):
    """A board's energy counter (mJ), read by a background thread while a block runs."""
    def start(self) -> None: ...
    def stop(self) -> list[tuple[float, float]]: ...    # (host seconds, mJ) readings since start


def counter_watts(readings: Sequence[tuple[float, float]]) -> float | None:
    """The mean power (W) of an energy counter's readings, from the instants its value changed: the
    counter moves in steps (NVML's every ~100 ms on the H100), so its difference over a block would
    be off by up to a step at each end; the slope between the first and the last change is off by
    the reading interval only. None with fewer than two changes."""
    changes = [(t, v) for (t, v), (_, prev) in zip(readings[1:], readings[:-1]) if v != prev]
    if len(changes) < 2 or changes[-1][0] <= changes[0][0]:
        return None
    return (changes[-1][1] - changes[0][1]) / (changes[-1][0] - changes[0][0]) / 1e3


@dataclass
class RoundInfo:
    index: int
    order: list[str]
    sm_mhz_min: int | None = None
    sm_mhz_max: int | None = None
    reasons: list[str] = field(default_factory=list)
    throttled: bool = False

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _busy(readings: Sequence[ClockReading]) -> list[ClockReading]:
    return [r for r in readings if "GpuIdle" not in r.reasons and r.sm_mhz is not None]


def judge_round(readings: Sequence[ClockReading], max_sm_mhz: int | None, fraction: float) -> tuple:
    """(min MHz, max MHz, reasons, throttled) of a round's busy readings (GpuIdle ones dropped).
    ``fraction`` None: only a thermal or hardware slowdown throttles (sustained mode, where the
    power cap's clock is the steady state being measured)."""
    busy = _busy(readings)
    if not busy:
        return None, None, [], False
    lo, hi = min(r.sm_mhz for r in busy), max(r.sm_mhz for r in busy)
    reasons = sorted({x for r in busy for x in r.reasons})
    slow = bool(SLOWDOWN_REASONS & set(reasons))
    low = fraction is not None and bool(max_sm_mhz) and lo < fraction * max_sm_mhz
    return lo, hi, reasons, slow or low


# ---- the engine --------------------------------------------------------------------------------
@dataclass
class Run:
    """What ``Engine.measure`` returns: the samples of each candidate and the rounds."""

    samples: dict[str, Samples]
    rounds: list[RoundInfo]
    seed: int | None                 # the shuffle's seed (None in sustained mode: its order is fixed)

    def as_dict(self) -> dict:
        return {"seed": self.seed, "rounds": [r.as_dict() for r in self.rounds],
                "samples": {k: v.as_dict() for k, v in self.samples.items()}}


class Engine:
    def __init__(self, device: Device, settings: Settings = Settings(), clocks: Clocks | None = None,
                 energy: Energy | None = None, host_clock: Callable[[], float] = time.perf_counter):
        self.device = device
        self.settings = settings
        self.clocks = clocks
        self.energy = energy
        self.host_clock = host_clock     # seconds: sustained mode's enqueue cost and block wall time

    # -- one sample
    def _enqueue(self, c: Candidate, start, end) -> None:
        if self.settings.l2 == "cold":
            self.device.flush()
        if self.settings.spin_us > 0:
            self.device.spin(int(self.settings.spin_us * 1000))
        self.device.record(start)
        c.fn()
        self.device.record(end)

    def warm_up(self, candidates: Sequence[Candidate]) -> None:
        """Untimed runs of each candidate (sampled mode; sustained mode warms up in ``measure``)."""
        if self.settings.sustained:
            return
        for c in candidates:
            for _ in range(self.settings.warmup):
                if self.settings.l2 == "cold":
                    self.device.flush()
                c.fn()
        self.device.synchronize()

    def _done(self, s: Samples) -> str:
        st = self.settings
        if s.n >= st.max_samples:
            return "max samples"
        if s.n >= 3 and sum(s.times_ms) / 1e3 >= st.time_cap_s:
            return "time cap"
        err = s.median_error
        if s.n >= st.min_samples and err is not None and err <= st.target_error:
            return "noise target"
        return ""

    def _order(self, active: list[Candidate], index: int, rng: random.Random) -> list[Candidate]:
        if self.settings.order == "shuffle":
            out = list(active)
            rng.shuffle(out)
            return out
        if self.settings.order == "balanced":
            return [active[i] for i in balanced_order(len(active), index)]
        k = index % len(active)
        return active[k:] + active[:k]

    def _round(self, order: list[Candidate], events: dict, index: int) -> RoundInfo:
        if self.clocks is not None:
            self.clocks.start()
        for c in order:
            self._enqueue(c, *events[c.name])
        self.device.synchronize()
        info = RoundInfo(index, [c.name for c in order])
        if self.clocks is not None:
            readings = self.clocks.stop()
            info.sm_mhz_min, info.sm_mhz_max, info.reasons, info.throttled = judge_round(
                readings, self.clocks.max_sm_mhz, self.settings.throttle_fraction)
        return info

    def measure(self, candidates: Sequence[Candidate],
                on_round: Callable[[RoundInfo, dict[str, Samples]], None] | None = None) -> Run:
        """Interleaved rounds until every candidate has stopped (see the module docstring);
        ``on_round`` is called after each round (a progress bar)."""
        names = [c.name for c in candidates]
        if len(set(names)) != len(names):
            raise ValueError(f"candidate names must be unique: {names}")
        if self.settings.sustained:
            return self._sustained(candidates, on_round)
        seed = self.settings.seed if self.settings.seed is not None else random.SystemRandom().randrange(2**32)
        rng = random.Random(seed)
        samples = {c.name: Samples(c.name) for c in candidates}
        events = {c.name: (self.device.new_event(), self.device.new_event()) for c in candidates}
        rounds: list[RoundInfo] = []
        active = list(candidates)
        while active:
            order = self._order(active, len(rounds), rng)
            info = self._round(order, events, len(rounds))
            rounds.append(info)
            for c in order:
                s = samples[c.name]
                s.times_ms.append(self.device.elapsed_ms(*events[c.name]))
                s.throttled.append(info.throttled)
            for c in list(active):
                reason = self._done(samples[c.name])
                if reason:
                    samples[c.name].stop_reason = reason
                    active.remove(c)
            if on_round is not None:
                on_round(info, samples)
        return Run(samples, rounds, seed)

    # -- sustained mode (see the module docstring)
    CALIBRATION_CALLS = 3

    def _calibrate(self, c: Candidate) -> tuple[int, bool]:
        """(launches in one of ``c``'s blocks, host-bound): a few calls timed behind the spin (their
        GPU time, host latency kept out as in sampled mode) and on the host (their enqueue cost).
        The block is about ``sustained_s`` of GPU time; the candidate is host-bound when a call
        costs the host more than the GPU, so that back to back the GPU would wait for the host.
        One untimed call comes first: a cold first call (torch's cuBLAS handle and heuristics, a
        module's load) sat inside these intervals and gave cuBLAS blocks of 72 launches (0.2 s)
        where the others had ~660-760, too short for the energy counter's 100 ms steps (a probe of session
        18, benchmarks/results/h100_tf32_tiles256_sustained_8192.json)."""
        start, end = self.device.new_event(), self.device.new_event()
        c.fn()
        self.device.synchronize()
        self.device.spin(int(self.settings.spin_us * 1000))
        self.device.record(start)
        h0 = self.host_clock()
        for _ in range(self.CALIBRATION_CALLS):
            c.fn()
        host_ms = (self.host_clock() - h0) * 1e3 / self.CALIBRATION_CALLS
        self.device.record(end)
        self.device.synchronize()
        gpu_ms = self.device.elapsed_ms(start, end) / self.CALIBRATION_CALLS
        calls = max(1, round(self.settings.sustained_s * 1e3 / gpu_ms)) if gpu_ms > 0 else 1
        return calls, host_ms > gpu_ms

    def _block(self, c: Candidate, calls: int, host_bound: bool, start, end) -> tuple[float, Block, list[ClockReading]]:
        """``calls`` launches of ``c`` back to back between two events: (ms per call, the block's
        figures, its clock readings). The energy per call is the block's mean power (the counter's
        slope, ``counter_watts``) times its time per call."""
        self.device.synchronize()
        for meter in (self.clocks, self.energy):
            if meter is not None:
                meter.start()
        self.device.spin(int(self.settings.spin_us * 1000))   # the host ahead of the GPU from the first call on
        self.device.record(start)
        for _ in range(calls):
            c.fn()
        self.device.record(end)
        self.device.synchronize()
        readings = self.clocks.stop() if self.clocks is not None else []
        watts = counter_watts(self.energy.stop()) if self.energy is not None else None
        ms = self.device.elapsed_ms(start, end) / calls
        busy = _busy(readings)
        block = Block(calls, mj_per_call=watts * ms if watts is not None else None, watts=watts,
                      sm_mhz=statistics.fmean(r.sm_mhz for r in busy) if busy else None, host_bound=host_bound)
        return ms, block, readings

    def _sustained(self, candidates: Sequence[Candidate],
                   on_round: Callable[[RoundInfo, dict[str, Samples]], None] | None) -> Run:
        st = self.settings
        calls = {c.name: self._calibrate(c) for c in candidates}
        events = {c.name: (self.device.new_event(), self.device.new_event()) for c in candidates}
        for c in candidates:           # untimed: the GPU to its steady state
            self._block(c, *calls[c.name], *events[c.name])
        samples = {c.name: Samples(c.name) for c in candidates}
        rounds: list[RoundInfo] = []
        for index in range(st.sustained_rounds):
            order = list(candidates) if index % 2 == 0 else list(reversed(candidates))
            info = RoundInfo(index, [c.name for c in order])
            readings: list[ClockReading] = []
            for c in order:
                ms, block, rd = self._block(c, *calls[c.name], *events[c.name])
                readings += rd
                s = samples[c.name]
                s.times_ms.append(ms)
                s.blocks.append(block)
            info.sm_mhz_min, info.sm_mhz_max, info.reasons, info.throttled = judge_round(
                readings, self.clocks.max_sm_mhz if self.clocks is not None else None, None)
            for c in order:
                samples[c.name].throttled.append(info.throttled)
            rounds.append(info)
            if on_round is not None:
                on_round(info, samples)
        for s in samples.values():
            s.stop_reason = "sustained rounds"
        return Run(samples, rounds, None)

    def isolated(self, candidate: Candidate) -> Samples:
        """The candidate alone, back to back (the self-check's reference)."""
        return self.measure([candidate]).samples[candidate.name]


def self_check(interleaved: Samples, isolated: Samples, tolerance: float = 0.03) -> dict:
    """Whether the baseline timed among the others agrees with the baseline timed alone."""
    a, b = interleaved.median, isolated.median
    if not a or not b:
        return {"ok": None, "difference": None, "message": "self-check not possible: no samples"}
    diff = a / b - 1.0
    ok = abs(diff) <= tolerance
    msg = (f"{interleaved.name} interleaved {a:.4f} ms vs alone {b:.4f} ms ({100 * diff:+.1f}%): "
           + ("agree within " if ok else "DIFFER by more than ") + f"{100 * tolerance:.0f}%")
    if not ok:
        msg += "; the ratios to it in this run are not trustworthy"
    return {"ok": ok, "difference": diff, "interleaved_ms": a, "isolated_ms": b, "tolerance": tolerance,
            "message": msg}
