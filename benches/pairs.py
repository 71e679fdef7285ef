#!/usr/bin/env python3
"""Paired runs: sigwatch against its peer on the same corpus, A and B
alternating, so the VM's drift hits both alike. For each pair, the ratio of
every round's A to its B (wall time, and CPU time: user + system of the whole
command, pipes included), then the median and min–max of those ratios.

    python3 benches/pairs.py [--runs 7] [--bin target/release/sigwatch] CORPUS...

Pairs, per corpus:
  replay / rg          sigwatch replay FILE  vs  rg -j1 --no-mmap -F -f LITERALS FILE
  replay --no-novelty / rg
  novelty on / off     sigwatch replay FILE  vs  sigwatch replay --no-novelty FILE
  cat | run / cat | wc -l
                       cat FILE | sigwatch run --listen none  vs  cat FILE | wc -l
  cat | run / replay   the pipe against the file: the same detection

LITERALS is `sigwatch check --literals` (the pack's literals, as a grep for the
same signatures would use). A benchmark, not a test: CI does not run it.
"""

import os
import resource
import statistics
import subprocess
import sys
import time


def arg(name, default):
    if name in sys.argv:
        i = sys.argv.index(name)
        v = sys.argv[i + 1]
        del sys.argv[i : i + 2]
        return v
    return default


RUNS = int(arg("--runs", "7"))
BIN = arg("--bin", "target/release/sigwatch")
CORPORA = sys.argv[1:]
if not CORPORA:
    sys.exit(__doc__)


def timed(cmd):
    """Wall and CPU seconds of a shell command (its whole process tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(
        ["bash", "-c", "set -o pipefail; " + cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 1):  # rg: 1 when nothing matched
        sys.exit(f"failed ({p.returncode}): {cmd}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def pair(a, b):
    """Rounds of A then B (after one warm-up of each); ratios per round."""
    timed(a)
    timed(b)
    walls, cpus, wa, wb = [], [], [], []
    for _ in range(RUNS):
        a_wall, a_cpu = timed(a)
        b_wall, b_cpu = timed(b)
        walls.append(a_wall / b_wall)
        cpus.append(a_cpu / b_cpu)
        wa.append(a_wall)
        wb.append(b_wall)
    return walls, cpus, statistics.median(wa), statistics.median(wb)


def show(name, corpus, r):
    walls, cpus, wa, wb = r
    print(
        f"{name:<34} {os.path.basename(corpus):<32} "
        f"{statistics.median(walls):5.2f} ({min(walls):.2f}–{max(walls):.2f})  "
        f"{statistics.median(cpus):5.2f} ({min(cpus):.2f}–{max(cpus):.2f})  "
        f"{wa:6.2f} s {wb:6.2f} s",
        flush=True,
    )


lits = f"{os.path.dirname(CORPORA[0]) or '.'}/pairs-literals.txt"
with open(lits, "w") as f:
    subprocess.run([BIN, "check", "--literals"], stdout=f, check=True)
q = "--log-level error --no-summary"
print(f"{RUNS} rounds each; ratio median (min–max) of wall, then of CPU; medians of A and B")
print(f"{'pair':<34} {'corpus':<32} {'wall ratio':<18} {'CPU ratio':<18} A / B")
for c in CORPORA:
    rg = f"rg -j1 --no-mmap -F -f {lits} {c} > /dev/null"
    show("replay / rg", c, pair(f"{BIN} replay {q} {c}", rg))
    show("replay --no-novelty / rg", c, pair(f"{BIN} replay --no-novelty {q} {c}", rg))
    show("novelty on / off", c, pair(f"{BIN} replay {q} {c}", f"{BIN} replay --no-novelty {q} {c}"))
    show(
        "cat | run / cat | wc -l",
        c,
        pair(f"cat {c} | {BIN} run --listen none --log-level error", f"cat {c} | wc -l"),
    )
    show(
        "cat | run / replay",
        c,
        pair(f"cat {c} | {BIN} run --listen none --log-level error", f"{BIN} replay {q} {c}"),
    )
