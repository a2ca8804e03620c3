"""How the multiplications are done: the one table of precisions every layer reads.

A dtype says what the operands are; a precision says what the multipliers see of them. Each dtype
has one exact precision of its own name (``fp32``: IEEE FP32 FMAs on the CUDA cores; ``fp16`` and
``bf16``: the tensor cores, which multiply 16-bit operands exactly), the default. Float32 operands
may also go to the tensor cores:

* ``tf32``: each operand reduced to TF32 (10 fraction bits) and multiplied once, FP32
  accumulation -- what cuBLAS does with TF32 enabled. Rung 20 rounds to nearest (ties away:
  relative error 2^-11); rung 22's wgmma reads the FP32 bits and ignores the low 13 (truncation:
  below 2^-10), so the table's roundoff is 2^-10, which covers both;
* ``3xtf32``: each operand split into x = big + small, both TF32 (exact within 2^-22 |x|), and
  three products per multiply-add (small*big + big*small + big*big): FP32-level accuracy.

FP8 operands (rung 25) have two: ``fp8``, whose tensor-core sums are promoted into FP32 every k tile,
and ``fp8_fast``, summed in the tensor cores over all of K (faster, less accurate over a long K).

``kernel_code`` is the kernels' ``GL_PRECISION`` define (the number of products per multiply-add;
for FP8, 1 is the fast accumulation; 0: not defined, the exact or promoted path). ``input_roundoff`` is the relative error the operands may carry
into each product beyond the dtype's own values: verification adds ``2 * input_roundoff`` (one
per operand) to the dtype's tolerance (``measure.verify``), as it adds the output type's roundoff.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Precision:
    name: str               # "tf32": precision=, --precision, Rung.precisions, the JSON
    dtype: str              # the operand dtype it applies to
    fraction_bits: int      # fraction bits of the operands as the multipliers see them
    input_roundoff: float   # relative error of an operand as multiplied (0: exact)
    kernel_code: int        # GL_PRECISION (products per multiply-add); 0 for the exact path
    tensor_cores: bool      # the products run on the tensor cores
    tensor_share: float     # its peak in useful flop/s, as a share of the dense 16-bit tensor peak
    summary: str
    # FP8: the tensor cores add products with fewer fraction bits than FP32; the relative error an
    # addition there may make, and over how many of K's terms it runs before the sum is promoted
    # into FP32 (0: the whole K). Verification adds it as it adds an FP32 accumulation's.
    accumulation_roundoff: float = 0.0
    accumulation_run: int = 0

    @property
    def exact(self) -> bool:
        return self.name == self.dtype


_TABLE = (
    Precision("fp32", "fp32", 23, 0.0, 0, False, 0.0, "IEEE FP32 FMAs on the CUDA cores (exact products)"),
    Precision("tf32", "fp32", 10, 2.0**-10, 1, True, 0.5,      # TF32 MMAs run at half the 16-bit rate
              "operands rounded or truncated to TF32 (10 fraction bits), one tensor-core product, FP32 accumulation"),
    Precision("3xtf32", "fp32", 21, 2.0**-22, 3, True, 1 / 6,  # three TF32 products per multiply-add
              "operands split into two TF32 parts, three tensor-core products: FP32-level accuracy"),
    Precision("fp16", "fp16", 10, 0.0, 0, True, 1.0, "FP16 operands on the tensor cores, FP32 accumulation"),
    Precision("bf16", "bf16", 7, 0.0, 0, True, 1.0, "BF16 operands on the tensor cores, FP32 accumulation"),
    # FP8 runs at twice the 16-bit rate. The tensor cores sum FP8 products with fewer fraction bits
    # than FP32: "fp8" adds each k tile's sum (128 of K) into FP32 registers, "fp8_fast"
    # (GL_PRECISION 1, torch's use_fast_accum) leaves the whole K to them (kernels/25_wgmma_fp8.cu)
    # (DeepSeek-V3's report measures about 14 bits kept in Hopper's FP8
    # accumulation; a step of 2^-13 allows truncation where it does not round)
    Precision("fp8", "fp8", 3, 0.0, 0, True, 2.0,
              "FP8 operands (e4m3 or e5m2) on the tensor cores, each k tile's sum promoted into FP32",
              accumulation_roundoff=2.0**-13, accumulation_run=128),
    Precision("fp8_fast", "fp8", 3, 0.0, 1, True, 2.0,
              "FP8 operands on the tensor cores, summed over the whole K in the tensor cores' accumulators",
              accumulation_roundoff=2.0**-13),
)

PRECISIONS: tuple[str, ...] = tuple(p.name for p in _TABLE)
BY_NAME: dict[str, Precision] = {p.name: p for p in _TABLE}


def get(name: str) -> Precision:
    """The precision of a name; ValueError naming the choices otherwise."""
    try:
        return BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown precision {name!r}; choose one of {', '.join(PRECISIONS)}") from None


def for_dtype(dtype: str) -> tuple[str, ...]:
    """The precisions operands of ``dtype`` may be multiplied in, the exact one first."""
    return tuple(p.name for p in _TABLE if p.dtype == dtype)


def applies(precision: str, dtype: str) -> bool:
    """Whether operands of ``dtype`` may be multiplied in ``precision``."""
    p = BY_NAME.get(precision)
    return p is not None and p.dtype == dtype


def resolve(dtype: str, precision: str | None) -> str:
    """The precision a call computes in: ``precision``, or the dtype's exact one when None.
    ValueError for an unknown name or one that does not apply to ``dtype``."""
    if precision is None:
        return dtype
    p = get(precision)
    if p.dtype != dtype:
        choices = for_dtype(dtype)
        take = f"only {choices[0]!r} (the default)" if len(choices) == 1 else "one of " + ", ".join(choices)
        raise ValueError(f"precision {precision!r} applies to {p.dtype} operands; {dtype} operands take {take}")
    return p.name


def label(dtype: str, precision: str | None) -> str:
    """The dtype a tuning study and a dispatch table entry are filed under: the dtype, with the
    precision when it is not the dtype's own ("fp32:tf32"), so results of different precisions never
    share a study or serve each other's calls."""
    return dtype if precision in (None, dtype) else f"{dtype}:{precision}"
