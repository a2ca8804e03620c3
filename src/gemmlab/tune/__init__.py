"""Layer 4b: the tuner (``gemmlab tune``): search a rung's tile parameters on this GPU, keep every
result in a database. Uses the benchmark's JSON writer and the layers below; the report reads it.

    space       the search space from the registry (values, constraints with reasons, pruning)
    evaluate    the Evaluator interface, Outcome and its statuses, ReplayEvaluator (recorded results)
    store       the database: Optuna RDB storage (SQLite by default), one study per key, heartbeats,
                reading the records back
    strategies  Optuna's samplers by name (exhaustive, grid, random, tpe, cmaes, auto)
    search      one worker's ask/prune/compile/verify/time/tell loop and its rules (3x slower,
                failures recorded, nothing measured twice, resume)
    gpu         the real evaluator: NVRTC in worker processes, verification, the timing engine, peers
    runner      ``tune``: one run, one worker per device
    table       seed 001's table from the stored results

Optuna is an optional extra (``pip install "gemmlab[tune]"``); it is imported on first use.
"""
