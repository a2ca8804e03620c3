"""The timing engine (measure/timing.py) on a simulated GPU: a host that pays for every enqueue and
a GPU that runs the queue in order, so host latency can leak into an interval exactly as it does
on real hardware when the GPU idles before a start event."""

from __future__ import annotations

import random

import pytest

from gemmlab.measure.timing import (Candidate, ClockReading, Engine, Samples, Settings, counter_watts, judge_round,
                                    self_check)


class Event:
    t: float = float("nan")


class SimGPU:
    """Host time advances by the cost of each call; GPU work starts at max(GPU free, enqueue time);
    an event fires when the GPU reaches it (at once on an idle GPU)."""

    def __init__(self, host_cost=0.01, launch_cost=0.3, flush_ms=0.05):
        self.host = 0.0
        self.gpu_free = 0.0
        self.host_cost, self.launch_cost, self.flush_ms = host_cost, launch_cost, flush_ms
        self.calls: list[str] = []

    def _submit(self, dur: float, cost: float) -> None:
        self.host += cost
        start = max(self.gpu_free, self.host)
        self.gpu_free = start + dur

    def new_event(self):
        return Event()

    def record(self, ev) -> None:
        self.host += self.host_cost
        ev.t = max(self.gpu_free, self.host)

    def elapsed_ms(self, s, e) -> float:
        return e.t - s.t

    def spin(self, ns: int) -> None:
        self.calls.append("spin")
        self._submit(ns / 1e6, self.host_cost)

    def flush(self) -> None:
        self.calls.append("flush")
        self._submit(self.flush_ms, self.host_cost)

    def synchronize(self) -> None:
        self.calls.append("sync")
        self.host = max(self.host, self.gpu_free) + self.host_cost

    def kernel(self, duration, rng=None, jitter=0.0):
        def fn():
            self.calls.append("launch")
            d = duration * (1 + rng.gauss(0, jitter)) if rng else duration
            self._submit(d, self.launch_cost)
        return fn


def _cands(gpu, **durations):
    return [Candidate(n, gpu.kernel(d)) for n, d in durations.items()]


FAST = dict(min_samples=5, max_samples=20, warmup=0)


def test_a_spin_before_each_launch_keeps_host_latency_out_of_the_interval():
    gpu = SimGPU(launch_cost=0.3)
    run = Engine(gpu, Settings(spin_us=1000, **FAST)).measure(_cands(gpu, cublas=1.0, rung=2.0))
    assert run.samples["cublas"].times_ms == pytest.approx([1.0] * run.samples["cublas"].n)
    assert run.samples["rung"].times_ms == pytest.approx([2.0] * run.samples["rung"].n)


def test_without_the_spin_the_first_launch_of_a_round_absorbs_host_latency():
    """The bias the spin removes: the simulated GPU reproduces it."""
    gpu = SimGPU(launch_cost=0.3)
    run = Engine(gpu, Settings(spin_us=0, l2="hot", order="rotate", **FAST)).measure(_cands(gpu, a=1.0, b=1.0))
    first = [rnd.order[0] for rnd in run.rounds]
    for name in ("a", "b"):
        led = [t for t, r in zip(run.samples[name].times_ms, run.rounds) if r.order[0] == name]
        assert led and all(t == pytest.approx(1.3) for t in led)
    assert set(first) == {"a", "b"}


def test_the_rotating_order_lets_every_candidate_lead_a_round():
    gpu = SimGPU()
    run = Engine(gpu, Settings(order="rotate", **FAST)).measure(_cands(gpu, x=1.0, y=1.0, z=1.0))
    assert [r.order for r in run.rounds[:3]] == [["x", "y", "z"], ["y", "z", "x"], ["z", "x", "y"]]


def test_the_default_order_is_balanced():
    assert Settings().order == "balanced"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8])
