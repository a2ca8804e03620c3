"""Keep benchmarks/results/MANIFEST.json, the list of canonical results (gemmlab.report.manifest).

    python tools/results_manifest.py add PATH... --shows "what it shows"
    python tools/results_manifest.py refs          # every citation in the tree and what it names
    python tools/results_manifest.py infer         # git's commit for the files that do not record theirs

``add`` writes (or rewrites) a result's entry with what the file records about itself: the
commit, the GPU and the date it was measured, and the command that reproduces it, derived from
its settings ("unknown" where the file does not say; --command gives it then); a result over
100 kB is gzipped first, as the manifest's rule asks. A commit that adds a result adds its entry:
tests/test_results_manifest.py fails on a result file the manifest does not list. ``refs`` is what
to read before removing a result: a file something cites is canonical.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

from gemmlab.core.shapes import SUITES, fmt_shape, random_shapes
from gemmlab.measure.timing import Settings
from gemmlab.report.manifest import GZIP_OVER, MANIFEST, cited_in, load, read_result, resolve

ROOT = Path(__file__).resolve().parent.parent
# where citations are held to the manifest (the journal may also cite the archive); the manifest's
# test cites made-up names as its examples
CITING = ("README.md", "docs", "src", "tests", "tools")
EXAMPLES = ("tests/test_results_manifest.py",)
JOURNAL = "docs/journal"
# an entry's keys, in the order the manifest writes them
ENTRY_KEYS = ("path", "shows", "command", "commit", "gpu", "date", "inferred", "added_in")


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def added_in(path: str) -> str | None:
    """The commit that first brought ``path`` into the tree (None if git does not know it)."""
    out = _git("log", "--diff-filter=A", "--format=%h", "--", path).splitlines()
    return out[-1] if out else None


def inferred(path: str, date: str) -> dict:
    """Where a result does not record the commit it measured, git's best answer, said as such
    (the ``inferred`` field): the last commit before the file's own time (a date alone: the last of
    that day) among those before the commit that first brought the file (renames followed: it was
    measured before it was added), else, with no time either, that commit's parent, and its date
    as the latest the measurement can be. {} where git knows neither."""
    first = _git("log", "--follow", "--diff-filter=A", "--format=%h %cI", "--", path).splitlines()
    added, when = first[-1].split() if first else (None, None)
    if re.match(r"\d{4}-\d{2}-\d{2}", date or ""):
        until = date if "T" in date else f"{date}T23:59:59+00:00"
        sha = _git("rev-list", "-1", f"--before={until}", f"{added}^" if added else "HEAD")
        if sha:
            what = "its time" if "T" in date else "its date (the last commit of that day)"
            return {"commit": sha[:7], "inferred": f"commit: the last commit before {what} and before the one that "
                                                   f"added it; the file does not record it"}
        return {}
    parent = _git("rev-parse", "--short=7", f"{added}^") if added else ""
    if not parent:
        return {}
    return {"commit": parent, "date": f"{when[:10]} or earlier",
            "inferred": f"commit and date: the file records neither; measured at {parent} or before, added in {added} "
                        f"on {when[:10]}"}


def _first(*values):
    return next((v for v in values if v not in (None, "", [])), None)


def _suite_of(shapes) -> str | None:
    got = {tuple(s) for s in shapes}
    for name, members in SUITES.items():
        if got == set(members):
            return name
    for seed in range(4):
        if got == set(random_shapes(len(got), seed)):
            return f"random:{len(got)}@{seed}"
    return None


def _timing_flags(timing: dict) -> list[str]:
    """The timing options that differ from today's defaults (what the command must say to time
    the same way)."""
    d, out = Settings(), []
    for key, flag in (("l2", "--l2"), ("order", "--order"), ("min_samples", "--min-samples"),
                      ("max_samples", "--max-samples"), ("spin_us", "--spin-us"), ("spin", "--spin")):
        if key in timing and timing[key] != getattr(d, key):
            v = timing[key]
            out.append(f"{flag} {v:g}" if isinstance(v, float) else f"{flag} {v}")
    if timing.get("sustained_s"):
        out.append(f"--sustained {timing['sustained_s']:g} --sustained-rounds {timing.get('sustained_rounds', 4)}")
    return out


def _bench_command(doc: dict, path: str) -> str:
    s = doc.get("settings") or {}
    words = ["gemmlab bench"] + list(s.get("rungs") or [])
    shapes = s.get("shapes")
    if shapes:
        suite = _suite_of(shapes)
        words.append(f"--suite {suite}" if suite else "--shapes " + ",".join(fmt_shape(x) for x in shapes))
    words.append(f"--dtype {s.get('dtype', 'fp32')}")
    if s.get("compute_precision") and s["compute_precision"] != s.get("dtype"):
        words.append(f"--precision {s['compute_precision']}")
    if s.get("peers"):
        words.append("--peers " + ",".join(s["peers"]))
    cfg = s.get("config") or {}
    cfg = cfg.get("values") or cfg.get("preset") if "values" in cfg or "preset" in cfg else cfg
    if cfg:
        words.append("--config " + (cfg if isinstance(cfg, str) else ",".join(f"{k}={v}" for k, v in cfg.items())))
    words += _timing_flags(s.get("timing") or {})
    return " ".join(words + [f"--json {path.removesuffix('.gz')}"])


def _tune_command(doc: dict, path: str) -> str:
    k = doc["key"]
    dtype, _, prec = str(k.get("dtype", "")).partition(":")
    words = [f"gemmlab tune {k['rung']} --shape {k['shape']} --dtype {dtype}"]
    if prec:
        words.append(f"--precision {prec}")
    words.append(f"--layout {k.get('layout', 'rr')} --strategy {doc.get('strategy')} --budget {doc.get('evaluated')}")
    return " ".join(words + [f"--json {path.removesuffix('.gz')}"])


def derive(path: str) -> dict:
    """What a result file says about itself, in the manifest's fields."""
    doc = read_result(ROOT / path) if path.endswith((".json", ".json.gz")) else {}
    doc = doc if isinstance(doc, dict) else {}
    # a report's results.json keeps its bench's environment; tune_strategies its problems' keys
    first = (doc.get("problems") or [{}])[0]
    env = doc.get("env") if "git_commit" in (doc.get("env") or {}) else ((doc.get("bench") or {}).get("env") or {})
    key = doc.get("key") or first.get("key") or {}
    run = str(doc.get("run") or (first.get("best") or {}).get("run") or "")
    run_date = (f"{run[:4]}-{run[4:6]}-{run[6:8]}T{run[9:11]}:{run[11:13]}:{run[13:15]}"
                if re.match(r"\d{8}T\d{6}", run) else None)
    name = Path(path).name
    by_name = next((f"{g.upper()} (the file's name says)" for g in ("h200", "h100") if name.startswith(g + "_")), None)
    gpu = _first(env.get("gpu_name"), key.get("gpu_name"), doc.get("gpu_name"), doc.get("gpu"), doc.get("device"),
                 by_name)
    commit = _first(env.get("git_commit"), doc.get("git_commit"), doc.get("gemmlab_commit"), doc.get("commit"),
                    env.get("git_commit_note"), env.get("commit_note"))
    date = _first(doc.get("timestamp"), doc.get("measured"), doc.get("date"), run_date,
                  ((env.get("clocks") or {}).get("time")))
    if "problems" in doc and "target" in doc:
        command = "python benchmarks/tune_strategies.py"
    elif "bench" in doc and "sweep" in doc:
        command = f"gemmlab report --out {Path(path).parent}"
    elif "settings" in doc and "results" in doc and doc.get("kind") != "overhead":
        command = _bench_command(doc, path)
    elif doc.get("kind") == "overhead":
        s = doc["settings"]
        command = (f"gemmlab bench --overhead {s.get('kernel', 'auto')} --shape {fmt_shape(s['shape'])} "
                   f"--dtype {s['dtype']} --json {path}")
    elif "key" in doc and "best" in doc:
        command = _tune_command(doc, path)
    elif doc.get("format") and doc.get("records") is not None:
        smp = doc.get("sample") or {}
        what = (f" --suite {smp['suite']}" if smp.get("suite") else f" --sample {smp['n']}@{smp['seed']}"
                + ("" if smp.get("suites", True) else " --no-suites") if "n" in smp else "")
        dtypes = sorted({r["dtype"] for r in doc["records"]})
        command = (f"gemmlab tune auto --dtype {','.join(dtypes) or 'unknown'}{what}"
                   f" --json {path.removesuffix('.gz')}")
    else:
        command = _first(doc.get("script"), "; ".join(doc.get("commands") or []),
                         doc.get("source") if str(doc.get("source", "")).startswith(("gemmlab ", "python ")) else None)
    return {"path": path, "command": command or "unknown", "commit": str(commit or "unknown"),
            "gpu": str(gpu or "unknown"), "date": str(date or "unknown")}


