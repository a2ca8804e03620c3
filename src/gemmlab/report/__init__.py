"""Layer 5: the measured worklog (``gemmlab report``), the canonical results and the tables the
README and the docs generate from them. Uses the layers below.

``gemmlab report`` is the measured worklog of the ladder as one self-contained HTML page.

On a GPU, ``collect.collect`` runs the ladder: the benchmark of every rung at one shape beside
cuBLAS, a size sweep of a few rungs, ``inspect`` of every rung (what the compiler made of it),
Nsight Compute counters of every rung at a smaller shape (ncu replays each kernel many times), and
the device's measured ceilings (a large device-to-device copy for bandwidth, cuBLAS at 8192^3 for
compute, beside the theoretical peak). The results are one JSON document::

    {"bench": <bench JSON>, "sweep": <bench JSON over sizes>, "inspect": {slug: inspect dict},
     "profile": {slug or "cublas": profile dict}, "ceilings": {...}, "env": {...}}

``render.build`` turns that document into ``report.html`` (inline CSS, figures as base64 PNG, no
script, no external resource: it opens from disk in any browser) and ``report.md`` (figures saved
beside it as PNG files). ``build`` needs no GPU: ``gemmlab report --from-json results.json``
rebuilds the page from saved results anywhere.

The page explains each step up the ladder by the counters that moved: for every pair of
consecutive rungs, ``steps.explain_step`` compares DRAM/L2 bytes, shared-memory bank conflicts, the
FFMA share of the hot loop, the top warp-stall reason, occupancy, instruction counts (explained by
the hot loop's load instructions) and tensor instructions, ranks the changes by size and writes one
sentence from the largest.

Modules, each using only those listed before it (and the layers below):

    fmt       how numbers, bytes, percentages and shapes are written
    model     reading a results document: RungView, ladder(), main_dtype, dtype_text, peak_tflops and
              peak_basis, l2_bandwidth, timing_text, results_document (what --from-json accepts)
    steps     explaining a step up the ladder by its counters
    figures   the four matplotlib figures (FIGURES)
    render    the tables, the HTML page and its Markdown twin; build()
    collect   measuring the ladder on a GPU into a results document
    manifest  the canonical results (benchmarks/results/MANIFEST.json): reading them, finding citations
    docs      the README's and the docs' tables from the registry and the canonical results
"""
