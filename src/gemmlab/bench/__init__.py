"""Layer 4: the benchmark (``gemmlab bench``): what to run, statistics, the GPU run, the JSON and
the table. Uses the layers below."""
