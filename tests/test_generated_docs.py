"""The README's and the docs' generated tables match what tools/gen_readme.py makes of the registry,
the exit status and the canonical results today; the README stays short; every page is in the site."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _gen_readme():
    spec = importlib.util.spec_from_file_location("gen_readme", ROOT / "tools" / "gen_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_table_is_up_to_date():
    stale = [name for name, (old, new) in _gen_readme().regenerate().items() if old != new]
    assert stale == [], "run: python tools/gen_readme.py"


def test_the_readme_reads_in_a_screen_or_two():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


def test_every_docs_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = [str(p.relative_to(ROOT / "docs")) for p in sorted((ROOT / "docs").rglob("*.md"))]
    assert [p for p in pages if f" {p}" not in nav] == []


def test_the_headline_holds_the_fp8_and_moe_suites_against_pytorchs_own_calls():
    from gemmlab.report import docs
    rows = docs.headline_markdown(ROOT).splitlines()
    fp8 = next(r for r in rows if r.startswith("| FP8 suite"))
    moe = next(r for r in rows if r.startswith("| MoE suite"))
    assert "(torch._scaled_mm)" in fp8 and "`h200_fp8_suite.json.gz`" in fp8
    assert "(torch._grouped_mm)" in moe and "`h200_moe_suite.json.gz`" in moe