def test_a_balanced_order_leads_with_each_and_puts_each_after_each_other_equally_often(n):
    names = [f"c{i}" for i in range(n)]
    period = n if n % 2 == 0 else 2 * n
    gpu = SimGPU()
    run = Engine(gpu, Settings(order="balanced", min_samples=period, max_samples=period, warmup=0,
                               target_error=0.0)).measure(_cands(gpu, **{c: 1.0 for c in names}))
    orders = [r.order for r in run.rounds]
    assert len(orders) == period and all(sorted(o) == names for o in orders)
    leads = {c: sum(o[0] == c for o in orders) for c in names}
    assert set(leads.values()) == {period // n}
    pairs = {}
    for o in orders:
        for a, b in zip(o, o[1:]):
            pairs[a, b] = pairs.get((a, b), 0) + 1
    assert len(pairs) == n * (n - 1) and set(pairs.values()) <= {period // n}


class CarryGPU(SimGPU):
    """A launch right after a heavy one runs 5% longer (the GPU left warm, its clock lower); the
    host's synchronize between rounds lets it cool."""

    def __init__(self):
        super().__init__()
        self.after_heavy = False

    def kernel(self, duration, heavy=False):
        def fn():
            self.calls.append("launch")
            self._submit(duration * (1.05 if self.after_heavy else 1.0), self.launch_cost)
            self.after_heavy = heavy
        return fn

    def synchronize(self) -> None:
        super().synchronize()
        self.after_heavy = False


def _carry_run(order):
    gpu = CarryGPU()
    cands = [Candidate("heavy", gpu.kernel(20.0, heavy=True)), Candidate("a", gpu.kernel(1.0)), Candidate("b", gpu.kernel(1.0))]
    return Engine(gpu, Settings(order=order, min_samples=18, max_samples=18, warmup=0, target_error=0.0)).measure(cands)


def test_a_balanced_order_times_two_equal_kernels_alike_beside_a_heavy_one():
    run = _carry_run("balanced")
    assert run.samples["a"].median == pytest.approx(run.samples["b"].median)
    assert sorted(run.samples["a"].times_ms) == pytest.approx(sorted(run.samples["b"].times_ms))


def test_a_rotating_order_times_the_kernel_behind_a_heavy_one_slower():
    """What the balanced order fixes: with rotation 'a' always follows 'heavy' (unless it leads)."""
    run = _carry_run("rotate")
    assert run.samples["a"].median == pytest.approx(1.05)
    assert run.samples["b"].median == pytest.approx(1.0)


def test_a_shuffled_order_is_reproduced_by_its_recorded_seed():
    gpu = SimGPU()
    run1 = Engine(gpu, Settings(order="shuffle", **FAST)).measure(_cands(gpu, a=1.0, b=1.0, c=1.0, d=1.0))
    gpu2 = SimGPU()
    run2 = Engine(gpu2, Settings(order="shuffle", seed=run1.seed, **FAST)).measure(_cands(gpu2, a=1.0, b=1.0, c=1.0, d=1.0))
    assert [r.order for r in run1.rounds] == [r.order for r in run2.rounds]
    assert len({tuple(r.order) for r in run1.rounds}) > 1


def test_the_host_synchronizes_once_per_round():
    gpu = SimGPU()
    run = Engine(gpu, Settings(**FAST)).measure(_cands(gpu, a=1.0, b=2.0))
    assert gpu.calls.count("sync") == len(run.rounds)


def test_cold_l2_flushes_before_every_sample_and_hot_l2_never():
    gpu = SimGPU()
    Engine(gpu, Settings(l2="cold", **FAST)).measure(_cands(gpu, a=1.0))
    assert gpu.calls.count("flush") == gpu.calls.count("launch")
    gpu = SimGPU()
    Engine(gpu, Settings(l2="hot", **FAST)).measure(_cands(gpu, a=1.0))
    assert gpu.calls.count("flush") == 0


def test_steady_times_stop_at_the_minimum_sample_count():
    gpu = SimGPU()
    run = Engine(gpu, Settings(min_samples=7, max_samples=50, warmup=0)).measure(_cands(gpu, a=1.0))
    assert run.samples["a"].n == 7 and run.samples["a"].stop_reason == "noise target"


def test_noisy_times_take_samples_until_the_median_error_meets_the_target():
    gpu = SimGPU()
    rng = random.Random(3)
    eng = Engine(gpu, Settings(min_samples=5, max_samples=500, target_error=0.005, warmup=0))
    s = eng.measure([Candidate("noisy", gpu.kernel(1.0, rng, 0.03))]).samples["noisy"]
    assert s.stop_reason == "noise target" and s.n > 5
    assert s.median_error <= 0.005


def test_a_candidate_that_never_settles_stops_at_the_sample_cap():
    gpu = SimGPU()
    rng = random.Random(1)
    eng = Engine(gpu, Settings(min_samples=5, max_samples=12, target_error=1e-9, warmup=0))
    s = eng.measure([Candidate("wild", gpu.kernel(1.0, rng, 0.2))]).samples["wild"]
    assert (s.n, s.stop_reason) == (12, "max samples")


def test_a_slow_candidate_stops_at_the_time_cap_after_three_samples():
    gpu = SimGPU()
    eng = Engine(gpu, Settings(min_samples=10, max_samples=100, time_cap_s=0.5, warmup=0))
    run = eng.measure(_cands(gpu, slow=400.0, fast=1.0))
    assert (run.samples["slow"].n, run.samples["slow"].stop_reason) == (3, "time cap")
    assert run.samples["fast"].n >= 10


def test_warm_up_runs_each_candidate_untimed():
    gpu = SimGPU()
    Engine(gpu, Settings(warmup=4, l2="hot")).warm_up(_cands(gpu, a=1.0, b=1.0))
    assert gpu.calls.count("launch") == 8 and gpu.calls[-1] == "sync"


class FakeClocks:
    def __init__(self, max_sm_mhz, per_round):
        self.max_sm_mhz = max_sm_mhz
        self.per_round = list(per_round)

    def start(self):
        pass

    def stop(self):
        return self.per_round.pop(0) if self.per_round else []


def test_a_round_with_low_busy_clocks_marks_its_samples_throttled():
    gpu = SimGPU()
    fine = [ClockReading(0, 1980), ClockReading(1, 1980)]
    slow = [ClockReading(0, 1980), ClockReading(1, 1400, ("SwPowerCap",))]
    clocks = FakeClocks(1980, [fine, slow, fine, fine, fine])
    run = Engine(gpu, Settings(min_samples=5, max_samples=5, warmup=0), clocks).measure(_cands(gpu, a=1.0))
    assert run.samples["a"].throttled == [False, True, False, False, False]
    assert run.rounds[1].sm_mhz_min == 1400 and run.rounds[1].reasons == ["SwPowerCap"]
    assert run.samples["a"].as_dict()["throttled_samples"] == 1


def test_idle_readings_and_unthrottled_reasons_are_not_throttling():
    assert judge_round([ClockReading(0, 345, ("GpuIdle",)), ClockReading(1, 1980)], 1980, 0.9)[3] is False
    assert judge_round([ClockReading(0, 1980, ("HwThermalSlowdown",))], 1980, 0.9)[3] is True
    assert judge_round([], 1980, 0.9) == (None, None, [], False)


def test_the_self_check_agrees_within_three_percent_and_says_so_when_not():
    same = self_check(Samples("cublas", [1.0, 1.01, 0.99]), Samples("cublas", [1.0, 1.0, 1.0]))
    assert same["ok"] is True and "agree" in same["message"]
    off = self_check(Samples("cublas", [1.1] * 3), Samples("cublas", [1.0] * 3))
    assert off["ok"] is False and "DIFFER" in off["message"] and off["difference"] == pytest.approx(0.1)


def test_isolated_timing_runs_the_candidate_alone():
    gpu = SimGPU()
    s = Engine(gpu, Settings(**FAST)).isolated(Candidate("cublas", gpu.kernel(1.5)))
    assert s.median == pytest.approx(1.5) and s.n == 5


@pytest.mark.parametrize("bad, match", [
    (dict(l2="warm"), "l2 must be"), (dict(order="random"), "order must be"),
    (dict(min_samples=0), "min_samples"), (dict(min_samples=10, max_samples=5), "below min_samples"),
    (dict(warmup=-1), "warmup"), (dict(spin_us=-1.0), "spin_us"),
])
def test_bad_settings_are_refused_naming_the_setting(bad, match):
    with pytest.raises(ValueError, match=match):
        Settings(**bad)


def test_candidate_names_must_be_unique():
    gpu = SimGPU()
    with pytest.raises(ValueError, match="unique"):
        Engine(gpu, Settings(**FAST)).measure(_cands(gpu, a=1.0) * 2)


# ---- sustained mode ------------------------------------------------------------------------------
class SimEnergy:
    """A board's energy counter that moves in steps every ``period_ms`` of the simulated host clock,
    at ``watts`` (idle gaps included, as a board draws power idle too); ``stop`` gives the readings
    a polling thread would have taken at every step."""

    def __init__(self, gpu, watts, period_ms=0.5):
        self.gpu, self.watts, self.period = gpu, watts, period_ms

    def start(self):
        self.t0 = self.gpu.host

    def stop(self):
        steps = range(int(self.t0 // self.period) + 1, int(self.gpu.host // self.period) + 1)
        return [(k * self.period / 1e3, k * self.period * self.watts) for k in steps for _ in (0, 1)]


SUSTAINED = dict(sustained_s=0.01, sustained_rounds=4, spin_us=1000.0)


def _engine(gpu, settings, **kw):
    """An engine on the simulated GPU whose host clock is the simulation's (seconds)."""
    return Engine(gpu, settings, host_clock=lambda: gpu.host / 1e3, **kw)


def test_a_sustained_sample_is_a_block_of_back_to_back_launches_without_flush_or_spin():
    gpu = SimGPU(launch_cost=0.01)
    run = Engine(gpu, Settings(**SUSTAINED)).measure(_cands(gpu, a=1.0))
    s = run.samples["a"]
    assert s.times_ms == pytest.approx([1.0] * 4) and s.stop_reason == "sustained rounds"
    assert [b.calls for b in s.blocks] == [10] * 4          # 10 ms of GPU time at 1 ms a call
    assert gpu.calls.count("launch") == 1 + 3 + 10 + 4 * 10     # first call, calibration, untimed block, 4 timed
    assert "flush" not in gpu.calls and gpu.calls.count("spin") == 1 + 1 + 4   # one before each, none inside
    assert gpu.calls[:7] == ["launch", "sync", "spin", "launch", "launch", "launch", "sync"]   # the calibration
    assert gpu.calls[7:] == (["sync", "spin"] + ["launch"] * 10 + ["sync"]) * 5        # the blocks


def test_a_cold_first_call_does_not_shorten_the_sustained_blocks():
    gpu = SimGPU(launch_cost=0.01)
    launch = gpu.kernel(1.0)
    cold = [True]

    def fn():
        if cold[0]:          # a library's set-up on its first call: 50 ms of host time before the launch
            cold[0] = False
            gpu.host += 50.0
        launch()

    run = Engine(gpu, Settings(**SUSTAINED)).measure([Candidate("a", fn)])
    assert [b.calls for b in run.samples["a"].blocks] == [10] * 4


def test_sustained_rounds_go_forward_then_backward():
    gpu = SimGPU(launch_cost=0.01)
    run = Engine(gpu, Settings(**SUSTAINED)).measure(_cands(gpu, a=1.0, b=2.0, c=0.5))
    assert [r.order for r in run.rounds] == [["a", "b", "c"], ["c", "b", "a"]] * 2
    assert run.seed is None


def test_a_sustained_block_gives_the_power_from_the_counters_steps_and_the_energy_per_call():
    gpu = SimGPU(launch_cost=0.01)
    run = _engine(gpu, Settings(**SUSTAINED), energy=SimEnergy(gpu, watts=700.0)).measure(_cands(gpu, a=2.0))
    b = run.samples["a"].blocks[0]
    assert b.watts == pytest.approx(700.0) and b.mj_per_call == pytest.approx(1400.0)   # 700 W for 2 ms
    assert b.host_bound is False and run.samples["a"].as_dict()["blocks"][0]["mj_per_call"] == b.mj_per_call


def test_the_power_comes_from_the_instants_the_counter_changed_not_its_ends():
    # steps of 100 J every 0.1 s (1000 W), read every 0.03 s: the ends fall mid-step
    readings = [(0.03 * i, 1e5 * (0.03 * i // 0.1)) for i in range(40)]
    assert counter_watts(readings) == pytest.approx(1000.0, rel=0.1)
    assert counter_watts([(0.0, 5.0), (0.5, 5.0), (1.0, 7.0)]) is None        # one change: no slope


def test_without_an_energy_counter_the_blocks_carry_no_energy():
    gpu = SimGPU(launch_cost=0.01)
    b = Engine(gpu, Settings(**SUSTAINED)).measure(_cands(gpu, a=1.0)).samples["a"].blocks[0]
    assert b.mj_per_call is None and b.watts is None


def test_a_call_that_costs_the_host_more_than_the_gpu_is_marked_host_bound():
    gpu = SimGPU(launch_cost=0.3)
    run = _engine(gpu, Settings(**SUSTAINED)).measure(_cands(gpu, fast=0.05, slow=1.0))
    assert all(b.host_bound for b in run.samples["fast"].blocks)
    assert not any(b.host_bound for b in run.samples["slow"].blocks)


def test_the_power_cap_clock_is_the_sustained_steady_state_not_throttling():
    gpu = SimGPU(launch_cost=0.01)
    capped = [ClockReading(0, 1400, ("SwPowerCap",))]
    hot = [ClockReading(0, 1300, ("HwThermalSlowdown",))]
    clocks = FakeClocks(1980, [capped] * 2 + [capped, hot] + [capped] * 4)   # 2 settle blocks, then 4 rounds x 2
    run = Engine(gpu, Settings(**SUSTAINED), clocks).measure(_cands(gpu, a=1.0, b=1.0))
    assert [r.throttled for r in run.rounds] == [True, False, False, False]
    assert run.rounds[0].sm_mhz_min == 1300 and run.samples["a"].blocks[0].sm_mhz == pytest.approx(1400)


def test_sustained_mode_has_no_separate_warm_up():
    gpu = SimGPU()
    Engine(gpu, Settings(**SUSTAINED, warmup=5)).warm_up(_cands(gpu, a=1.0))
    assert gpu.calls == []


@pytest.mark.parametrize("bad, match", [
    (dict(sustained_s=-1.0), "sustained_s"), (dict(sustained_rounds=3), "even"), (dict(sustained_rounds=0), "even"),
])
def test_bad_sustained_settings_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        Settings(**bad)
