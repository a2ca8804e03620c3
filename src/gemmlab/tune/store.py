"""The tuning database: Optuna's RDB storage, one study per key.

Where: ``sqlite:///<cache dir>/tune.db`` by default (the cubin cache's folder, ``core.compile.
cache_dir``: ``GEMMLAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/gemmlab`` or ``~/.cache/gemmlab``), or any
SQLAlchemy URL Optuna supports (``--storage postgresql://user@host/db`` shares a study between
hosts; it needs that database's driver, e.g. psycopg2-binary).

The key: GPU name, architecture, driver, NVRTC and gemmlab versions, rung, dtype, layout class and
shape (``study_key``); its text is the study's name and its fields are the study's user attributes,
so ``--show`` and the report find studies by any of them.

Safety: every write is an Optuna storage transaction; SQLite waits up to ``SQLITE_TIMEOUT_S`` for a
lock (several worker processes share one file), and the few calls that can still meet a busy
database are retried (``retrying``). A worker records a heartbeat for each trial it holds
(``Heartbeat``); a trial left RUNNING by a crashed worker is failed once its heartbeat is older than
the grace period (``fail_stale``) and its configuration is tried again (``tune.search``).

What a trial holds: the searched parameters as value indices (``tune.space``), the value TFLOP/s
(the study maximizes it) for measured candidates, and two user attributes (each write is a
transaction): ``candidate`` {config (the full configuration), key (its text), run (the run's id),
device} when asked, and ``result`` {status and reason (``tune.evaluate.STATUSES``), ms, detail} when
told. Each run stores the peers' times on each device
as the study attribute ``peers <run> <device>``.
"""

from __future__ import annotations

import math

import threading
import time
import warnings
from collections import Counter
from typing import Callable, Mapping, Sequence, TypeVar

from ..core.compile import cache_dir
from ..core.deps import require

KEY_FIELDS = ("gpu_name", "arch", "driver", "nvrtc", "gemmlab", "rung", "dtype", "layout", "shape")
SQLITE_TIMEOUT_S = 60
HEARTBEAT_S = 10            # a worker beats this often for each trial it holds
GRACE_S = 120               # a RUNNING trial without a beat for this long belongs to a dead worker
RETRIES = 5
MEMORY = ":memory:"         # a storage URL of its own: Optuna's in-memory storage (replays; nothing kept)
T = TypeVar("T")


def optuna():
    """Optuna, quiet (its INFO line per trial would bury the progress bar); MissingDependencyError
    naming ``gemmlab[tune]`` when it is not installed."""
    mod = require("optuna")
    mod.logging.set_verbosity(mod.logging.WARNING)
    return mod


def default_url() -> str:
    d = cache_dir()
    if d is None:
        raise ValueError("the cache folder is off (GEMMLAB_CACHE_DIR=off): name a tuning database with "
                         "--storage URL (e.g. sqlite:///tune.db)")
    d.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{d / 'tune.db'}"


def open_storage(url: str | None = None, heartbeat_s: int = HEARTBEAT_S, grace_s: int = GRACE_S):
    """Optuna's RDBStorage at ``url`` (default ``default_url()``), heartbeats on; ``MEMORY``:
    an in-memory storage of this process (the strategy experiment's replays)."""
    opt = optuna()
    url = url or default_url()
    if url == MEMORY:
        return opt.storages.InMemoryStorage()
    # SQLite: wait for a lock instead of failing at once; a server: drop dead pooled connections
    kw = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", opt.exceptions.ExperimentalWarning)
        storage = opt.storages.RDBStorage(url, engine_kwargs=kw, heartbeat_interval=heartbeat_s, grace_period=grace_s)
    if url.startswith("sqlite"):
        _sqlite_wal(storage.engine)
    return storage


def _sqlite_wal(engine) -> None:
    """SQLite for several processes.

    Transactions: Python's sqlite3 starts a transaction only at the first write, so a read-then-
    write (Optuna's "pop a WAITING trial, mark it RUNNING") reads outside any transaction and two
    workers could both take one trial (seen with two workers). Every transaction here begins with
    BEGIN IMMEDIATE instead (SQLAlchemy's recipe for pysqlite): it takes the write lock first, so
    transactions are serialized and the other process waits (``SQLITE_TIMEOUT_S``).

    Write-ahead logging, synced at checkpoints: a commit no longer waits for an fsync (milliseconds each on
    a plain disk: a tuning run makes thousands), and a crashed process still leaves every committed
    transaction; only a power loss may lose the last commits."""
    from sqlalchemy import event

    def on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None      # the driver opens no transaction of its own
        cur = dbapi_connection.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    def on_begin(conn) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    event.listen(engine, "connect", on_connect)
    event.listen(engine, "begin", on_begin)
    engine.dispose()   # the connections made while creating the tables reconnect with the pragmas


