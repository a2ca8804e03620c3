"""The search: ask the strategy for a batch, prune, compile the batch in parallel, verify and time
each candidate, tell the results -- until the budget, the time or the space runs out.

One worker runs ``search`` on one evaluator (one GPU); several workers may share a study (the
database keeps them apart: a candidate asked by one is RUNNING for the others). Rules:

* A proposal the constraints refuse is told at once (status "invalid", its reasons): it costs no
  compile and no evaluation of the budget.
* A configuration already recorded in the study (by this run, an earlier one, or another worker)
  is never measured again: the proposal is told the recorded value (status "repeat") so the
  sampler learns, and costs nothing.
* Compile errors, spills, wrong results and run-time errors are recorded with their reason and the
  search goes on; they are told as PRUNED so that Optuna's samplers count them as bad points
  (a FAILed trial is ignored by TPE, which would then propose it again).
* A candidate more than ``SLOW_FACTOR`` x slower than the best so far is recorded "slow" from a
  short estimate (the evaluator stops timing it early).
* Ctrl-C: the trials in hand are failed ("interrupted") before the exception goes on; a crash
  leaves them RUNNING until ``store.fail_stale``. Either way ``retry_failed`` queues those
  configurations again at the next start, at most ``MAX_ATTEMPTS`` times in all.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

from .evaluate import MEASURED, Evaluator, Outcome
from .space import Space
from .store import Heartbeat, key_flop, optuna, record_peers, retrying

SLOW_FACTOR = 3.0
MAX_MISSES = 2000      # proposals in a row that are refused or already recorded: the sampler is stuck
MAX_ATTEMPTS = 2       # evaluations of one configuration that may crash before it is left alone
_TAKEN = object()              # ``_ask``'s answer when its proposal was refused for the run's budget


@dataclass(frozen=True)
class _Refusal:
    """Why a trial may not measure its configuration now (``_Worker._claim``)."""

    reason: str
    budget: bool = False          # the run's budget is taken: a later proposal would be refused too


@dataclass
class Job:
    """What one worker does."""

    strategy: str                        # concrete (strategies.resolve)
    run: str                             # this run's id, shared by its workers
    budget: int | None = None            # evaluations of this run, all workers together
    seconds: float | None = None         # wall time of this worker
    batch: int = 8                       # candidates asked, compiled in parallel, then timed
    stripe: tuple[int, int] = (0, 1)     # exhaustive: worker i of n takes candidates i, i+n, ...
    target: float | None = None          # stop once a candidate reaches this many TFLOP/s (replays)


@dataclass
class Stats:
    evaluated: int = 0
    counts: dict = field(default_factory=dict)
    proposals: int = 0
    stopped: str = ""
    best: dict | None = None             # {"config", "ms", "tflops", "number"}


# ---- the study as the search sees it -------------------------------------------------------------
@dataclass
class _View:
    recorded: dict                       # key -> {"state", "value", "status", "ms", "number"}
    attempts: dict                       # key -> crashed or interrupted evaluations
    running: set                         # keys held by a worker now
    queued: set                          # keys waiting in the study's queue (retries, exhaustive)
    used: int                            # evaluations of this run so far, all workers
    best_ms: float | None


def _view(study, run: str) -> _View:
    TS = optuna().trial.TrialState
    trials = retrying(lambda: study.get_trials(deepcopy=False), "reading the trials")
    recorded, attempts, running, queued, used, best = {}, {}, set(), set(), 0, None
    for t in trials:
        if t.state == TS.WAITING:
            queued.add(t.user_attrs.get("queued_key"))
            continue
        cand, res = t.user_attrs.get("candidate") or {}, t.user_attrs.get("result") or {}
        key, status = cand.get("key"), res.get("status")
        if key is None or status in ("invalid", "repeat"):
            continue
        if cand.get("run") == run and t.state != TS.FAIL:
            used += 1
        if t.state == TS.RUNNING:
            running.add(key)
        elif t.state == TS.FAIL:
            attempts[key] = attempts.get(key, 0) + 1
        elif t.state in (TS.COMPLETE, TS.PRUNED):
            recorded[key] = {"state": t.state, "value": t.value, "status": status, "ms": res.get("ms"),
                             "number": t.number}
            if status == "ok" and res.get("ms") and (best is None or res["ms"] < best):
                best = res["ms"]
    return _View(recorded, attempts, running, queued, used, best)


def retry_failed(study, space: Space) -> int:
    """Queue again every configuration whose evaluation crashed or was interrupted and that has no
    record since, fewer than ``MAX_ATTEMPTS`` times; returns how many were queued."""
    TS = optuna().trial.TrialState
    v = _view(study, run="")
    waiting = set(v.queued)
    n = 0
    for t in study.get_trials(deepcopy=False, states=(TS.FAIL,)):
        cand = t.user_attrs.get("candidate") or {}
        key, cfg = cand.get("key"), cand.get("config")
        if (key and cfg and key not in v.recorded and key not in v.running and key not in waiting
                and v.attempts.get(key, 0) < MAX_ATTEMPTS):
            study.enqueue_trial(space.encode(cfg), user_attrs={"retry_of": t.number, "queued_key": key})
            waiting.add(key)
            n += 1
    return n


def enqueue_starts(study, space: Space, configs) -> int:
    """Queue the starting points (``runner.starting_points``) that the study has neither recorded,
    nor in hand, nor queued; returns how many were queued. The queue hands them out before the
    sampler's own proposals, so a run measures what ``auto`` would run before searching around it."""
    v = _view(study, run="")
    waiting = set(v.queued)
    n = 0
    for cfg in configs:
        key = space.key(cfg)
        if key in v.recorded or key in v.running or key in waiting:
            continue
        retrying(lambda: study.enqueue_trial(space.encode(cfg), user_attrs={"queued_key": key, "start": True}),
                 "queueing a starting point")
        waiting.add(key)
        n += 1
    return n


