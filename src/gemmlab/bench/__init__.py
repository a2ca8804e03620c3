"""Layer 4: the benchmark (``gemmlab bench``): time the rungs of the ladder beside cuBLAS, on the
same inputs, in the same run. Uses the layers below.

    schedule  what to run: the rungs, the shapes (the default-shape rule), the groups of jobs
              timed on one set of operands, the repeats of a slow entry
    stats     the records and their statistics (median, TFLOP/s, ratio to cuBLAS, % of peak)
    runner    the GPU run, ``run_bench``: verify, estimate, warm up, time interleaved
    results   the result as strict JSON, and the exit status
    table     the result on the terminal (header lines and a rich table)

How a figure is measured: ``runner``; keeping the default run bounded: ``schedule``; the JSON's
keys: ``results``.
"""
