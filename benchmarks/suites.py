"""The benchmark suites, read from their one definition (gemmlab/core/shapes.py: SUITES), and the
commands that run them on a GPU. ``python benchmarks/suites.py`` prints both; ``--json FILE``
writes the shapes as JSON for other tools.

    gemmlab bench auto async_simt --suite fp32 --json fp32_suite.json          (strict FP32)
    gemmlab bench auto mma_sync --suite llm --dtype bf16 --json llm_bf16.json   (and --dtype fp16)
    gemmlab bench auto --suite decode --dtype bf16 --json decode_bf16.json      (GB/s, % of the copy rate)
    gemmlab bench auto --suite random:48@1 --dtype bf16 --json random.json     (a sample nobody tuned on)

``random[:N][@SEED]`` is drawn, not listed (core/shapes.py: random_shapes); this prints the fixed ones.

A suite run's table and JSON end with each kernel's geometric mean of its ratios to cuBLAS over the
suite and the shapes where it is below 0.8x (bench's ``summary``).
"""

from __future__ import annotations

import argparse
import json

from gemmlab.core.shapes import SUITE_DTYPES, SUITES, fmt_shape


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="FILE", help="write {suite: {dtypes, shapes}} to FILE")
    args = ap.parse_args()
    doc = {name: {"dtypes": list(SUITE_DTYPES[name]), "shapes": [list(s) for s in shapes]}
           for name, shapes in SUITES.items()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    for name, d in doc.items():
        print(f"{name} ({', '.join(d['dtypes'])}; {len(d['shapes'])} shapes): "
              + ", ".join(fmt_shape(s) for s in d["shapes"]))
        for dt in d["dtypes"]:
            print(f"    gemmlab bench auto --suite {name} --dtype {dt} --json {name}_{dt}.json")


if __name__ == "__main__":
    main()