def retrying(fn: Callable[[], T], what: str) -> T:
    """``fn()``, tried again (with a growing pause) when the database is busy or the connection
    dropped; the last failure is raised as a RuntimeError naming ``what``."""
    opt = optuna()
    sa = require("sqlalchemy.exc")
    for attempt in range(RETRIES):
        try:
            return fn()
        except (opt.exceptions.StorageInternalError, sa.OperationalError) as exc:
            if attempt == RETRIES - 1:
                raise RuntimeError(f"tuning database: {what} failed {RETRIES} times: {exc}") from exc
            time.sleep(0.2 * 2 ** attempt)
    raise AssertionError("unreachable")


# ---- the key -----------------------------------------------------------------------------------
def study_key(machine: Mapping, rung: str, dtype: str, layout: str, shape: Sequence[int]) -> dict:
    key = {k: str(machine.get(k)) for k in KEY_FIELDS[:5]}
    key.update(rung=rung, dtype=dtype, layout=layout, shape="x".join(map(str, shape)))
    return key


def key_flop(key: Mapping) -> float:
    """The floating-point operations of a study's shape: M x N x K, or the grouped rung's G x T x N x
    K, whose products are T x N x K."""
    return 2.0 * math.prod(int(x) for x in str(key.get("shape", "0x0x0")).split("x")[-3:])


def study_name(key: Mapping) -> str:
    return " | ".join(f"{k}={key[k]}" for k in KEY_FIELDS)


def open_study(storage, key: Mapping, sampler=None, space_params: Mapping | None = None):
    """The study of ``key`` (created on first use; several processes may race to create it)."""
    opt = optuna()

    def make():
        return opt.create_study(storage=storage, study_name=study_name(key), sampler=sampler,
                                direction="maximize", load_if_exists=True)

    try:
        study = retrying(make, "opening the study")
    except opt.exceptions.DuplicatedStudyError:   # created by another worker between check and insert
        study = retrying(make, "opening the study")
    attrs = study.user_attrs
    if "key" not in attrs:
        for k, v in key.items():
            study.set_user_attr(k, v)
        study.set_user_attr("key", dict(key))
    # the value lists the trials' indices refer to (Space.aligned keeps them; a run that widened
    # the space appended values)
    space = None if space_params is None else {k: [int(x) for x in v] for k, v in space_params.items()}
    if space is not None and attrs.get("space") != space:
        study.set_user_attr("space", space)
    return study


def recorded_space(storage, key: Mapping) -> dict | None:
    """The value lists the study of ``key`` recorded (None: no such study yet)."""
    opt = optuna()
    name = study_name(key)
    if name not in retrying(lambda: opt.get_all_study_names(storage), "listing the studies"):
        return None
    return retrying(lambda: opt.load_study(study_name=name, storage=storage), "opening the study").user_attrs.get("space")


def find_studies(storage, **match) -> list[str]:
    """Names of the studies whose key fields equal every given value (None: any)."""
    opt = optuna()
    out = []
    for s in opt.get_all_study_summaries(storage, include_best_trial=False):
        key = s.user_attrs.get("key") or {}
        if key and all(v is None or str(key.get(k)) == str(v) for k, v in match.items()):
            out.append(s.study_name)
    return out


# ---- heartbeats ----------------------------------------------------------------------------------
class Heartbeat:
    """Records a heartbeat for every trial this worker holds, every ``interval`` seconds, on a
    background thread (the evaluation may hold the main thread for minutes)."""

    def __init__(self, storage, interval: float = HEARTBEAT_S):
        self.storage = storage
        self.interval = interval
        self._held: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="gemmlab-tune-heartbeat", daemon=True)
        self._thread.start()

    def _record(self, trial_id: int) -> None:
        try:
            self.storage.record_heartbeat(trial_id)
        except Exception:  # noqa: BLE001 - a missed beat is retried next interval
            pass

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                held = list(self._held)
            for tid in held:
                self._record(tid)

    def hold(self, trial_id: int) -> None:
        self._record(trial_id)   # at once: a trial with no beat at all is never found stale
        with self._lock:
            self._held.add(trial_id)

    def release(self, trial_id: int) -> None:
        with self._lock:
            self._held.discard(trial_id)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def fail_stale(study) -> None:
    """Fail the RUNNING trials whose worker stopped beating (crashed)."""
    opt = optuna()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", opt.exceptions.ExperimentalWarning)
        opt.storages.fail_stale_trials(study)


