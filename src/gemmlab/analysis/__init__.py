"""Layer 2: understanding a kernel. SASS parsing, occupancy, ``inspect``, Nsight Compute (metric
table, parser, runner) and the environment a measurement is taken in. Uses only ``core``."""
