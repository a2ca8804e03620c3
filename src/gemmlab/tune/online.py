"""On-line tuning's measurement (core/autotune.py says when it runs): time a new signature's
candidate configurations on the caller's own operands with the one timing engine and keep the
fastest where ``kernel="auto"`` reads tuned configurations.

The candidates (``dispatch.candidates``) run on the caller's A and B into C itself when beta is 0
(the call that follows overwrites it) and into a copy of C otherwise, so a caller's C is never
changed by the measuring. Timing: the engine's interleaved rounds with a warm L2 and a short spin
(the calls of a model run back to back), 3 to 20 samples per candidate. A candidate is started only
while ``budget_s`` is left (its plan, an NVRTC compile when it is not cached, counts); auto's own
choice always is. The winner goes into ``<cache dir>/online.json``, and into ``tuned.json``, the
file auto reads (``tune.export`` keeps online.json's entries through every export of the
tuning database); each entry says ``"source": "online"``, the time of every candidate and when.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from ..core import dispatch
from ..core.launch import Plan
from ..core.precision import label
from ..core.problem import make_problem
from ..measure import arrays, gpu_timing, timing
from .export import online_path, read_table, slot, write_table

TIMING = timing.Settings(l2="hot", spin_us=20.0, spin="idle", warmup=2, min_samples=3, max_samples=20,
                         target_error=0.01, time_cap_s=0.2)


def _scratch_c(problem, c):
    """C itself when beta is 0, else a copy with C's strides (the candidates' writes must not reach
    the caller's C, and the copy must be the same problem: a padded or column-major C stays so)."""
    if problem.beta == 0.0:
        return c
    if hasattr(c, "clone"):                       # PyTorch
        import torch

        out = torch.empty_strided(c.size(), c.stride(), dtype=c.dtype, device=c.device)
        return out.copy_(c)
    import cupy

    span = 1 + sum((n - 1) * abs(s) // c.itemsize for n, s in zip(c.shape, c.strides))
    out = cupy.lib.stride_tricks.as_strided(cupy.empty(span, dtype=c.dtype), c.shape, c.strides)
    out[...] = c
    return out


def tune_problem(problem, device, precision, operands, settings):
    """The fastest of ``dispatch.candidates`` measured on ``operands`` (a, b, c), stored; None
    when fewer than two candidates could be timed (nothing to choose between: auto decides)."""
    start = time.perf_counter()
    a, b, c = operands
    cands = dispatch.candidates(problem, device, precision, settings.candidates)
    if len(cands) < 2:
        return None
    scratch = _scratch_c(problem, c)
    prob = problem if scratch is c else make_problem(a, b, scratch, problem.alpha, problem.beta)
    L = arrays.Lib(problem.c.lib)
    dev = gpu_timing.CudaDevice(L, problem.c.device, device.l2_bytes, flush=False, spin=TIMING.spin)
    runnable, skipped = [], []
    for i, choice in enumerate(cands):
        if i and time.perf_counter() - start > settings.budget_s:
            skipped.append(choice)
            continue
        try:
            plan = Plan(prob, choice.rung, choice.config, stream=dev.stream, choice=choice, precision=precision)
        except (ValueError, RuntimeError):   # a configuration this device cannot take (resources)
            skipped.append(choice)
            continue
        runnable.append((f"{i}:{choice.rung.slug}", choice, plan))
    if len(runnable) < 2:
        return None
    engine = timing.Engine(dev, TIMING, None)
    tcands = [timing.Candidate(name, lambda p=plan: p.run(dev.stream)) for name, _, plan in runnable]
    engine.warm_up(tcands)
    samples = engine.measure(tcands).samples
    ms = {name: samples[name].median for name, _, _ in runnable}
    name, best, _ = min(runnable, key=lambda r: ms[r[0]])
    elapsed = time.perf_counter() - start
    times = ", ".join(f"{c.rung.slug} {ms[n] * 1e3:.1f} us" for n, c, _ in runnable)
    why = (f"on-line tuning: the fastest of {len(runnable)} candidates ({times}) in {elapsed:.1f} s"
           + (f"; {len(skipped)} not timed (budget {settings.budget_s:g} s)" if skipped else "")
           + f"; first candidate's reason: {cands[0].reason}")
    _store(problem, device, precision, best, ms[name], {n: ms[n] for n, _, _ in runnable})
    return dispatch.Choice(best.rung, best.config, "online", why, best.entry)


def _store(problem, device, precision, choice, ms: float, all_ms: dict) -> None:
    """The winner as a table entry in online.json and tuned.json (nothing when the cache is off)."""
    path = online_path()
    if path is None:
        return
    kp = problem.kernel_view()
    entry = {"dtype": label(problem.dtype, precision), "shape": [kp.M, kp.N, kp.K],
             "layout": dispatch.layout_of(kp), "rung": choice.rung.slug,
             "config": {k: v for k, v in choice.config.items() if k != "PACK"}, "gpu_name": device.name,
             "arch": device.arch, "tflops": 2.0 * kp.M * kp.N * kp.K / (ms * 1e-3) / 1e12, "source": "online",
             "candidates_ms": all_ms, "measured": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    for target, what in ((path, "gemmlab on-line tuning (core/autotune.py): the fastest candidate of each new shape"),
                         (dispatch.tuned_path(), None)):
        doc = read_table(target)
        meta = {k: v for k, v in doc.items() if k not in ("entries", "written", "format")}
        if what:
            meta["source"] = what
        entries = [e for e in doc.get("entries", []) if slot(e) != slot(entry)] + [entry]
        write_table(target, entries, **meta)
    dispatch.reload()