def shows_of(path: str) -> str:
    """A sentence of what the file holds, from its own fields (for entries nobody has described)."""
    doc = read_result(ROOT / path) if path.endswith((".json", ".json.gz")) else {}
    doc = doc if isinstance(doc, dict) else {}
    if "key" in doc and "best" in doc:
        k, b = doc["key"], doc["best"] or {}
        vs = f", {b['vs_cublas']:.3f}x cuBLAS" if b.get("vs_cublas") else ""
        return (f"the tuner on rung {k['rung']} ({k['dtype']}, {k.get('layout', 'rr')}) at {k['shape']}: "
                f"{doc.get('evaluated')} configurations measured ({doc.get('strategy')}); best {b.get('key')}{vs}")
    if "settings" in doc and "results" in doc:
        s = doc["settings"]
        ks = [r["kernel"] for r in doc["results"]]
        rungs = ", ".join(dict.fromkeys(k for k, r in zip(ks, doc["results"]) if not r.get("peer")))
        peers = ", ".join(dict.fromkeys(k for k, r in zip(ks, doc["results"]) if r.get("peer")))
        shapes = sorted({f"{r['M']}x{r['N']}x{r['K']}" for r in doc["results"] if "M" in r})
        prec = s.get("compute_precision") or s.get("dtype")
        where = ", ".join(shapes) if len(shapes) <= 4 else f"{len(shapes)} shapes"
        return f"gemmlab bench: {rungs} beside {peers or 'no peer'}, {s.get('dtype')} as {prec}, at {where}"
    text = str(_first(doc.get("what"), doc.get("note"), doc.get("source"), "") or "")
    return text.split(". ")[0][:300] if text else "unknown"


