"""Regenerate the README's and the docs' generated tables: the ladder (from the registry), the exit
status (from the command line's one definition) and every table of measurements (from the
canonical results of benchmarks/results/MANIFEST.json, gemmlab.report.docs).

    python tools/gen_readme.py            # rewrite the blocks in README.md and docs/
    python tools/gen_readme.py --check    # exit 1, naming the files, if a block is out of date

A generated block sits between ``<!-- NAME:start ... -->`` and ``<!-- NAME:end -->``; the text
outside the blocks is written by hand (tests/test_generated_docs.py runs --check).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gemmlab.cli.app import EXIT_STATUS
from gemmlab.report import docs
from gemmlab.report.docs import R, replace_block
from gemmlab.report.manifest import entries

ROOT = Path(__file__).resolve().parents[1]


def exit_status_markdown() -> str:
    return "\n".join(["| exit status | meaning |", "| --- | --- |"]
                     + [f"| {code} | {text} |" for code, text in EXIT_STATUS])


# file -> {block name: what generates it}
BLOCKS = {
    "README.md": {
        "headline": lambda: docs.headline_markdown(ROOT),
        "rungs": docs.rungs_markdown,
        "exit": exit_status_markdown,
    },
    "docs/ladder.md": {
        "rungs": docs.rungs_markdown,
        "ladder": lambda: docs.ladder_markdown(ROOT),
        "decode": lambda: docs.suite_markdown(ROOT, (R + "h100_decode_bf16.json.gz", R + "h100_decode_fp16.json.gz"),
                                              bandwidth=True),
        "decode_h200": lambda: docs.suite_markdown(ROOT, (R + "h200_decode_bf16.json.gz", R + "h200_decode_fp16.json.gz"),
                                                   bandwidth=True),
        "runs": lambda: docs.runs_markdown(ROOT, (R + "h100_fp32.json", R + "h100_fp16_tmastore.json",
                                                  R + "h100_bf16_tmastore.json")),
    },
    "docs/hopper.md": {
        "llm": lambda: docs.suite_markdown(ROOT, (R + "h100_auto_llm_bf16.json.gz", R + "h100_auto_llm_fp16.json.gz")),
        "tf32": lambda: docs.runs_markdown(ROOT, (R + "h100_auto_tf32.json", R + "h100_wgmma_3xtf32_final.json")),
        "fp8": lambda: docs.fp8_markdown(ROOT, R + "h200_fp8_suite.json.gz"),
        "moe": lambda: docs.moe_markdown(ROOT, R + "h200_moe_suite.json.gz"),
        "moe_fp8": lambda: docs.moe_fp8_markdown(ROOT, R + "h200_moe_fp8_suite.json.gz"),
    },
    "docs/timing.md": {
        "plain": lambda: docs.plain_cublas_markdown(ROOT, R + "h100_plain_cublas.json"),
        "sustained": lambda: docs.sustained_markdown(ROOT, (
            R + "h100_sustained_bf16_8192_run1.json", R + "h100_sustained_bf16_8192_run2.json",
            R + "h100_sustained_fp16_8192_run1.json", R + "h100_sustained_fp16_8192_run2.json",
            R + "h100_sustained_tf32_8192_run1.json", R + "h100_sustained_tf32_8192_run2.json")),
    },
    "docs/tuning.md": {
        "heldout": lambda: docs.heldout_markdown(ROOT, tuple(R + f"{gpu}_random_heldout_{dt}.json.gz"
                                                             for gpu in ("h100", "h200") for dt in ("bf16", "fp16", "fp32"))),
        "strategies": lambda: docs.strategies_markdown(ROOT, R + "tune_strategies_h100.json.gz"),
    },
    "docs/usage.md": {
        "overhead": lambda: docs.overhead_markdown(ROOT, (R + "h100_overhead_fp32.json", R + "h100_overhead_fp16.json")),
    },
    "docs/results.md": {
        "results": lambda: docs.results_markdown(ROOT, entries(ROOT)),
    },
}


def regenerate() -> dict[str, tuple[str, str]]:
    """file -> (its text now, its text with every block regenerated)."""
    out = {}
    for name, blocks in BLOCKS.items():
        old = (ROOT / name).read_text(encoding="utf-8")
        new = old
        for block, make in blocks.items():
            new = replace_block(new, block, make())
        out[name] = (old, new)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a generated block is out of date")
    args = ap.parse_args(argv)
    stale = []
    for name, (old, new) in regenerate().items():
        if old != new:
            stale.append(name)
            if not args.check:
                (ROOT / name).write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"out of date: {', '.join(stale)} (run: python tools/gen_readme.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
