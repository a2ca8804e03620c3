"""Compile layer: CUDA C++ source -> cubin (+ PTX) with NVRTC, cached on disk.

Kernel parameters (tile sizes, layouts, dtype) reach the source as ``-D`` defines; the source text
is never edited. One NVRTC call for a real architecture (``sm_90a``) yields both the cubin we load
and the PTX that ``gemmlab inspect`` shows.

Disk cache
----------
An entry is keyed by the SHA-256 of: the kernel source, every header it may include (all ``.cuh``
of the kernels folder and the generated ``activations.cuh``), the options, the architecture and the NVRTC version. It is one file::

    MAGIC (8 bytes) | sha256(payload) (32 bytes) | payload

so a truncated or corrupted entry fails its checksum and is rebuilt. Entries are written to a
temporary file in the cache folder and moved into place with ``os.replace`` (atomic on POSIX), so a
concurrent process sees either no entry or a whole one. ``GEMMLAB_CACHE_DIR`` moves the cache;
``GEMMLAB_CACHE_DIR=off`` disables it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import activations, toolchain
from .arch import arch_number, normalize_arch

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"
_MAGIC = b"GLCUBIN1"
_memo: dict[str, "CompiledKernel"] = {}       # cache key -> kernel
_by_request: dict[tuple, "CompiledKernel"] = {}  # (source, arch, defines, options) -> kernel: no file I/O
_memo_lock = threading.Lock()


class CompileError(RuntimeError):
    """NVRTC rejected a kernel. Carries the kernel name, the options and NVRTC's log."""

    def __init__(self, kernel: str, options: list[str], log: str):
        self.kernel = kernel
        self.options = list(options)
        self.log = log
        super().__init__(
            f"NVRTC failed to compile kernel {kernel!r}\n  options: {' '.join(options)}\n--- NVRTC log ---\n{log.strip()}"
        )


@dataclass(frozen=True)
class CompiledKernel:
    name: str            # the extern "C" function name
    source: str          # file name inside the kernels folder
    arch: str            # e.g. "sm_90a"
    options: tuple[str, ...]
    cubin: bytes
    ptx: str
    log: str
    key: str             # cache key (hex)
    cache_hit: bool = field(default=False, compare=False)

    @property
    def spill_bytes(self) -> int | None:
        """Bytes ptxas spilled to local memory (stores + loads), from its report in the log."""
        rep = ptxas_report(self.log)
        return None if rep is None else rep["spill_stores"] + rep["spill_loads"]


_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


_PTXAS_SMEM = re.compile(r"Used \d+ registers.*?(\d+) bytes smem")


def ptxas_report(log: str) -> dict | None:
    """Stack frame, spill bytes and static shared memory of the kernel from ptxas's ``-v`` report
    in a compile log (the compile layer always asks for it), or None when the log has none. A
    module of several entry points (rung 18's stream-K tail beside its kernel): the largest stack
    frame and the spills of all of them."""
    frames = [tuple(int(g) for g in m.groups()) for m in _PTXAS_FRAME.finditer(log or "")]
    if not frames:
        return None
    out = {"stack_frame": max(f[0] for f in frames), "spill_stores": sum(f[1] for f in frames),
           "spill_loads": sum(f[2] for f in frames)}
    s = _PTXAS_SMEM.search(log)
    if s:
        out["smem"] = int(s.group(1))
    return out


def cache_dir() -> Path | None:
    env = os.environ.get("GEMMLAB_CACHE_DIR")
    if env is not None and env.strip().lower() in ("off", "0", "none", ""):
        return None
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gemmlab"


def _headers() -> dict[str, str]:
    """The headers a kernel may include: the kernel folder's, and the ones generated from Python
    definitions (activations.cuh: core/activations.py), all part of the cache key."""
    out = {p.name: p.read_text() for p in sorted(KERNEL_DIR.glob("*.cuh"))}
    out[activations.HEADER] = activations.cuda_header()
    return out