# ---- telling ---------------------------------------------------------------------------------------
def _attrs(trial, name: str, **kv) -> None:
    """One user attribute (a dict): each is a database transaction, so a trial gets two."""
    retrying(lambda: trial.set_user_attr(name, kv), f"recording the {name} of trial {trial.number}")


def _tell(study, trial, outcome: Outcome, flop: float) -> float | None:
    """Record ``outcome`` on ``trial``; returns the TFLOP/s told (None when PRUNED)."""
    TS = optuna().trial.TrialState
    _attrs(trial, "result", status=outcome.status, reason=outcome.reason, ms=outcome.ms, detail=outcome.detail)
    if outcome.status in MEASURED and outcome.ms:
        value = flop / (outcome.ms * 1e-3) / 1e12
        retrying(lambda: study.tell(trial, value, skip_if_finished=True), f"telling trial {trial.number}")
        return value
    retrying(lambda: study.tell(trial, state=TS.PRUNED, skip_if_finished=True), f"telling trial {trial.number}")
    return None


def _tell_repeat(study, trial, rec: dict) -> None:
    TS = optuna().trial.TrialState
    _attrs(trial, "result", status="repeat", reason=f"recorded by trial {rec['number']}", repeat_of=rec["number"])
    if rec["state"] == TS.COMPLETE:
        study.tell(trial, rec["value"], skip_if_finished=True)
    else:
        study.tell(trial, state=TS.PRUNED, skip_if_finished=True)


