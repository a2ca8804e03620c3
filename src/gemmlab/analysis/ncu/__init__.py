"""Nsight Compute for ``gemmlab profile`` and the report: running ncu on a target program and reading
its counters by metric name. What profiles one rung (and cuBLAS) is the measure layer's
(measure/ncu_profile.py: profile_rung, profile_cublas, profile_source), since its target program is.

How a measurement is made
-------------------------
``ncu`` launches ``python -m gemmlab.measure.ncu_target``, which builds the operands, runs the measured
call once outside the profiled range (module loading, cuBLAS heuristics), then runs it once more
between ``cuProfilerStart`` and ``cuProfilerStop``. ncu runs with ``--profile-from-start off``, so
it sees exactly the kernels of that one call, whatever their names (cuBLAS may launch more than
one: a split-K GEMM and its reduction) and whatever the array library launched before it (random
number generation, NaN poisoning). ``--clock-control none`` leaves the clocks as the benchmark
sees them; ``--cache-control all`` flushes the caches before every replay pass, so byte counters
are those of a cold start.

How it is read
--------------
``--csv --page raw --print-units base`` prints one header row of column names (the launch columns,
then one column per metric), one row of units and one row per profiled kernel. Everything is
looked up by column *name* (never position), values lose their thousands separators, units are
normalized to seconds / bytes / bytes per second / hertz, and "n/a" becomes ``None``.

The metrics live in one table, ``METRICS``: our key, the Nsight Compute metric name (plus older or
newer spellings of the same counter), its unit after normalization and what it means. A metric that
this ncu does not know is dropped (ncu refuses a whole run for one unknown name; we retry without
it) and reported as missing, never fatal.

The package:

    metrics  the metric table and the stall reasons
    parse    ncu's raw CSV -> values in base units, aggregation over kernels, our summary
    run      finding and running ncu on a target program
    source   per-instruction warp-state sampling (SourceCounters): where the stalls sit
"""

from .metrics import METRIC_BY_KEY, METRICS, STALL_LABEL, STALL_MEANING, STALL_REASONS, Metric, metric_names
from .parse import (KernelRecord, NcuError, aggregate, normalize, parse_ncu_csv, parse_ncu_rows, parse_value,
                    summarize)
from .run import (PERMISSION_HELP, NcuPermissionError, check_permission, find_ncu, ncu_command, ncu_version,
                  run_ncu, unknown_metrics)
from .source import SOURCE_STALLS, parse_source_csv, reason_by_opcode, summarize_source

__all__ = [
    "Metric", "METRICS", "METRIC_BY_KEY", "STALL_REASONS", "STALL_LABEL", "STALL_MEANING", "metric_names",
    "KernelRecord", "NcuError", "parse_value", "normalize", "parse_ncu_rows", "parse_ncu_csv", "aggregate",
    "summarize",
    "NcuPermissionError", "PERMISSION_HELP", "find_ncu", "ncu_version", "ncu_command", "unknown_metrics",
    "check_permission", "run_ncu",
    "SOURCE_STALLS", "parse_source_csv", "summarize_source", "reason_by_opcode",
]