def add(paths: list[str], shows: str | None, command: str | None) -> None:
    man = load(ROOT)
    by_path = {e["path"]: e for e in man["results"]}
    for p in paths:
        p = str(Path(p).resolve().relative_to(ROOT)) if Path(p).is_absolute() else p
        if not p.endswith(".gz") and p.endswith(".json") and (ROOT / p).stat().st_size > GZIP_OVER:
            data = (ROOT / p).read_bytes()
            (ROOT / (p + ".gz")).write_bytes(gzip.compress(data, mtime=0))
            (ROOT / p).unlink()
            p += ".gz"
            print(f"gzipped it: {p}")
        e = {**{k: v for k, v in by_path.get(p, {}).items() if k != "inferred"}, **derive(p)}
        if e["commit"] == "unknown":
            e.update(inferred(p, e["date"]))
        e["shows"] = shows or by_path.get(p, {}).get("shows") or shows_of(p)
        if command:
            e["command"] = command
        if added_in(p):
            e["added_in"] = added_in(p)
        by_path[p] = {k: e[k] for k in ENTRY_KEYS if k in e}
        print(json.dumps(by_path[p], indent=1))
    man["results"] = sorted(by_path.values(), key=lambda e: e["path"])
    (ROOT / MANIFEST).write_text(json.dumps(man, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def infer() -> int:
    """``inferred`` for every entry without a recorded commit (its other fields kept)."""
    man = load(ROOT)
    done = 0
    for e in man["results"]:
        if e.get("commit", "unknown") == "unknown" or "inferred" in e:
            got = inferred(e["path"], "unknown" if e["date"].endswith(" or earlier") else e["date"])
            if got:
                e.update(got)
                done += 1
    man["results"] = [{k: e[k] for k in ENTRY_KEYS if k in e} for e in man["results"]]
    (ROOT / MANIFEST).write_text(json.dumps(man, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    left = sum(e["commit"] == "unknown" for e in man["results"])
    print(f"inferred the commit of {done} entries; {left} still unknown")
    return 0


def refs() -> int:
    man = load(ROOT)
    canon = [e["path"] for e in man["results"]]
    archived = (man.get("archive") or {}).get("paths", [])
    bad = 0
    for c, files in sorted(cited_in(ROOT, CITING, EXAMPLES).items()):
        hit = resolve(c, canon)
        old = [] if hit else resolve(c, archived)
        where = "canonical" if hit else ("archived" if old else "NOTHING")
        if not hit and not (old and all(f.startswith(JOURNAL) for f in files)):
            bad += 1
        print(f"{where:9} {c}  <- {', '.join(sorted(set(files)))}")
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("add", help="add or refresh the entries of result files")
    a.add_argument("paths", nargs="+")
    a.add_argument("--shows", default=None, help="what the result shows (one sentence)")
    a.add_argument("--command", default=None, help="the command that reproduces it, where the file does not say")
    sub.add_parser("refs", help="every citation of a result and what it names; exit 1 if one names nothing canonical")
    sub.add_parser("infer", help="give every entry whose file does not record its commit git's inferred one")
    args = ap.parse_args(argv)
    if args.cmd == "add":
        add(args.paths, args.shows, args.command)
        return 0
    if args.cmd == "infer":
        return infer()
    return refs()


if __name__ == "__main__":
    sys.exit(main())
