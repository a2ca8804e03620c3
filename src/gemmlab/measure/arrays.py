"""Test and benchmark operands on the GPU, in CuPy or PyTorch, of any layout and leading dimension.

One place for: fresh random data (never zeros or ones), layouts (row-/column-major, padded
leading dimensions, offset base pointers), NaN poisoning, the float64 cuBLAS reference.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from ..core.deps import MissingDependencyError, require
from ..core.dtypes import get as get_dtype


def available_libs() -> list[str]:
    """The GPU array libraries usable here (imported and seeing a GPU). A plain probe: absence is
    an answer; ``choose_lib`` turns "none installed" into the one-line install hint."""
    libs = []
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            libs.append("cupy")
    except Exception:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            libs.append("torch")
    except Exception:
        pass
    return libs


LIBS = ("torch", "cupy")


def _installed(name: str) -> bool:
    """Whether ``name`` is installed at all (found without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def choose_lib(lib: str | None, dtype: str, available=None, prefer: tuple[str, ...] = LIBS) -> str:
    """The array library for operands and cuBLAS: ``lib`` if given and usable, else the first of
    ``prefer`` that is available (CuPy has no bfloat16 or FP8 arrays: bf16 and fp8 need PyTorch)."""
    available = available_libs() if available is None else available
    if dtype == "fp8":
        prefer = ("torch",)
    if lib is not None:
        if lib not in LIBS:
            raise ValueError(f"unknown library {lib!r}; use one of {', '.join(LIBS)}")
        if lib == "cupy" and dtype in ("bf16", "fp8"):
            raise ValueError(f"CuPy has no {'bfloat16' if dtype == 'bf16' else 'FP8'} arrays: {dtype} needs --lib torch")
        if lib not in available:
            raise RuntimeError(f"--lib {lib}: not usable here (GPU array libraries found: "
                               f"{', '.join(available) or 'none'})")
        return lib
    for cand in prefer:
        if cand in available and not (cand == "cupy" and dtype == "bf16"):
            return cand
    if not available and not any(_installed(name) for name in LIBS):
        raise MissingDependencyError("no GPU array library for the operands and cuBLAS: neither CuPy nor PyTorch is "
                                     'installed: pip install "gemmlab[cu13]" (CuPy; or "gemmlab[cu12]") or '
                                     '"gemmlab[torch]" (PyTorch' + (", which bf16 needs)" if dtype == "bf16" else ")"))
    raise RuntimeError("no GPU array library for the operands and cuBLAS: install PyTorch with CUDA or CuPy "
                       "(pip install 'gemmlab[cu13]')" + (" -- bf16 needs PyTorch" if dtype == "bf16" else ""))


class Fp32Mode:
    """cuBLAS's float32 mode inside the block: true FP32 SGEMM (``tf32=False``) or the TF32 tensor
    cores (``tf32=True``, what "precision tf32" is compared with); the library's setting is
    restored after. ``settings`` records what was set, for the benchmark's JSON."""

    def __init__(self, L: "Lib", tf32: bool = False):
        self.L = L
        self.tf32 = bool(tf32)
        self.restore = lambda: None
        self.settings: dict = {"tf32": self.tf32}

    def __enter__(self):
        import os

        if self.L.name == "torch":
            m = self.L.xp.backends.cuda.matmul
            if hasattr(m, "fp32_precision"):
                prev = m.fp32_precision
                m.fp32_precision = "tf32" if self.tf32 else "ieee"
                self.restore = lambda: setattr(m, "fp32_precision", prev)
                self.settings["torch_fp32_precision"] = m.fp32_precision
            else:
                prev = m.allow_tf32
                m.allow_tf32 = self.tf32
                self.restore = lambda: setattr(m, "allow_tf32", prev)
                self.settings["torch_allow_tf32"] = self.tf32
            for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
                if hasattr(m, flag):
                    self.settings["torch_" + flag] = bool(getattr(m, flag))
        else:
            import numpy

            rl = require("cupy._core._routines_linalg")

            prev = rl.get_compute_type(numpy.float32)
            mode = "COMPUTE_TYPE_TF32" if self.tf32 else "COMPUTE_TYPE_DEFAULT"
            rl.set_compute_type(numpy.float32, getattr(rl, mode))
            self.restore = lambda: rl.set_compute_type(numpy.float32, prev)
            self.settings["cupy_fp32_compute_type"] = mode
            if os.environ.get("CUPY_TF32"):
                self.settings["cupy_tf32_env_overridden"] = os.environ["CUPY_TF32"]
        if os.environ.get("NVIDIA_TF32_OVERRIDE") is not None:
            self.settings["NVIDIA_TF32_OVERRIDE"] = os.environ["NVIDIA_TF32_OVERRIDE"]
        return self

    def __exit__(self, *exc):
        self.restore()


class TrueFP32(Fp32Mode):
    """Keep cuBLAS on true FP32 (no TF32) inside the block; restore the library's setting after."""

    def __init__(self, L: "Lib"):
        super().__init__(L, tf32=False)


class Lib:
    """Tiny adapter over CuPy / PyTorch for what the harness needs."""

    def __init__(self, name: str):
        self.name = name
        if name in LIBS:
            self.xp = require(name)
        else:
            raise ValueError(f"unknown array library {name!r}; use 'cupy' or 'torch'")

    def dtype(self, dtype: str):
        if self.name == "cupy" and dtype in ("bf16", "fp8"):
            raise TypeError(f"CuPy has no {dtype} arrays; use lib='torch' for {dtype}")
        return getattr(self.xp, get_dtype(dtype).array_name)

    def randn(self, rows: int, cols: int, dtype: str, *, col_major=False, ld_pad=0, offset=0, seed=None):
        """Random N(0,1) (rows x cols) view with leading dimension = extent + ld_pad, starting
        ``offset`` elements into its allocation (breaks 16-byte alignment when offset % 4)."""
        outer, inner = (cols, rows) if col_major else (rows, cols)
        ld = inner + ld_pad
        n = offset + outer * ld
        if self.name == "cupy":
            g = self.xp.random.default_rng(seed)
            flat = g.standard_normal(n, dtype=self.xp.float32).astype(self.dtype(dtype))
        else:
            gen = self.xp.Generator(device="cuda")
            gen.manual_seed(seed if seed is not None else int.from_bytes(__import__("os").urandom(4), "little"))
            flat = self.xp.randn(n, generator=gen, device="cuda", dtype=self.xp.float32).to(self.dtype(dtype))
        m = flat[offset:].reshape(outer, ld)[:, :inner]
        return m.T if col_major else m

    def fill_nan(self, x) -> None:
        if self.name == "cupy":
            x.fill(float("nan"))
        else:
            x.fill_(float("nan"))

    def to64(self, x):
        return x.astype(self.xp.float64) if self.name == "cupy" else x.to(self.xp.float64)

    def copy(self, x):
        return x.copy() if self.name == "cupy" else x.clone()

    def matmul(self, a, b, out=None):
        if self.name == "cupy":
            return self.xp.matmul(a, b, out=out)
        return self.xp.matmul(a, b, out=out) if out is not None else self.xp.matmul(a, b)

    def synchronize(self):
        if self.name == "cupy":
            self.xp.cuda.Stream.null.synchronize()
            self.xp.cuda.get_current_stream().synchronize()
        else:
            self.xp.cuda.synchronize()

    def to_numpy(self, x):
        return self.xp.asnumpy(x) if self.name == "cupy" else x.detach().cpu().numpy()


@dataclass
class Operands:
    lib: Lib
    a: object
    b: object
    c: object        # output buffer (poisoned or holding C0)
    c0: object       # copy of the input C (for beta != 0)
    dtype: str       # A's and B's
    out: str = ""    # C's, where it is not ``dtype`` (an output dtype)

    @property
    def c_dtype(self) -> str:
        return self.out or self.dtype


def make_operands(lib: Lib, M: int, N: int, K: int, dtype: str, *, a_col=False, b_col=False, c_col=False,
                  ld_pad=0, offset=0, seed=None, beta_nonzero=True, c=None, out: str | None = None) -> Operands:
    """Fresh random A, B, C; C holds random data when beta is used, NaN poison otherwise. ``c``: the
    caller's M x N array as C (a view into a larger buffer, a stride of its own) instead of a fresh
    one; c_col, ld_pad and offset then shape A and B only. ``out``: C's dtype where it is not
    ``dtype``."""
    s = (seed or 0) * 7
    a = lib.randn(M, K, dtype, col_major=a_col, ld_pad=ld_pad, offset=offset, seed=None if seed is None else s + 1)
    b = lib.randn(K, N, dtype, col_major=b_col, ld_pad=ld_pad, offset=offset, seed=None if seed is None else s + 2)
    if c is None:
        c = lib.randn(M, N, out or dtype, col_major=c_col, ld_pad=ld_pad, offset=offset,
                      seed=None if seed is None else s + 3)
    if not beta_nonzero:
        lib.fill_nan(c)
    return Operands(lib, a, b, c, lib.copy(c), dtype, "" if out in (None, dtype) else out)
