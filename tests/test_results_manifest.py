"""The canonical results (benchmarks/results/MANIFEST.json): every result the tree cites is listed
there and present, and every entry says what it shows, how to reproduce it, and where and when it
was measured (gemmlab.report.manifest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.report.manifest import FIELDS, RESULT_DIRS, citations, cited_in, entries, expand, load, resolve

ROOT = Path(__file__).resolve().parents[1]
# where a citation must name a canonical result; this file's examples are made-up names. The design
# journal records what was measured then: it may also cite the archive (results that left the tree)
CITING = ("README.md", "docs", "src", "tests", "tools")
JOURNAL = "docs/journal/"
EXAMPLES = (str(Path(__file__).relative_to(ROOT)),)
# the results' share of the tree's 15 MB (the code, the docs and the shipped tables, gzipped, take under 3)
RESULTS_BUDGET = 9_000_000


def _canonical() -> list[str]:
    return [e["path"] for e in entries(ROOT)]


def test_every_manifest_entry_names_a_file_in_the_tree():
    missing = [p for p in _canonical() if not (ROOT / p).is_file()]
    assert missing == []


def test_every_result_file_in_the_tree_is_in_the_manifest():
    canon = set(_canonical())
    files = [str(f.relative_to(ROOT)) for d in RESULT_DIRS for f in sorted((ROOT / d).rglob("*")) if f.is_file()]
    # MANIFEST.json itself, and the tuner's scratch databases (.gitignore) are no results
    unlisted = [f for f in files if f not in canon and not f.endswith("MANIFEST.json") and ".db" not in f]
    assert unlisted == [], "a commit that adds a result adds its entry: python tools/results_manifest.py add PATH"


def test_the_canonical_results_fit_their_share_of_the_tree():
    assert sum((ROOT / p).stat().st_size for p in _canonical()) <= RESULTS_BUDGET


def test_an_archived_name_is_never_reused_for_another_file():
    archive = load(ROOT)["archive"]
    bare = {p.removesuffix(".gz"): p for p in _canonical()}
    reused = [p for p in archive["paths"] if p.removesuffix(".gz") in bare
              and archive["renamed"].get(p) != bare[p.removesuffix(".gz")]]
    assert reused == []


def test_every_renamed_result_is_canonical_under_its_new_name():
    canon = set(_canonical())
    archive = load(ROOT)["archive"]
    assert len(archive["commit"]) == 40
    assert [new for new in archive["renamed"].values() if new not in canon] == []
    assert set(archive["renamed"]) <= set(archive["paths"])


def test_every_entry_says_what_it_shows_how_to_reproduce_it_and_where_and_when_it_was_measured():
    bad = [(e.get("path"), f) for e in entries(ROOT) for f in FIELDS if not str(e.get(f) or "").strip()]
    assert bad == []


def test_every_entry_names_the_commit_measured_or_says_how_git_inferred_it():
    bad = [e["path"] for e in entries(ROOT)
           if e["commit"] == "unknown" or ("inferred" in e and not e["inferred"].startswith("commit"))]
    assert not bad, f"no commit, or an inference that does not say what it inferred: {bad[:5]}"


def test_each_result_has_one_entry():
    paths = _canonical()
    assert sorted(paths) == sorted(set(paths))


def test_every_result_the_readme_the_docs_the_code_and_the_tests_cite_is_canonical():
    canon = _canonical()
    uncited = [(c, [f for f in files if not f.startswith(JOURNAL)]) for c, files in cited_in(ROOT, CITING, EXAMPLES).items()
               if not resolve(c, canon) and any(not f.startswith(JOURNAL) for f in files)]
    assert uncited == [], "add them to the manifest (tools/results_manifest.py add) or cite a canonical result"


def test_every_result_the_journal_cites_is_canonical_or_in_the_archive():
    canon, archived = _canonical(), load(ROOT)["archive"]["paths"]
    lost = [c for c, files in cited_in(ROOT, [JOURNAL]).items() if not resolve(c, canon) and not resolve(c, archived)]
    assert lost == []


def test_a_citation_names_its_alternatives_and_patterns_and_may_leave_out_gz():
    paths = ["benchmarks/results/h100_a_fp16.json", "benchmarks/results/h100_a_bf16.json.gz",
             "benchmarks/profiles/h100_p_fp16.json"]
    assert expand("h100_a_{fp16,bf16}.json") == ["h100_a_fp16.json", "h100_a_bf16.json"]
    assert resolve("h100_a_{fp16,bf16}.json", paths) == paths[:2]
    assert resolve("benchmarks/results/h100_a_*.json", paths) == paths[:2]
    assert resolve("h100_p_fp16.json", paths) == paths[2:]
    assert resolve("h100_a_fp32.json", paths) == []


@pytest.mark.parametrize("text, cited", [
    ("(benchmarks/results/h100_x_s1.json, _s2.json)", ["benchmarks/results/h100_x_s1.json"]),
    ("h100_{fp16,bf16}_y.json.gz and report_h100/results.json", ["h100_{fp16,bf16}_y.json.gz", "report_h100/results.json"]),
    ("a name cut by a line end: h100_z_\n// s18.json", []),
])
def test_citations_are_whole_file_names_with_their_extension(text, cited):
    assert citations(text) == cited
