"""Test and benchmark operands on the GPU, in CuPy or PyTorch, of any layout and leading dimension.

One place for: fresh random data (never zeros or ones), layouts (row-/column-major, padded
leading dimensions, offset base pointers), NaN poisoning, the float64 cuBLAS reference.
"""

from __future__ import annotations

from dataclasses import dataclass


def available_libs() -> list[str]:
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


def default_lib(dtype: str = "fp32") -> str:
    libs = available_libs()
    # CuPy has no bfloat16 arrays: bf16 needs PyTorch.
    if dtype == "bf16":
        libs = [l for l in libs if l == "torch"]
    if not libs:
        raise RuntimeError(
            "no GPU array library: install CuPy (pip install 'gemmlab[cu13]') or PyTorch with CUDA"
            + (" (bf16 needs PyTorch)" if dtype == "bf16" else "")
        )
    return libs[0]


class Lib:
    """Tiny adapter over CuPy / PyTorch for what the harness needs."""

    def __init__(self, name: str):
        self.name = name
        if name == "cupy":
            import cupy

            self.xp = cupy
        elif name == "torch":
            import torch

            self.xp = torch
        else:
            raise ValueError(f"unknown array library {name!r}; use 'cupy' or 'torch'")

    def dtype(self, dtype: str):
        if self.name == "cupy":
            if dtype == "bf16":
                raise TypeError("CuPy has no bfloat16 arrays; use lib='torch' for bf16")
            return {"fp32": self.xp.float32, "fp16": self.xp.float16}[dtype]
        return {"fp32": self.xp.float32, "fp16": self.xp.float16, "bf16": self.xp.bfloat16}[dtype]

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

    def empty_like_layout(self, rows, cols, dtype, col_major=False):
        if self.name == "cupy":
            return self.xp.empty((rows, cols), dtype=self.dtype(dtype), order="F" if col_major else "C")
        t = self.xp.empty((cols, rows) if col_major else (rows, cols), dtype=self.dtype(dtype), device="cuda")
        return t.T if col_major else t

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
    dtype: str


def make_operands(lib: Lib, M: int, N: int, K: int, dtype: str, *, a_col=False, b_col=False, c_col=False,
                  ld_pad=0, offset=0, seed=None, beta_nonzero=True) -> Operands:
    """Fresh random A, B, C; C holds random data when beta is used, NaN poison otherwise."""
    s = (seed or 0) * 7
    a = lib.randn(M, K, dtype, col_major=a_col, ld_pad=ld_pad, offset=offset, seed=None if seed is None else s + 1)
    b = lib.randn(K, N, dtype, col_major=b_col, ld_pad=ld_pad, offset=offset, seed=None if seed is None else s + 2)
    c = lib.randn(M, N, dtype, col_major=c_col, ld_pad=ld_pad, offset=offset, seed=None if seed is None else s + 3)
    if not beta_nonzero:
        lib.fill_nan(c)
    return Operands(lib, a, b, c, lib.copy(c), dtype)
