"""The element types gemmlab computes in: the one table every layer reads.

A dtype has a short name (``fp32``, ``fp16``, ``bf16``: the CLI's ``--dtype``, the registry's
``Rung.dtypes``, the JSON's ``dtype``), the attribute name of the array libraries
(``float32`` in NumPy, CuPy and PyTorch), its size, the code the kernels receive as ``GL_DTYPE``
(kernels/common.cuh), its ``__cuda_array_interface__`` type string, and the two numbers
verification needs: the unit roundoff (half an ulp of 1.0) and the smallest normal number.
``stand_in`` names the dtype whose tuned configurations ``auto`` uses for this one where it has
none of its own (core/dispatch.py): fp16 and bf16 run the same kernels at the same tensor-core rate
(rung 21 runs at about the same share of cuBLAS in the two), so a tile tuned in one is
the best-informed guess for the other, better than the rule that would answer instead.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str              # "fp32"
    array_name: str        # "float32": numpy/cupy/torch attribute
    itemsize: int          # bytes
    code: int              # GL_DTYPE in kernels/common.cuh
    typestr: str           # __cuda_array_interface__ "typestr" (bfloat16 has no standard one)
    unit_roundoff: float   # half an ulp of 1.0
    smallest_normal: float
    tensor_cores: bool     # gemmlab's rungs take it to the tensor cores (peak: dense tensor rate)
    stand_in: str | None = None   # whose tuned configurations stand in where it has none (dispatch)

    @property
    def vector_elements(self) -> int:
        """Elements in one 16-byte vector access."""
        return VECTOR_BYTES // self.itemsize


VECTOR_BYTES = 16

_TABLE = (
    DType("fp32", "float32", 4, 0, "<f4", 2.0**-24, 2.0**-126, False),
    DType("fp16", "float16", 2, 1, "<f2", 2.0**-11, 2.0**-14, True, stand_in="bf16"),
    DType("bf16", "bfloat16", 2, 2, "<V2", 2.0**-8, 2.0**-126, True, stand_in="fp16"),
)
# FP8 (rung 25, gemmlab.scaled_mm): one dtype of bytes whose format, e4m3 or e5m2, each operand carries
# beside it (``ArrayInfo.fmt``; the kernel's GL_FP8_A / GL_FP8_B), since wgmma multiplies either format
# by either. Its numbers are e4m3's, the finer of the two. Not among ``DTYPES``, the dtypes a GEMM
# writes and the suites sweep: FP8 operands write a C of fp32, fp16 or bf16.
FP8 = DType("fp8", "float8_e4m3fn", 1, 3, "|V1", 2.0**-4, 2.0**-6, True)
FP8_FORMATS: dict[str, str] = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}   # format -> array dtype name

DTYPES: tuple[str, ...] = tuple(d.name for d in _TABLE)
ALL_DTYPES: tuple[str, ...] = DTYPES + (FP8.name,)
BY_NAME: dict[str, DType] = {d.name: d for d in _TABLE + (FP8,)}
BY_ARRAY_NAME: dict[str, DType] = {**{d.array_name: d for d in _TABLE}, **{n: FP8 for n in FP8_FORMATS.values()}}
BY_TYPESTR: dict[str, DType] = {d.typestr: d for d in _TABLE}


def fp8_format(array_name: str) -> str:
    """The FP8 format (``e4m3``, ``e5m2``) of an array library's dtype name, "" for any other."""
    return next((f for f, n in FP8_FORMATS.items() if n == array_name), "")


def get(name: str) -> DType:
    """The dtype of a short name; ValueError naming the choices otherwise."""
    try:
        return BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown dtype {name!r}; choose one of {', '.join(ALL_DTYPES)}") from None


def from_array_name(name: str) -> DType:
    """The dtype of an array library's dtype name (``float32``); TypeError for any other type."""
    d = BY_ARRAY_NAME.get(name)
    if d is None:
        raise TypeError(f"unsupported dtype {name}; gemmlab supports "
                        f"{', '.join(x.array_name for x in _TABLE)} and, as FP8, {', '.join(FP8_FORMATS.values())}")
    return d