# ---- reading results ---------------------------------------------------------------------------
def peers_of(study) -> dict[tuple[str, str], dict]:
    """{(run, device): {peer: ms}} of every run on this study."""
    out = {}
    for k, v in study.user_attrs.items():
        if k.startswith("peers "):
            _, run, device = k.split(" ", 2)
            out[(run, device)] = dict(v)
    return out


def record_peers(study, run: str, device: str, peers: Mapping[str, float]) -> None:
    retrying(lambda: study.set_user_attr(f"peers {run} {device}", dict(peers)), "storing the peers' times")


def _ratios(rec: dict, peers: Mapping[tuple[str, str], dict], flop: float) -> None:
    """vs_cublas and vs_best_peer of a measured record, from the peers timed in its own run on
    its own device (the same engine, the same operands)."""
    mine = peers.get((rec["run"], rec["device"])) or {}
    if rec.get("ms") and mine:
        if mine.get("cublas"):
            rec["vs_cublas"] = mine["cublas"] / rec["ms"]
        best = min(mine.items(), key=lambda kv: kv[1])
        rec["vs_best_peer"], rec["best_peer"] = best[1] / rec["ms"], best[0]
        rec["peer_tflops"] = {n: flop / (ms * 1e-3) / 1e12 for n, ms in mine.items()}


def records(study, include_invalid: bool = False) -> list[dict]:
    """One record per candidate evaluated (repeats of a measured configuration left out; the
    constraint-refused ones only when asked), best TFLOP/s first, failures last."""
    opt = optuna()
    TS = opt.trial.TrialState
    key = study.user_attrs.get("key") or {}
    flop = key_flop(key)
    peers = peers_of(study)
    out = []
    for t in study.get_trials(deepcopy=False, states=(TS.COMPLETE, TS.PRUNED, TS.FAIL)):
        cand, res = t.user_attrs.get("candidate") or {}, t.user_attrs.get("result") or {}
        status = res.get("status") or ("crashed" if t.state == TS.FAIL else "unknown")
        if status == "repeat" or (status == "invalid" and not include_invalid) or "config" not in cand:
            continue
        rec = {"number": t.number, "config": dict(cand["config"]), "key": cand.get("key"), "status": status,
               "reason": res.get("reason", ""), "ms": res.get("ms"),
               "tflops": t.value if t.state == TS.COMPLETE else None, "device": cand.get("device", ""),
               "run": cand.get("run", ""), "detail": res.get("detail") or {}}
        _ratios(rec, peers, flop)
        out.append(rec)
    # a crashed or interrupted evaluation measured again later is shown once, by its result
    done = {r["key"] for r in out if r["status"] not in ("crashed", "interrupted")}
    out = [r for r in out if r["status"] not in ("crashed", "interrupted") or r["key"] not in done]
    order = {"ok": 0, "slow": 1}
    out.sort(key=lambda r: (order.get(r["status"], 2), -(r["tflops"] or 0), r["number"]))
    return out


def study_document(study) -> dict:
    """A study as plain data: its key, the searched values, every record, the peers and counts
    (what ``--show``, ``--json`` and the report read)."""
    recs = records(study)
    counts = Counter(r["status"] for r in recs)
    invalid = sum(1 for t in study.get_trials(deepcopy=False)
                  if (t.user_attrs.get("result") or {}).get("status") == "invalid")
    if invalid:
        counts["invalid"] = invalid
    return {"study": study.study_name, "key": study.user_attrs.get("key") or {},
            "space": study.user_attrs.get("space") or {}, "records": recs,
            "peers": {f"{run} {dev}": p for (run, dev), p in peers_of(study).items()}, "counts": dict(counts)}


def documents(storage_url: str | None = None, **match) -> list[dict]:
    """``study_document`` of every study matching ``match`` (see ``find_studies``)."""
    opt = optuna()
    storage = open_storage(storage_url)
    return [study_document(opt.load_study(study_name=name, storage=storage))
            for name in find_studies(storage, **match)]
