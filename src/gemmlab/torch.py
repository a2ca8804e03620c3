"""``gemmlab.torch``: the PyTorch operator ``gemmlab::matmul`` (see ``gemmlab.core.torch_op``).

A thin public facade, like the package root: importing it imports PyTorch and registers the
operator; ``import gemmlab`` alone never imports PyTorch.
"""

from .core.torch_op import EPILOGUE_OP_NAME, OP_NAME, SAVED_OP_NAME, check_operands, matmul, op

__all__ = ["matmul", "op", "check_operands", "OP_NAME", "EPILOGUE_OP_NAME", "SAVED_OP_NAME"]
