#!/usr/bin/env python3
"""Grouping accuracy of sigwatch's template miner on LogHub-2k.

    git clone --depth 1 https://github.com/logpai/loghub /tmp/loghub
    cargo build --release
    python3 benches/loghub_ga.py /tmp/loghub [target/release/sigwatch]

Grouping accuracy (GA; Zhu et al., "Tools and Benchmarks for Automated Log
Parsing", ICSE-SEIP 2019): a line is grouped correctly iff the set of lines
sharing its template is exactly the set of lines sharing its true event
(`EventId` of `<S>_2k.log_structured.csv`). Each raw `<S>_2k.log` is fed to
`sigwatch templates --lines --json` as is — headers and all, no per-system
setting — and the table gives GA per system and their mean.

`mined` is the GA of the lines novelty mines (those with a level in
`--levels`, by default novelty's: debug, info, warn, error, fatal), over
those lines only (the true events restricted to them); `strict` counts a
line novelty does not mine as wrong, so a system whose lines carry no level
scores 0 there. `mined` is averaged over the systems with a mined line.

    --levels warn,error,fatal   which levels count as mined

LogHub (Zhu et al., ISSRE 2023; https://github.com/logpai/loghub) may be
used for research with a citation; it is not copied into this repository.
"""
import collections
import csv
import json
import os
import subprocess
import sys

SYSTEMS = ["Android", "Apache", "BGL", "HDFS", "HPC", "Hadoop", "HealthApp", "Linux", "Mac",
           "OpenSSH", "OpenStack", "Proxifier", "Spark", "Thunderbird", "Windows", "Zookeeper"]


def ga(truth, found):
    """Grouping accuracy of `found` (a group label per line, None: not
    grouped) against `truth`."""
    by_truth = collections.defaultdict(set)
    by_found = collections.defaultdict(set)
    for i, (t, f) in enumerate(zip(truth, found)):
        by_truth[t].add(i)
        if f is not None:
            by_found[f].add(i)
    ok = 0
    for i, (t, f) in enumerate(zip(truth, found)):
        if f is not None and by_found[f] == by_truth[t]:
            ok += 1
    return ok / len(truth) if truth else 0.0


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("binary", nargs="?", default="target/release/sigwatch")
    ap.add_argument("--levels", default="debug,info,warn,error,fatal")
    opts = ap.parse_args()
    root, binary = opts.root, opts.binary
    levels = set(opts.levels.split(","))
    verbose = os.environ.get("VERBOSE")
    rows = []
    print(f"{'system':<12} {'GA':>6} {'mined':>6} {'strict':>6} {'templates':>9} {'events':>6} {'mined lines':>11}")
    for s in SYSTEMS:
        log = os.path.join(root, s, f"{s}_2k.log")
        truth = [r["EventId"] for r in csv.DictReader(open(log + "_structured.csv", encoding="utf-8", errors="replace"))]
        extra = os.environ.get("SIGWATCH_ARGS", "").split()
        out = subprocess.run([binary, "templates", "--lines", "--json", "--max-templates", "100000", *extra, log],
                             capture_output=True, check=True).stdout.decode("utf-8", "replace")
        got = [json.loads(l) for l in out.splitlines() if l.strip()]
        if len(got) != len(truth):
            print(f"{s:<12} line count {len(got)} != {len(truth)}")
            continue
        found = [g["template"] for g in got]
        mined = [g["template"] if g["level"] in levels else None for g in got]
        keep = [i for i, g in enumerate(got) if g["level"] in levels]
        a, strict = ga(truth, found), ga(truth, mined)
        m = ga([truth[i] for i in keep], [found[i] for i in keep]) if keep else None
        rows.append((a, m, strict))
        shown = f"{m:6.3f}" if m is not None else f"{'-':>6}"
        print(f"{s:<12} {a:6.3f} {shown} {strict:6.3f} {len(set(found)):9d} {len(set(truth)):6d} {len(keep):11d}")
        if verbose:
            # The true events split or merged, with an example line each.
            by_truth = collections.defaultdict(set)
            by_found = collections.defaultdict(set)
            for i, (t, f) in enumerate(zip(truth, found)):
                by_truth[t].add(i)
                by_found[f].add(i)
            bad = sorted(((t, ids) for t, ids in by_truth.items()
                          if any(by_found[found[i]] != ids for i in ids)), key=lambda x: -len(x[1]))
            for t, ids in bad[:int(verbose) if verbose.isdigit() else 5]:
                groups = collections.Counter(found[i] for i in ids)
                i = min(ids)
                merged = [f for f in groups if len(by_found[f] - ids) > 0]
                print(f"    {t} ({len(ids)} lines) in {len(groups)} template(s){', merged with others' if merged else ''}: {got[i]['text'][:110]}")
                for f, _ in groups.most_common(3):
                    j = min(by_found[f])
                    print(f"        t{f}: {got[j]['text'][:110]}")
    if rows:
        ms = [r[1] for r in rows if r[1] is not None] or [0.0]
        print(f"{'mean':<12} {sum(r[0] for r in rows) / len(rows):6.3f} {sum(ms) / len(ms):6.3f}"
              f" {sum(r[2] for r in rows) / len(rows):6.3f}")
        print(f"{'lowest':<12} {min(r[0] for r in rows):6.3f} {min(ms):6.3f} {min(r[2] for r in rows):6.3f}")


if __name__ == "__main__":
    main()
