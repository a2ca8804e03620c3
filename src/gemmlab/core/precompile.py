"""Ahead-of-time compilation: build rung variants into the disk cache in parallel, so that nothing
compiles in the middle of a run (``gemmlab.precompile``, ``gemmlab compile``).

A launch picks its variant at run time from the operands: the A/B layouts the kernel sees and
whether 16-byte vector access is legal for A, B and C (pointer and leading-dimension alignment).
So a rung and dtype have 4 layouts x 8 vector combinations = 32 variants per tile configuration;
``precompile`` builds all of them unless told fewer, each in a worker process (NVRTC only, no GPU
needed when ``arch`` is given). The disk cache is safe across processes (see ``core.compile``).
"""

from __future__ import annotations

import itertools
from dataclasses import replace
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Mapping

from . import compile as _compile, decode
from .arch import normalize_arch
from .config import ConfigLike
from .dtypes import get as get_dtype
from .precision import applies
from .progress import Progress
from .registry import RUNGS, Rung, get, workspace_split
from .rules import fp8_rule_tiles
from .packing import KERNEL, KERNEL_T, compile_pack, kernel_layout
from .epilogue import PLAIN, Epilogue
from .variant import FP8_DEFAULT_OUT, Variant, compile_reduce

LAYOUTS = ("rr", "rc", "cr", "cc")  # A then B: r row-major, c column-major (as the kernel sees them)
VECTOR_FLAGS = tuple(itertools.product((False, True), repeat=3))  # (vec_a, vec_b, vec_c)


def _as_list(x) -> list:
    if isinstance(x, str):
        return [p for p in (s.strip() for s in x.split(",")) if p]
    if isinstance(x, (int, Rung)):
        return [x]
    return list(x)


def parse_layouts(layouts) -> list[tuple[bool, bool]]:
    """``None`` (all four), ``"rr,cc"``, ``["rr", "rc"]`` or ``[(a_col, b_col), ...]`` ->
    [(a_col, b_col), ...] in the given order, duplicates dropped."""
    if layouts is None:
        layouts = LAYOUTS
    out: list[tuple[bool, bool]] = []
    for lay in _as_list(layouts):
        if isinstance(lay, str):
            key = lay.strip().lower()
            if len(key) != 2 or any(ch not in "rc" for ch in key):
                raise ValueError(f"bad layout {lay!r}: two letters, A's then B's, each r (row-major) or c "
                                 f"(column-major): one of {', '.join(LAYOUTS)}")
            pair = (key[0] == "c", key[1] == "c")
        elif isinstance(lay, tuple) and len(lay) == 2 and all(isinstance(v, bool) for v in lay):
            pair = lay
        else:
            raise ValueError(f"bad layout {lay!r}: give a string such as 'rc' or a tuple (a_col, b_col) of bools")
        if pair not in out:
            out.append(pair)
    if not out:
        raise ValueError("no layouts given")
    return out


def _rungs(kernels) -> tuple[list[Rung], bool]:
    if kernels is None:
        return list(RUNGS), False
    out: list[Rung] = []
    for k in _as_list(kernels):
        r = get(str(k) if isinstance(k, int) else k)
        if r not in out:
            out.append(r)
    if not out:
        raise ValueError("no kernels given")
    return out, True


def _config_for(rung: Rung, configs) -> ConfigLike:
    """``configs``: None (each rung's defaults), one configuration for every rung, or a mapping
    from rung slug to its configuration."""
    if isinstance(configs, Mapping) and configs and all(isinstance(k, str) and k in {r.slug for r in RUNGS}
                                                        for k in configs):
        return configs.get(rung.slug)
    return configs


def default_arch() -> str:
    """The architecture of GPU 0; ValueError asking for ``arch=`` when there is no usable GPU."""
    from .driver import device_info, gpu_available

    if not gpu_available():
        raise ValueError("no usable GPU to take the architecture from: pass arch= (e.g. arch=\"sm_90a\"; "
                         "`gemmlab compile --arch sm_90a`)")
    return device_info(0).arch