def build_options(arch: str, defines: dict[str, object] | None = None, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    # --ptxas-options=-v: ptxas reports registers, stack frame and spill bytes in the log
    # (ptxas_report reads them: inspect, the static guards, and Variant.compile, which refuses spills)
    opts = [f"--gpu-architecture={normalize_arch(arch)}", "-std=c++17", "-lineinfo", "--ptxas-options=-v"]
    for d in toolchain.include_dirs():
        opts.append(f"-I{d}")
    for k, v in sorted((defines or {}).items()):
        opts.append(f"-D{k}={int(v) if isinstance(v, bool) else v}")
    opts.extend(extra)
    return opts


def _key(source_name: str, kernel: str, source: str, headers: dict[str, str], options: list[str], arch: str) -> str:
    h = hashlib.sha256()
    # include dirs are machine paths, not content: leave them out so the key is portable
    portable = [o for o in options if not o.startswith("-I")]
    blob = json.dumps(
        {"src": source_name, "kernel": kernel, "opts": portable, "arch": arch, "nvrtc": toolchain.nvrtc_version()},
        sort_keys=True,
    )
    h.update(blob.encode())
    h.update(source.encode())
    for name in sorted(headers):
        h.update(name.encode())
        h.update(headers[name].encode())
    return h.hexdigest()


def _pack(cubin: bytes, ptx: str, log: str) -> bytes:
    meta = json.dumps({"ptx_len": len(ptx.encode()), "log": log}).encode()
    payload = len(meta).to_bytes(4, "little") + meta + ptx.encode() + cubin
    return _MAGIC + hashlib.sha256(payload).digest() + payload


def _unpack(blob: bytes) -> tuple[bytes, str, str] | None:
    """(cubin, ptx, log), or None when the entry is truncated, corrupt or of another format."""
    if len(blob) < 44 or blob[:8] != _MAGIC:
        return None
    digest, payload = blob[8:40], blob[40:]
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        n = int.from_bytes(payload[:4], "little")
        meta = json.loads(payload[4 : 4 + n])
        rest = payload[4 + n :]
        ptx_len = meta["ptx_len"]
        return rest[ptx_len:], rest[:ptx_len].decode(), meta["log"]
    except (ValueError, KeyError, UnicodeDecodeError):
        return None


def _read_entry(path: Path):
    try:
        return _unpack(path.read_bytes())
    except OSError:
        return None


def _write_entry(path: Path, blob: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".cubin")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass  # a read-only or full cache only costs a recompile next time


def _nvrtc_compile(kernel: str, source_name: str, source: str, headers: dict[str, str], options: list[str]):
    nvrtc = toolchain.nvrtc_module()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    names = [n.encode() for n in headers]
    bodies = [headers[n].encode() for n in headers]
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), source_name.encode(), len(names), bodies, names)
    if err != ok:
        raise CompileError(kernel, options, f"nvrtcCreateProgram: {err}")
    try:
        enc = [o.encode() for o in options]
        (res,) = nvrtc.nvrtcCompileProgram(prog, len(enc), enc)
        err, n = nvrtc.nvrtcGetProgramLogSize(prog)
        log = bytes(n + 1)   # a fresh buffer: b" " * 1 IS the interpreter's shared b" ", which NVRTC would overwrite
        nvrtc.nvrtcGetProgramLog(prog, log)
        # ptxas's "Compile time = ..." line varies from run to run: drop it so a cache entry
        # is a pure function of its key
        log_s = "\n".join(line for line in log.rstrip(b"\x00 ").decode(errors="replace").splitlines()
                          if "Compile time =" not in line)
        if res != ok:
            raise CompileError(kernel, options, log_s or str(res))
        err, n = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = bytes(n + 1)
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        cubin = cubin[:n]
        if err != ok or n == 0:
            raise CompileError(kernel, options, f"no cubin produced ({err}); the architecture must be a real one (sm_XY)\n{log_s}")
        err, n = nvrtc.nvrtcGetPTXSize(prog)
        ptx = bytes(n + 1)
        nvrtc.nvrtcGetPTX(prog, ptx)
        return cubin, ptx.rstrip(b"\x00").decode(errors="replace"), log_s
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def check_arch(arch: str) -> None:
    """ValueError naming the architectures this NVRTC supports when ``arch`` is not one of them."""
    n = arch_number(arch)
    supported = toolchain.supported_archs()
    suffix = normalize_arch(arch)[3 + len(str(n)):]
    if n not in supported or (suffix == "a" and n < 90) or (suffix == "f" and n < 100):
        raise ValueError(f"NVRTC {toolchain.nvrtc_version()} cannot compile for {arch}; it supports "
                         + ", ".join(f"sm_{a}" for a in supported)
                         + " (the 'a' suffix from sm_90 on, 'f' from sm_100 on)")