# ---- one worker ------------------------------------------------------------------------------------
class _Worker:
    def __init__(self, study, storage, space: Space, evaluator: Evaluator, job: Job,
                 on_result: Callable[[dict, Stats], None] | None):
        self.study, self.space, self.ev, self.job = study, space, evaluator, job
        self.on_result = on_result
        self.stats = Stats()
        self.misses = 0                              # proposals in a row refused or already recorded
        self.held: dict[int, object] = {}            # trial number -> trial asked and not told
        self.heart = Heartbeat(storage) if hasattr(storage, "record_heartbeat") else None
        self.t0 = time.monotonic()
        self.flop = key_flop(study.user_attrs["key"])
        cands = space.candidates()
        i, n = job.stripe
        self.mine = cands[i::n] if job.strategy == "exhaustive" else cands
        self.all_keys = {space.key(c) for c in cands}

    # -- asking
    def _ask(self, view: _View, batch: list, exhaustive_todo: list):
        """One proposal: (trial, config) to evaluate, or None when it was told at once."""
        if exhaustive_todo and not self._queue_busy():
            # one at a time, and only into an empty queue: the queue hands out first what was queued
            # first (configurations retried after a crash), so nothing this worker queues is left behind
            cfg = exhaustive_todo.pop(0)
            retrying(lambda: self.study.enqueue_trial(self.space.encode(cfg), user_attrs={"queued_key": self.space.key(cfg)}),
                     "queueing a candidate")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)   # Optuna: "heartbeat ... used with Study.optimize"
            trial = retrying(self.study.ask, "asking for a trial")
        self.held[trial.number] = trial
        if self.heart:
            self.heart.hold(trial._trial_id)
        self.stats.proposals += 1
        cfg = self.space.decode({k: trial.suggest_int(k, 0, len(v) - 1) for k, v in self.space.params.items()})
        key = self.space.key(cfg)
        _attrs(trial, "candidate", config=cfg, key=key, run=self.job.run, device=self.ev.device)
        reasons = self.space.check(cfg)
        if reasons:
            _attrs(trial, "result", status="invalid", reason="; ".join(reasons))
            self._told(trial, lambda: self.study.tell(trial, state=optuna().trial.TrialState.PRUNED))
            return None
        if key in view.recorded:
            self._told(trial, lambda: _tell_repeat(self.study, trial, view.recorded[key]))
            return None
        refused = _Refusal("being measured by another trial") if key in view.running or any(
            self.space.key(c) == key for _, c in batch) else self._claim(trial, key)
        if refused:
            # held by another worker (or twice in this batch), or past the run's budget: not measured
            _attrs(trial, "result", status="repeat", reason=refused.reason)
            self._told(trial, lambda: self.study.tell(trial, state=optuna().trial.TrialState.PRUNED))
            return _TAKEN if refused.budget else None
        return trial, cfg

    def _claim(self, trial, key: str) -> _Refusal | None:
        """Why this trial may not measure ``key`` now (None when it may), from a fresh read of the
        study (``view`` is a snapshot from the start of the batch). This trial's candidate
        attribute is written before the read, so of two workers that ask at once, the later
        reader sees the earlier one:
        - another trial holds or recorded ``key``: at most one of them measures it (both may step
          back; the configuration then stays unrecorded and is proposed again);
        - the run's budget: only the first ``budget`` trials of the run by number measure (a
          lower-numbered trial not yet described counts as taking a slot), so workers that fill
          their batches at the same moment never evaluate more than the budget together."""
        TS = optuna().trial.TrialState
        trials = retrying(lambda: self.study.get_trials(deepcopy=False, states=(TS.RUNNING, TS.COMPLETE, TS.PRUNED)),
                          "reading the trials")
        ahead = 0
        for t in trials:
            cand = t.user_attrs.get("candidate")
            if t.number == trial.number or (cand is None and t.state != TS.RUNNING):
                continue
            if (t.user_attrs.get("result") or {}).get("status") in ("invalid", "repeat"):
                continue
            if cand is not None and cand.get("key") == key:
                return _Refusal("being measured by another trial")
            if t.number < trial.number and (cand is None or cand.get("run") == self.job.run):
                ahead += 1
        if self.job.budget is not None and ahead >= self.job.budget:
            return _Refusal(f"the budget of {self.job.budget} evaluations is taken by other trials of this run",
                            budget=True)
        return None

    def _queue_busy(self) -> bool:
        TS = optuna().trial.TrialState
        return bool(retrying(lambda: self.study.get_trials(deepcopy=False, states=(TS.WAITING,)), "reading the queue"))

    def _told(self, trial, tell: Callable[[], object]) -> None:
        retrying(tell, f"telling trial {trial.number}")
        self.held.pop(trial.number, None)
        if self.heart:
            self.heart.release(trial._trial_id)

    def _stop_reason(self, view: _View, todo: list) -> str:
        j = self.job
        if j.budget is not None and view.used >= j.budget:
            return f"budget of {j.budget} evaluations used"
        if j.seconds is not None and time.monotonic() - self.t0 >= j.seconds:
            return f"time limit of {j.seconds:g} s reached"
        if j.target is not None and view.best_ms and self.flop / (view.best_ms * 1e-3) / 1e12 >= j.target:
            return f"a candidate reached the target of {j.target:.4g} TFLOP/s"
        if j.strategy == "exhaustive" and not todo and not view.queued:
            return "every candidate of the pruned space is recorded"
        if self.all_keys <= set(view.recorded):
            return "every candidate of the pruned space is recorded"
        return ""

    def _todo(self, view: _View) -> list[dict]:
        """Exhaustive: this worker's candidates with no record, none in hand elsewhere, not given up."""
        if self.job.strategy != "exhaustive":
            return []
        return [c for c in self.mine if (k := self.space.key(c)) not in view.recorded and k not in view.running
                and k not in view.queued and view.attempts.get(k, 0) < MAX_ATTEMPTS]

    def _batch(self, view: _View) -> tuple[list, str]:
        todo = self._todo(view)
        stop = self._stop_reason(view, todo)
        if stop:
            return [], stop
        room = self.job.batch if self.job.budget is None else min(self.job.batch, self.job.budget - view.used)
        batch, taken = [], False
        while len(batch) < room and self.misses < MAX_MISSES:
            if self.job.strategy == "exhaustive" and not todo and not self._queue_busy():
                break
            got = self._ask(view, batch, todo)
            if got is None or got is _TAKEN:
                self.misses += 1
            else:
                batch.append(got)
                self.misses = 0
            if got is _TAKEN:
                # the run's budget is taken (by another worker, after ``view`` was read): a later
                # proposal would be numbered later still and refused too, so look at the study
                # again. Proposing on from the old view took a worker of the two-worker, budget-7
                # run in tests/test_tune.py 2,000 refused proposals (MAX_MISSES), each reading
                # every trial: 50-110 s where the run takes 2 s.
                taken = True
                break
        if not batch and not taken:
            return [], ("the strategy proposed only refused or recorded configurations "
                        f"{MAX_MISSES} times in a row" if self.misses >= MAX_MISSES else "nothing left to evaluate")
        return batch, ""

    # -- evaluating
    def _evaluate(self, batch: list, best_ms: float | None) -> float | None:
        try:
            failures = self.ev.compile([c for _, c in batch])
        except Exception as exc:  # noqa: BLE001 - the whole batch is recorded, the search goes on
            failures = [Outcome("error", reason=f"{type(exc).__name__}: {_line(exc)}")] * len(batch)
        for (trial, cfg), fail in zip(batch, failures):
            outcome = fail or self._measure(cfg, best_ms)
            value = _tell(self.study, trial, outcome, self.flop)
            self._told(trial, lambda: None)
            if outcome.status == "ok" and outcome.ms and (best_ms is None or outcome.ms < best_ms):
                best_ms = outcome.ms
                self.stats.best = {"config": cfg, "ms": outcome.ms, "tflops": value, "number": trial.number}
            self.stats.evaluated += 1
            self.stats.counts[outcome.status] = self.stats.counts.get(outcome.status, 0) + 1
            if self.on_result:
                self.on_result({"config": cfg, **outcome.as_dict(), "tflops": value, "number": trial.number},
                               self.stats)
        return best_ms

    def _measure(self, cfg: dict, best_ms: float | None) -> Outcome:
        cutoff = SLOW_FACTOR * best_ms if best_ms else None
        try:
            out = self.ev.measure(cfg, cutoff)
        except Exception as exc:  # noqa: BLE001
            return Outcome("error", reason=f"{type(exc).__name__}: {_line(exc)}")
        if out.status == "ok" and cutoff is not None and out.ms is not None and out.ms > cutoff:
            out.status = "slow"
            out.reason = (f"{out.ms:.4g} ms is more than {SLOW_FACTOR:g}x the best so far ({best_ms:.4g} ms): "
                          "stopped at " + ("a short estimate" if out.detail.get("estimate") else "its timing"))
        return out

    def run(self) -> Stats:
        record_peers(self.study, self.job.run, self.ev.device, self.ev.peers())
        try:
            while True:
                view = _view(self.study, self.job.run)
                batch, stop = self._batch(view)
                if stop:
                    self.stats.stopped = stop
                    break
                if batch:
                    self._evaluate(batch, view.best_ms)
        finally:
            self._release_held()
        return self.stats

    def _release_held(self) -> None:
        """Fail what is still in hand (Ctrl-C, an error): it is queued again at the next start."""
        TS = optuna().trial.TrialState
        for trial in list(self.held.values()):
            try:
                trial.set_user_attr("result", {"status": "interrupted", "reason": "stopped before its result"})
                self.study.tell(trial, state=TS.FAIL, skip_if_finished=True)
            except Exception:  # noqa: BLE001 - left RUNNING: failed by its stale heartbeat instead
                pass
        self.held.clear()
        if self.heart:
            self.heart.stop()


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def search(study, storage, space: Space, evaluator: Evaluator, job: Job,
           on_result: Callable[[dict, Stats], None] | None = None) -> Stats:
    """Run one worker's search on ``study`` (see the module docstring); returns its statistics."""
    return _Worker(study, storage, space, evaluator, job, on_result).run()
