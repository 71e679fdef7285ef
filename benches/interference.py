#!/usr/bin/env python3
"""Does mining one system's lines depend on what other systems logged
before them in the same stream? Needs no labels: each system's 2k sample
is mined alone, then after a prefix of other logs (the other systems of
its part and lnav's test logs, in one stream), and the two partitions of
its own lines are compared. Agreement is grouping accuracy with the lone
run as truth: 1.0 means the prefix changed nothing. Splits counts the
system's lone templates whose lines the stream run spreads over more than
one template; merges counts stream templates that join lines of two lone
templates, or of the system and the prefix.

    python3 benches/interference.py DATA [--sigwatch BIN] [--part dev|held|all]
"""
import argparse
import collections
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import generality as g  # noqa: E402


def prefix_lines(data, systems, skip):
    out = []
    for s in systems:
        if s == skip:
            continue
        for _, log, _ in g.revisions(data, s):
            out += g.read_lines(log)
            break
    for f in sorted(glob.glob(os.path.join(data, "tstack+lnav", "test", "logfile_*"))):
        try:
            with open(f, encoding="utf-8") as fh:
                out += fh.read().splitlines()
        except (UnicodeDecodeError, IsADirectoryError):
            continue
    return out


def mine(binary, lines):
    import tempfile
    tmp = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8")
    tmp.write("\n".join(lines) + "\n")
    tmp.close()
    try:
        return g.sigwatch_groups(binary, tmp.name)
    finally:
        os.unlink(tmp.name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--sigwatch", default="target/release/sigwatch")
    ap.add_argument("--part", default="dev", choices=["dev", "held", "all"])
    ap.add_argument("--show", type=int, default=0)
    a = ap.parse_args()
    parts = ["dev", "held"] if a.part == "all" else [a.part]
    systems = [s for s in g.SYSTEMS if g.part_of(s) in parts]
    print("| system | lines | agreement | lone templates | split | merged across systems |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in systems:
        revs = list(g.revisions(a.data, s))
        if not revs:
            continue
        own = g.read_lines(revs[0][1])
        pre = prefix_lines(a.data, systems, s)
        alone = mine(a.sigwatch, own)
        stream = mine(a.sigwatch, pre + own)
        if len(alone) != len(own) or len(stream) != len(pre) + len(own):
            print(f"| {s} | line count differs | | | | |")
            continue
        mine_part = stream[len(pre):]
        spread = collections.defaultdict(set)
        for x, y in zip(alone, mine_part):
            spread[x].add(y)
        split = sum(1 for v in spread.values() if len(v) > 1)
        pre_ids = set(stream[:len(pre)])
        merged = len(set(mine_part) & pre_ids)
        print(f"| {s} | {len(own)} | {g.ga(alone, mine_part):.3f} | {len(spread)} | {split} | {merged} |")
        shown = 0
        for x, ys in spread.items():
            if len(ys) > 1 and shown < a.show:
                shown += 1
                ex = {}
                for i, (p, q) in enumerate(zip(alone, mine_part)):
                    if p == x:
                        ex.setdefault(q, own[i])
                print(f"split {s} {x}:", *[f"\n  {k}: {v}" for k, v in ex.items()], file=sys.stderr)


if __name__ == "__main__":
    main()
