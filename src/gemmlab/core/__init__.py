"""Layer 1: running a GEMM. Dtypes, architectures, the registry of rungs and their configs,
shapes, problem validation, variants, NVRTC compilation, the CUDA driver, launches, the API."""