def compile_source(
    source_name: str,
    kernel: str,
    arch: str,
    defines: dict[str, object] | None = None,
    extra_options: tuple[str, ...] = (),
    before_compile: Callable[[], None] | None = None,
) -> CompiledKernel:
    """Compile ``kernels/<source_name>`` for ``arch`` (e.g. ``"sm_90a"``); cached in memory and on disk.

    ``before_compile`` is called only when neither cache has the kernel, right before the NVRTC
    call (the launch path logs there, and refuses to compile while a CUDA graph is captured)."""
    arch = normalize_arch(arch)
    check_arch(arch)
    request = (source_name, kernel, arch, tuple(sorted((defines or {}).items())), tuple(extra_options))
    with _memo_lock:
        hit = _by_request.get(request)
    if hit is not None:  # the launch path: once compiled in this process, no source read or hashing
        return hit
    path = KERNEL_DIR / source_name
    if not path.is_file():
        raise FileNotFoundError(f"kernel source {source_name!r} is not in {KERNEL_DIR}")
    source = path.read_text()
    headers = _headers()
    options = build_options(arch, defines, extra_options)
    key = _key(source_name, kernel, source, headers, options, arch)  # one file may hold several kernels
    with _memo_lock:
        hit = _memo.get(key)
    if hit is not None:
        with _memo_lock:
            _by_request[request] = hit
        return hit
    cdir = cache_dir()
    entry = cdir / arch / f"{key}.cubin" if cdir else None
    unpacked = _read_entry(entry) if entry is not None and entry.exists() else None
    cache_hit = unpacked is not None
    if unpacked is None:
        if before_compile is not None:
            before_compile()
        unpacked = _nvrtc_compile(kernel, source_name, source, headers, options)
        if ptxas_report(unpacked[2]) is None:
            # NVRTC (12.9+) keeps its own cache of compiled code: on its hit ptxas does not run and the
            # log is empty (NVRTC 13.0 on the H100: a second process compiling the same variant got
            # an empty log in no time), so the spill report would be missing and a spilling kernel
            # pass unnoticed. An unused macro did not help (its key is past the preprocessor), so
            # compile once more with one more global variable of a fresh value: new code for its key,
            # ptxas runs and reports. The kernel is the same; the cubin holds 8 bytes more of globals.
            nonce = uuid.uuid4().int & (2**63 - 1)
            extra = f'\nextern "C" __device__ unsigned long long gl_ptxas_report_nonce = {nonce}ULL;\n'
            unpacked = _nvrtc_compile(kernel, source_name, source + extra, headers, options)
        if entry is not None:
            _write_entry(entry, _pack(*unpacked))
    cubin, ptx, log = unpacked
    ck = CompiledKernel(kernel, source_name, arch, tuple(options), cubin, ptx, log, key, cache_hit)
    with _memo_lock:
        _memo[key] = ck
        _by_request[request] = ck
    return ck


def cache_entry_path(ck: CompiledKernel) -> Path | None:
    cdir = cache_dir()
    return cdir / ck.arch / f"{ck.key}.cubin" if cdir else None


def clear_memory_cache() -> None:
    with _memo_lock:
        _memo.clear()
        _by_request.clear()