def variants(kernels=None, dtypes=None, layouts=None, arch: str | None = None, *,
             configs=None) -> list[Variant]:
    """The variants ``precompile`` builds (same arguments); ValueError on a bad argument."""
    rungs, named = _rungs(kernels)
    want = None if dtypes is None else [get_dtype(d).name for d in _as_list(dtypes)]
    if want is not None and not want:
        raise ValueError("no dtypes given")
    pairs = parse_layouts(layouts)
    out: list[Variant] = []
    for r in rungs:
        if arch is not None and named:
            r.require(arch=arch)
        elif arch is not None:
            try:
                r.require(arch=arch)
            except ValueError:
                continue  # every rung by default: the ones this architecture cannot run are left out
        dts = [d for d in r.dtypes if want is None or d in want]
        if not dts:
            if named:
                raise ValueError(f"kernel {r.slug!r} does not support dtype {', '.join(want)}; it supports "
                                 f"{', '.join(r.dtypes)}")
            continue
        cfg = _config_for(r, configs)
        for dt in dts:
            # every precision the rung computes the dtype in (rung 20: TF32 and 3xTF32)
            for prec in (p for p in r.precisions if applies(p, dt)):
                for (a_col, b_col), (va, vb, vc) in itertools.product(pairs, VECTOR_FLAGS):
                    c_col = False
                    if r.k_major:   # rung 22: the layouts its plans run, after their copies and transposition
                        a_col, b_col, c_col = kernel_layout(a_col, b_col, True, r.reads_register_a(prec))
                        va = vb = True
                    for epi, tile in ((e, t) for e in _epilogues(dt, prec) for t in _tiles(r, prec, e, cfg)):
                        v = Variant.make(r, dt, a_col=a_col, b_col=b_col, vec_a=va, vec_b=vb, vec_c=vc,
                                         config=tile, precision=prec, c_col=c_col, epilogue=epi)
                        # and its store twin, which a plan with rows of whole 16-byte chunks also loads
                        for w in (v, v.store_twin(get_dtype(dt).vector_elements)):
                            if w is not None and w not in out:
                                out.append(w)
    if not out:
        raise ValueError("nothing to compile: no rung takes the dtypes given on this architecture")
    return out


def _epilogues(dtype: str, precision: str) -> tuple:
    """The epilogues precompile builds for a dtype: the plain one, and for FP8 each scaling
    ``gemmlab.scaled_mm`` plans with (block scales only promoted), writing bf16, its default."""
    if dtype != "fp8":
        return (PLAIN,)
    scales = ("tensor", "row") + (("block",) if precision == "fp8" else ())
    return (PLAIN,) + tuple(Epilogue(out=FP8_DEFAULT_OUT, scale=s) for s in scales)


def _tiles(rung: Rung, precision: str | None, epi: Epilogue, cfg: ConfigLike) -> tuple:
    """The configurations precompile builds for one epilogue: ``cfg`` (None: the defaults), and with
    the defaults every one rung 25's or rung 28's rule can choose for a scaled plan (core/rules.py,
    ``fp8_rule_tiles``; core/decode.py, ``fp8_rule_tiles``)."""
    if cfg is None and rung.slug == "wgmma_fp8" and epi.scale is not None:
        return fp8_rule_tiles(rung, precision, epi.scale == "block")
    if cfg is None and rung.slug == "decode_fp8" and epi.scale is not None:
        return tuple(decode.fp8_rule_tiles())
    return (cfg,)


def job_key(v: Variant) -> tuple:
    """A variant as plain data a worker process can unpickle (a Rung holds lambdas)."""
    return (v.rung.slug, v.dtype, v.a_col, v.b_col, v.vec_a, v.vec_b, v.vec_c, v.config, v.tall, v.precision, v.c_col,
            v.epilogue, v.tma_store_only)


def _build(job: tuple, arch: str) -> tuple[bool, str | None]:
    """(served from the disk cache, error message or None): one variant, in a worker process."""
    _compile.clear_memory_cache()  # a forked worker inherits the parent's memory: ask the disk
    try:
        slug, dtype, a_col, b_col, va, vb, vc, cfg, tall, precision, c_col, epi, twin = job
        variant = Variant.make(slug, dtype, a_col=a_col, b_col=b_col, vec_a=va, vec_b=vb, vec_c=vc, config=dict(cfg),
                               tall=tall, precision=precision, c_col=c_col, epilogue=epi)
        if twin:
            variant = replace(variant, tma_store_only=True)
        hit = variant.compile(arch).cache_hit
        helpers_for(variant, arch)
        return hit, None
    except Exception as exc:  # noqa: BLE001 - reported per variant, the others go on
        return False, f"{type(exc).__name__}: {exc}"


def helpers_for(variant: Variant, arch: str, before_compile=None) -> None:
    """The other kernels a variant's launch may need: a split-K variant's reduction, and the pack
    kernel of the dtype for every variant of a rung with PACK (``auto`` turns packing on for
    misaligned operands, so a graph captured after a precompile must find it built)."""
    if workspace_split(variant.cfg):
        compile_reduce(variant.dtype, arch, before_compile)
    if variant.cfg.get("STREAMK"):   # a problem without a partial last wave runs the STREAMK=0 kernel
        variant.with_config(STREAMK=0).compile(arch, before_compile)
    if "PACK" in variant.cfg:
        compile_pack(variant.dtype, arch, before_compile)
    if variant.rung.k_major:   # its plans always copy (and transpose) MN-major operands
        compile_pack(variant.dtype, arch, before_compile, KERNEL_T)
    if variant.rung.planes_for(variant.precision) > 1:   # its plans split both operands (rung 22, 3xtf32)
        compile_pack(variant.dtype, arch, before_compile, KERNEL, split=True)
        compile_pack(variant.dtype, arch, before_compile, KERNEL_T, split=True)


