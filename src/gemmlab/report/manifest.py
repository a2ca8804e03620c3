"""The canonical results: ``benchmarks/results/MANIFEST.json`` lists every measurement that the
README, the docs, the report and the code cite, each with what it shows, the command that
reproduces it, the commit measured, the GPU and the date. Everything else left the tree and is
kept by git: the manifest's ``archive`` names the commit where those files last were.

Why a manifest: the results folder had grown to hundreds of files named by the session that took
them, and a reader could not tell the current figures from old ones. The docs' tables are
generated from the manifest's entries (``report.docs``), and a test holds every citation in the
tree to it (tests/test_results_manifest.py).

A citation is a file name (``h100_fp32.json``) or a path under ``benchmarks/results/`` or
``benchmarks/profiles/``, possibly with ``*`` or ``{a,b}``; it may leave out the ``.gz`` of a
result stored gzipped (those over ``GZIP_OVER`` bytes are, to keep the tree small).
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import re
from pathlib import Path

MANIFEST = "benchmarks/results/MANIFEST.json"
RESULT_DIRS = ("benchmarks/results", "benchmarks/profiles")
# what every entry says ("unknown" where the file does not record it); "added_in", the commit that
# brought the file into the tree, is added where git knows it, and "inferred" where the commit is
# git's answer rather than the file's (tools/results_manifest.py infer)
FIELDS = ("path", "shows", "command", "commit", "gpu", "date")
GZIP_OVER = 100_000

# a result named in text: a path under one of RESULT_DIRS, or a bare name as the GPU runs write
# them (h100_..., h200_..., report_h100/..., tune_strategies_...), with its extension
_EXT = r"\.(?:json|csv|sass|md|html|png)(?:\.gz)?"
CITATION = re.compile(
    r"benchmarks/(?:results|profiles)/[A-Za-z0-9_{},*.\-/]+?" + _EXT + r"(?![A-Za-z0-9_])"
    r"|(?<![A-Za-z0-9_/.\-])(?:report_h100/|h100|h200|tune_strategies_)[A-Za-z0-9_{},*.\-]*?" + _EXT
    + r"(?![A-Za-z0-9_])")


def load(root: Path) -> dict:
    """The manifest document of the checkout at ``root``."""
    return json.loads((Path(root) / MANIFEST).read_text(encoding="utf-8"))


def entries(root: Path) -> list[dict]:
    return load(root)["results"]


def entry(root: Path, path: str) -> dict:
    """The manifest's entry of ``path`` (relative to the checkout); KeyError naming it if none."""
    for e in entries(root):
        if e["path"] == path:
            return e
    raise KeyError(f"{path} is not a canonical result (not in {MANIFEST})")


def read_result(path: Path) -> object:
    """A result file's JSON, gzipped or not."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def citations(text: str) -> list[str]:
    """The results ``text`` names, as written (patterns included), in order, each once."""
    out: list[str] = []
    for m in CITATION.finditer(text):
        if m.group(0) not in out and m.group(0) != MANIFEST:   # the list itself is no result
            out.append(m.group(0))
    return out


def expand(citation: str) -> list[str]:
    """``{a,b}`` alternatives spelled out: ``h100_{fp16,bf16}.json`` -> both names."""
    m = re.search(r"\{([^{}]*)\}", citation)
    if not m:
        return [citation]
    return [x for alt in m.group(1).split(",") for x in expand(citation[:m.start()] + alt + citation[m.end():])]


def resolve(citation: str, paths) -> list[str]:
    """The paths (relative to the checkout) that ``citation`` names: a path ends with the cited
    name, ``*`` matching any run of characters, with or without the ``.gz`` of a gzipped file."""
    out = []
    for name in expand(citation):
        pats = (name, "*/" + name, name + ".gz", "*/" + name + ".gz")
        out += [p for p in paths if p not in out and any(fnmatch.fnmatchcase(p, pat) for pat in pats)]
    return out


def cited_in(root: Path, tops, skip=()) -> dict[str, list[str]]:
    """Every citation in the files under ``tops`` (folders or files, relative to ``root``) -> the
    files (relative) that make it; binary files, build metadata and the files ``skip`` names are
    not read."""
    root = Path(root)
    out: dict[str, list[str]] = {}
    for top in tops:
        base = root / top
        files = [base] if base.is_file() else sorted(base.rglob("*")) if base.is_dir() else []
        for f in files:
            rel = f.relative_to(root)
            if not f.is_file() or str(rel) in skip or any(p.endswith((".egg-info", "__pycache__")) for p in rel.parts):
                continue
            try:
                text = f.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue   # a binary file cites nothing
            for c in citations(text):
                out.setdefault(c, []).append(str(rel))
    return out
