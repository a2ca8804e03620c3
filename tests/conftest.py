"""Shared test set-up: GPU tests are marked ``gpu`` and skipped, with the reason shown, when this
machine has no NVIDIA GPU; the kernel cache goes to a temporary folder of the run, shared by its
pytest-xdist workers, unless GEMMLAB_CACHE_DIR is set."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

_RUN_CACHE = pytest.StashKey[str]()
_RUN_DIR = pytest.StashKey[str]()


def _gpu_reason() -> str | None:
    try:
        from gemmlab.core.driver import gpu_available
    except ImportError as exc:  # pragma: no cover
        return f"gemmlab's CUDA bindings are not importable ({exc})"
    if not gpu_available():
        return "no NVIDIA GPU/driver on this machine: GPU tests skipped (run tools/gpu_suite.sh on a GPU machine)"
    return None


@pytest.hookimpl(optionalhook=True)   # without pytest-xdist (tools/gpu_suite.sh then drops pyproject's -n)
def pytest_xdist_auto_num_workers(config):
    # pyproject's -n auto: no workers where there is a GPU. Its tests time kernels, which another
    # worker's launches would slow (tools/gpu_suite.sh's pytest-par names a count, and runs the
    # timing tests alone after); without one, xdist's own count, a worker per CPU.
    return 0 if _gpu_reason() is None else None


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if i.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = _gpu_reason()
    if reason:
        skip = pytest.mark.skip(reason=reason)
        for item in gpu_items:
            item.add_marker(skip)


def pytest_configure(config):
    # One kernel cache for the run, made before pytest-xdist starts its workers, which inherit the
    # environment: a kernel one worker compiled is read by the others (the cache's writes are
    # atomic, see gemmlab.core.compile). A worker finds it set. Likewise a folder of the run's own
    # (``_once_per_run``).
    if "GEMMLAB_CACHE_DIR" not in os.environ:
        config.stash[_RUN_CACHE] = os.environ["GEMMLAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="gemmlab-cache-")
    if "GEMMLAB_TEST_RUN_DIR" not in os.environ:
        config.stash[_RUN_DIR] = os.environ["GEMMLAB_TEST_RUN_DIR"] = tempfile.mkdtemp(prefix="gemmlab-test-run-")


def pytest_unconfigure(config):
    for key, name in ((_RUN_CACHE, "GEMMLAB_CACHE_DIR"), (_RUN_DIR, "GEMMLAB_TEST_RUN_DIR")):
        path = config.stash.get(key, None)
        if path is not None:
            del os.environ[name]
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _once_per_run(name: str):
    """Yields True to the first process of the run (of its xdist workers) to get here, which does
    the work while the others wait; False to them once it is done."""
    import fcntl

    folder = Path(os.environ["GEMMLAB_TEST_RUN_DIR"])
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = folder / f"{name}.done"
        first = not done.exists()
        yield first
        done.touch()


@pytest.fixture(scope="module")
def compile_ahead(request):
    """``compile_ahead({arch: [Variant, ...]}, min_selected)``: compile a module's variants up
    front, one NVRTC process per CPU, into the disk cache its tests then read (they check the same
    things; on several cores it takes a fraction of compiling them one after another). Once per
    run: the xdist workers that run the module's tests share them out, and the first of them to
    get here compiles while the others wait. Skipped when fewer than ``min_selected`` of the
    module's tests are selected (a ``-k`` run)."""
    def run(by_arch: dict, min_selected: int) -> None:
        selected = sum(1 for item in request.session.items if item.module is request.module)
        if selected < min_selected:
            return
        from gemmlab.core.precompile import CompilePool

        with _once_per_run(f"compile-ahead-{request.module.__name__}") as first:
            if first:
                with CompilePool() as pool:
                    for arch, todo in by_arch.items():
                        pool.build(list(todo), arch, lambda v, hit, err: None)   # a failure shows in its test
    return run


@pytest.fixture()
def fresh_cache(tmp_path, monkeypatch):
    """An empty kernel cache (disk and memory) for one test."""
    from gemmlab.core import compile as glc

    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path))
    glc.clear_memory_cache()
    yield tmp_path
    glc.clear_memory_cache()


@pytest.fixture()
def rule_only(tmp_path, monkeypatch):
    """Neither a tuned export nor the shipped tables (defaults, the selection model's measurements):
    the dispatch rule answers (thin rungs' tests)."""
    from gemmlab.core import dispatch, selection

    monkeypatch.setenv("GEMMLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(dispatch, "defaults_path", lambda arch: tmp_path / "no_defaults.json")
    monkeypatch.setattr(selection, "table_path", lambda arch: tmp_path / "no_selection.json.gz")
    dispatch.reload()
    selection.reload()
    yield
    dispatch.reload()
    selection.reload()


@pytest.fixture()
def plan_count(monkeypatch):
    """How many plans gemmlab.gemm builds (the full path builds one; a fast-path hit none),
    counted from an empty fast path."""
    from gemmlab.core import api, fastpath

    built = []

    class Counting(api.Plan):
        def __init__(self, *args, **kwargs):
            built.append(1)
            super().__init__(*args, **kwargs)

    fastpath.forget()
    monkeypatch.setattr(api, "Plan", Counting)
    return built


@pytest.fixture()
def another_context():
    """A context manager making a second context of device 0 current for its block (the default
    stream then resolves in it, and kernels of the primary context are refused there), then
    destroying it."""
    from gemmlab.core.driver import check, cuda

    @contextlib.contextmanager
    def current():
        cu = cuda()
        other = check(cu.cuCtxCreate(None, 0, check(cu.cuDeviceGet(0), "cuDeviceGet")), "cuCtxCreate")
        try:
            yield
        finally:
            check(cu.cuCtxPopCurrent(), "cuCtxPopCurrent")
            check(cu.cuCtxDestroy(other), "cuCtxDestroy")

    return current


@pytest.fixture()
def on_threads():
    """``on_threads(call, threads, calls)``: ``call(stream)`` run ``calls`` times in each of
    ``threads`` threads at once, each thread on a non-blocking CuPy stream of its own (current for
    its calls); returns every call's result, after raising (as an assertion) any thread's exception."""
    def run(call, threads: int, calls: int) -> list:
        import cupy as cp

        errors, results = [], []

        def worker():
            try:
                with cp.cuda.Stream(non_blocking=True) as s:
                    for _ in range(calls):
                        results.append(call(s))
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        workers = [threading.Thread(target=worker) for _ in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        assert not errors, errors
        return results
    return run
