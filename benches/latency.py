#!/usr/bin/env python3
"""From a condition to its page: fixtures streamed into `sigwatch run` on
stdin at wall-clock pace; for every alert, the time from the instant its
rule's condition and `for` held (its `starts_at` plus the rule's `for`) to
the notification's arrival on run's stdout.

    python3 benches/latency.py [--bin target/release/sigwatch] [--lead 120] FIXTURE...

Each fixture is replayed first (`sigwatch replay`) for the alerts and their
conditions, and read by `sigwatch explain --json` for each line's event time.
Then its lines go to `sigwatch run --listen none`: those more than `--lead`
seconds of event time before the first condition as fast as the pipe takes
them (a consumer catching up), the rest at the pace of their event times
(one event second per wall second). Prints p50 / p99 / max per detector
kind, and every alert with `--verbose`. Needs PyYAML (the rule pack's `for`
values). A benchmark, not a test: CI does not run it.
"""

import datetime
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import yaml


def arg(name, default):
    if name in sys.argv:
        i = sys.argv.index(name)
        v = sys.argv[i + 1]
        del sys.argv[i : i + 2]
        return v
    return default


BIN = arg("--bin", "target/release/sigwatch")
LEAD = float(arg("--lead", "120"))
VERBOSE = "--verbose" in sys.argv
FIXTURES = [a for a in sys.argv[1:] if not a.startswith("--")]
if not FIXTURES:
    sys.exit(__doc__)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ns(stamp):
    d = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return int(d.timestamp() * 1e9)


def dur(s):
    units = {"ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}
    for u in ("ms", "s", "m", "h"):
        if str(s).endswith(u) and str(s)[: -len(u)].replace(".", "").isdigit():
            return int(float(str(s)[: -len(u)]) * units[u])
    return 0


def rules():
    """rule id -> (detector kind, ns from condition to page)."""
    out = {"novel": ("novelty", 30 * 10**9)}
    for f in sorted(os.listdir(os.path.join(ROOT, "rules"))):
        if not f.endswith(".yaml"):
            continue
        doc = yaml.safe_load(open(os.path.join(ROOT, "rules", f))) or {}
        for r in doc.get("rules", []):
            detect = r.get("detect", {}) or {}
            kind = next(iter(detect), "count")
            # A persist alert starts when its run has lasted long enough:
            # only the rule's own `for` follows.
            out[r["id"]] = (kind, dur(r.get("for", "0s")))
    return out


def main():
    kinds = rules()
    lat = {}
    for fx in FIXTURES:
        text = open(fx, "rb").read().decode("utf-8", "replace").splitlines(keepends=True)
        rep = subprocess.run(
            [BIN, "replay", "--no-summary", "--log-level", "error", "--output", "json", fx],
            capture_output=True, text=True, check=True,
        ).stdout
        want = {}
        for l in rep.splitlines():
            n = json.loads(l)
            if n["state"] != "firing" or n.get("repeat"):
                continue
            kind, extra = kinds.get(n["rule"], ("count", 0))
            want.setdefault((n["rule"], n["group"], n["starts_at"]), (kind, ns(n["starts_at"]) + extra))
        ex = subprocess.run(
            [BIN, "explain", "--json"], input="".join(text), capture_output=True, text=True, check=True
        ).stdout.splitlines()
        times = []
        last = None
        for l in ex:
            t = json.loads(l).get("time")
            last = ns(t) if t else last
            times.append(last)
        e0 = min(d for _, d in want.values()) - int(LEAD * 1e9) if want else 0
        run = subprocess.Popen(
            [BIN, "run", "--listen", "none", "--log-level", "error", "--output", "json", "--no-links"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        arrivals = {}
        w0 = [None]

        def reader():
            for l in run.stdout:
                try:
                    n = json.loads(l)
                except ValueError:
                    continue
                if n.get("state") == "firing" and not n.get("repeat"):
                    arrivals.setdefault((n["rule"], n["group"], n["starts_at"]), time.monotonic())

        th = threading.Thread(target=reader)
        th.start()
        end = max(d for _, d in want.values()) if want else 0
        for line, t in zip(text, times):
            if t is not None and t > end + 5 * 10**9:
                break  # past the last condition: nothing left to time
            if t is not None and t >= e0:
                if w0[0] is None:
                    w0[0] = time.monotonic() - (t - e0) / 1e9
                delay = w0[0] + (t - e0) / 1e9 - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            run.stdin.write(line.encode())
            run.stdin.flush()
        # Let the last conditions come due before the input ends.
        if w0[0] is not None:
            wait = w0[0] + (end - e0) / 1e9 + 5 - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        run.stdin.close()
        run.wait()
        th.join()
        for key, (kind, due) in want.items():
            if due < e0 or key not in arrivals or w0[0] is None:
                continue
            ms = (arrivals[key] - (w0[0] + (due - e0) / 1e9)) * 1000
            lat.setdefault(kind, []).append(ms)
            if VERBOSE:
                print(f"{os.path.basename(fx)} {key[0]} {key[1]} {ms:.0f} ms")
        missing = [k for k, (_, d) in want.items() if d >= e0 and k not in arrivals]
        if missing:
            print(f"{os.path.basename(fx)}: {len(missing)} alert(s) of the replay not paged live: {missing[:3]}")
    print(f"{'detector':<10} {'alerts':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for kind, v in sorted(lat.items()):
        v.sort()
        p99 = v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))]
        print(f"{kind:<10} {len(v):>6} {statistics.median(v):>8.0f} {p99:>8.0f} {max(v):>8.0f}")


main()
