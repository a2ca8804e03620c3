"""Layer 3: measuring on a GPU. Operands in CuPy or PyTorch, verification against a float64
cuBLAS reference, event timing, the peers the rungs are measured against (cuBLAS, an autotuned
Triton matmul), and the process Nsight Compute profiles. Uses ``core`` and ``analysis``."""
