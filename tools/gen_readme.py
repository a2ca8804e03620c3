"""Regenerate the README's tables: the ladder (from the registry) and the measured results (from
the benchmark JSON files given on the command line, e.g. benchmarks/results/h100_fp32.json)."""

import json
import sys
from pathlib import Path

from gemmlab.report.docs import bench_markdown, replace_block, rungs_markdown

readme = Path(__file__).resolve().parents[1] / "README.md"
text = replace_block(readme.read_text(), "rungs", rungs_markdown())
if len(sys.argv) > 1:
    text = replace_block(text, "bench", "\n\n".join(bench_markdown(json.loads(Path(p).read_text())) for p in sys.argv[1:]))
readme.write_text(text)
