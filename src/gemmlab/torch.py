"""``gemmlab.torch``: the PyTorch operators ``gemmlab::matmul`` (see ``gemmlab.core.torch_op``),
``gemmlab::scaled_mm`` and ``gemmlab::scaled_grouped_mm`` (FP8; ``gemmlab.core.torch_scaled``) and
``gemmlab::grouped_mm`` (mixture of experts; ``gemmlab.core.torch_grouped``).

A thin public facade, like the package root: importing it imports PyTorch and registers the
operator; ``import gemmlab`` alone never imports PyTorch.
"""

from .core.torch_op import EPILOGUE_OP_NAME, OP_NAME, SAVED_OP_NAME, check_operands, matmul, op
from .core.torch_grouped import OP_NAME as GROUPED_OP_NAME, grouped_mm
from .core.torch_scaled import (GROUPED_OP_NAME as SCALED_GROUPED_OP_NAME, OP_NAME as SCALED_OP_NAME,
                                scaled_grouped_mm, scaled_mm)

__all__ = ["matmul", "scaled_mm", "grouped_mm", "scaled_grouped_mm", "op", "check_operands", "OP_NAME",
           "EPILOGUE_OP_NAME", "SAVED_OP_NAME", "SCALED_OP_NAME", "GROUPED_OP_NAME", "SCALED_GROUPED_OP_NAME"]
