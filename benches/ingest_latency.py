#!/usr/bin/env python3
"""From a push to its page: latency of `sigwatch run --ingest`.

    python3 benches/ingest_latency.py [PUSHES] [--bin target/release/sigwatch] [--rate 20] [--durable]

Starts `run --ingest 127.0.0.1:P` and pushes, PUSHES times at RATE a second,
one Loki JSON push holding an egress "No space left on the resource." line of
a node not seen before, stamped with the wall clock (as a live shipper sends
it); the per-node rule `egress.disk_full` pages on the first such line. For
each push: the time from sending it to its notification's arrival on
sigwatch's stdout. Prints p50, p99 and max, and the same for the push's own
answer (its round trip). `--durable` runs with a `--state-dir` (a temporary
one), so each answer waits for the ingest log's fsync.
"""
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


POSITIONAL = [a for i, a in enumerate(sys.argv[1:], 1)
              if not a.startswith("--") and not sys.argv[i - 1].startswith("--")]
PUSHES = int(POSITIONAL[0]) if POSITIONAL else 200
BIN = arg("--bin", os.path.join(ROOT, "target/release/sigwatch"))
RATE = float(arg("--rate", "20"))
DURABLE = "--durable" in sys.argv


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    if not os.access(BIN, os.X_OK):
        sys.exit(f"{BIN} not found: cargo build --release")
    port = free_port()
    state = tempfile.TemporaryDirectory()
    extra = ["--state-dir", state.name] if DURABLE else []
    p = subprocess.Popen([BIN, "run", "--log-level", "error", "--listen", "none",
                          f"--ingest=127.0.0.1:{port}", *extra],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    arrived = {}

    def read():
        for line in p.stdout:
            try:
                n = json.loads(line)
            except ValueError:
                continue
            if n.get("state") == "firing" and n.get("rule") == "egress.disk_full":
                arrived.setdefault(n.get("group"), time.monotonic())

    threading.Thread(target=read, daemon=True).start()
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sent, answered = {}, []
    try:
        for i in range(PUSHES):
            node = f"NE_lat{i:06d}"
            ts = time.time_ns()
            line = json.dumps({"level": "error", "ts": ts / 1e9, "logger": "egress",
                               "caller": "pipeline/watch.go:235",
                               "msg": "No space left on the resource.", "nodeID": node,
                               "egressID": f"EG_{i}"})
            body = json.dumps({"streams": [{"stream": {"job": "bench"},
                                            "values": [[str(ts), line]]}]})
            t0 = time.monotonic()
            conn.request("POST", "/loki/api/v1/push", body=body,
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            answered.append(time.monotonic() - t0)
            if r.status != 204:
                sys.exit(f"push answered {r.status}")
            sent[node] = t0
            time.sleep(max(0.0, 1.0 / RATE - (time.monotonic() - t0)))
        deadline = time.monotonic() + 30
        while len(arrived) < PUSHES and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        p.kill()
        p.wait()
    lat = [arrived[n] - t for n, t in sent.items() if n in arrived]
    missing = PUSHES - len(lat)
    ms = lambda x: f"{x * 1000:8.1f} ms"  # noqa: E731
    mode = "with --state-dir (fsync before each answer)" if DURABLE else "in memory"
    print(f"{PUSHES} pushes at {RATE:g}/s, {mode}, {missing} without a page within 30 s; {BIN}")
    print(f"push -> page    p50 {ms(statistics.median(lat))}  p99 {ms(pct(lat, 0.99))}  max {ms(max(lat))}")
    print(f"push answered   p50 {ms(statistics.median(answered))}  p99 {ms(pct(answered, 0.99))}  max {ms(max(answered))}")


if __name__ == "__main__":
    main()