def _context(method: str | None = None):
    # fork when the platform has it: a worker only runs NVRTC (never the CUDA driver), and fork
    # does not re-import the caller's __main__ the way spawn does. The tuner asks for forkserver:
    # its process holds a CUDA context and threads (clocks, heartbeats) that a fork would copy.
    methods = multiprocessing.get_all_start_methods()
    if method is not None and method in methods:
        return multiprocessing.get_context(method)
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


class CompilePool:
    """Worker processes that compile variants into the disk cache (``precompile``, and the tuner
    between its batches: one pool kept for the whole run). ``processes=1`` compiles in this process.

    ``build(variants, arch, done)`` compiles each and calls ``done(variant, hit, error)`` in this
    process as each finishes (``hit``: served from the disk cache; ``error``: "Type: message" or None)."""

    def __init__(self, processes: int | None = None, start_method: str | None = None):
        if processes is not None and processes < 1:
            raise ValueError(f"processes must be at least 1, got {processes}")
        self.processes = processes or os.cpu_count() or 1
        self._start_method = start_method
        self._ex: ProcessPoolExecutor | None = None

    def build(self, todo: list[Variant], arch: str,
              done: Callable[[Variant, bool, str | None], None]) -> None:
        if self.processes == 1 or (len(todo) == 1 and self._ex is None):  # no pool for one job
            for v in todo:
                done(v, *_build_here(v, arch))
            return
        if self._ex is None:
            self._ex = ProcessPoolExecutor(self.processes, mp_context=_context(self._start_method))
        futs = {self._ex.submit(_build, job_key(v), arch): v for v in todo}
        for f in as_completed(futs):
            done(futs[f], *f.result())

    def close(self) -> None:
        if self._ex is not None:
            self._ex.shutdown(cancel_futures=True)
            self._ex = None

    def __enter__(self) -> "CompilePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def precompile(kernels=None, dtypes=None, layouts=None, arch: str | None = None, *, configs=None,
               processes: int | None = None, progress: bool = False,
               on_done: Callable[[Variant, str], None] | None = None) -> dict:
    """Compile rung variants into the disk cache ahead of time, in parallel worker processes.

    kernels: rung slugs or numbers (default every rung); dtypes: default every dtype each rung
    takes (a dtype a named rung lacks is an error); layouts: A/B storage as ``"rr"``, ``"rc"``,
    ``"cr"``, ``"cc"`` or (a_col, b_col) tuples (default all four), each in every precision the rung provides
    for the dtype; arch: e.g. ``"sm_90a"``
    (default: GPU 0's); configs: one tile configuration for every rung, or {slug: config} (default
    each rung's own). Every combination of the vector flags is built, since operand alignment
    picks them at run time. processes: worker count (default the CPU count; 1 compiles in this
    process). progress: a progress bar on stderr. on_done(variant, status) is called in this
    process as each variant finishes, status "compiled", "cached" or "error".

    Returns {"arch", "variants", "compiled", "cached", "seconds", "errors": [{"variant", "error"}]}.
    """
    arch = normalize_arch(arch) if arch is not None else default_arch()
    _compile.check_arch(arch)
    if _compile.cache_dir() is None:
        raise ValueError("the disk cache is off (GEMMLAB_CACHE_DIR=off): precompile would keep nothing")
    todo = variants(kernels, dtypes, layouts, arch, configs=configs)
    if processes is not None and processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    bar = Progress(len(todo), enabled=progress, label=f"compile {arch}")
    counts = {"compiled": 0, "cached": 0}
    errors: list[dict] = []

    def done(v: Variant, hit: bool, err: str | None) -> None:
        status = "error" if err else ("cached" if hit else "compiled")
        if err:
            errors.append({"variant": v.describe(), "error": err})
        else:
            counts[status] += 1
        bar.update(v.describe(), advance=1)
        if on_done is not None:
            on_done(v, status)

    t0 = time.perf_counter()
    try:
        with CompilePool(min(processes or os.cpu_count() or 1, len(todo))) as pool:
            pool.build(todo, arch, done)
    finally:
        bar.stop()
    return {"arch": arch, "variants": len(todo), "compiled": counts["compiled"], "cached": counts["cached"],
            "seconds": round(time.perf_counter() - t0, 3), "errors": errors}


def _build_here(variant: Variant, arch: str) -> tuple[bool, str | None]:
    """One variant in this process; the memory cache keeps it, so report the disk's answer."""
    compiled = []
    try:
        variant.compile(arch, before_compile=lambda: compiled.append(True))
        helpers_for(variant, arch, lambda: compiled.append(True))
    except Exception as exc:  # noqa: BLE001
        return False, f"{type(exc).__name__}: {exc}"
    return not compiled, None
