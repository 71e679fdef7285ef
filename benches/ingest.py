#!/usr/bin/env python3
"""Push throughput of `sigwatch run --ingest`, against the pipe in the same run.

    python3 benches/ingest.py [LINES] [--batch 1000] [--runs 3] [--bin target/release/sigwatch]

Generates LINES lines of the `keyed` corpus (benches/gen.py; every line has its
nodeID, about 1 % signatures), encodes them once as Loki push bodies
(logproto.PushRequest, snappy-compressed: literal-only snappy blocks, which every
snappy decoder takes) and as OTLP/HTTP ExportLogsServiceRequest bodies, BATCH
lines a push, then per run:

- starts `sigwatch run --ingest 127.0.0.1:P --listen 127.0.0.1:Q` (notifications to
  /dev/null),
  sends every body over one keep-alive connection (a shipper's one output) and
  waits until `/metrics` counts every line processed; the time from the first
  push to that count is the run's time (the count is published once a second,
  so LINES should make a run last several seconds);
- for the peer, `sigwatch run --listen 127.0.0.1:Q < FILE` on the
  same lines (the pipe path), to its exit.

Prints lines/s and peak RSS for each (the Loki push also with --state-dir,
its write-ahead log fsynced before each answer) and the push/pipe time ratio,
median and min–max over the runs. Full detection (the built-in pack, novelty on) in both.
"""
import http.client
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


POSITIONAL = [a for i, a in enumerate(sys.argv[1:], 1)
              if not a.startswith("--") and not sys.argv[i - 1].startswith("--")]
LINES = int(POSITIONAL[0]) if POSITIONAL else 1_000_000
BATCH = int(arg("--batch", "1000"))
RUNS = int(arg("--runs", "3"))
BIN = arg("--bin", os.path.join(ROOT, "target/release/sigwatch"))


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    key = varint((num << 3) | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def snappy_literal(data):
    """A snappy block holding `data` as literal elements only."""
    out = bytearray(varint(len(data)))
    for i in range(0, len(data), 65536):
        chunk = data[i:i + 65536]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 256:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + struct.pack("<H", n)
        out += chunk
    return bytes(out)


def loki_body(rows):
    entries = b""
    for ts, line in rows:
        stamp = field(1, 0, varint(ts // 1_000_000_000)) + field(2, 0, varint(ts % 1_000_000_000))
        entries += field(2, 2, field(1, 2, stamp) + field(2, 2, line.encode()))
    stream = field(1, 2, b'{job="bench", namespace="media"}') + entries
    return snappy_literal(field(1, 2, stream))


def otlp_body(rows):
    def kv(k, v):
        return field(1, 2, k.encode()) + field(2, 2, field(1, 2, v.encode()))
    records = b""
    for ts, line in rows:
        records += field(2, 2, field(1, 1, struct.pack("<Q", ts)) + field(5, 2, field(1, 2, line.encode())))
    resource = field(1, 2, kv("k8s.namespace.name", "media") + kv("service.name", "bench"))
    return field(1, 2, field(1, 2, resource) + field(2, 2, records))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def lines_counted(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            for l in r.read().decode().splitlines():
                if l.startswith('sigwatch_events_total{kind="lines"} '):
                    return int(float(l.split()[-1]))
    except OSError:
        return None
    return 0


def wait_up(port):
    for _ in range(600):
        if lines_counted(port) is not None:
            return
        time.sleep(0.05)
    sys.exit("sigwatch did not come up")


def hwm(pid):
    """The process's peak RSS so far (VmHWM), in MiB; None once it is gone.
    (Not wait4's ru_maxrss: that counts the forking Python's pages too.)"""
    try:
        with open(f"/proc/{pid}/status") as f:
            for l in f:
                if l.startswith("VmHWM:"):
                    return int(l.split()[1]) / 1024
    except OSError:
        return None
    return None


def reap(p):
    """Waits for `p` to exit, sampling its peak RSS; that peak in MiB."""
    peak = 0.0
    while p.poll() is None:
        peak = max(peak, hwm(p.pid) or 0.0)
        time.sleep(0.01)
    return peak


def push_run(bodies, path, ctype, total, durable=False):
    """(seconds, peak RSS MiB) of one push run."""
    ingest, metrics = free_port(), free_port()
    state = tempfile.mkdtemp(prefix="sigwatch-bench-state-") if durable else None
    extra = ["--state-dir", state] if state else []
    p = subprocess.Popen([BIN, "run", "--log-level", "error",
                          f"--ingest=127.0.0.1:{ingest}", f"--listen=127.0.0.1:{metrics}"] + extra,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    elapsed = None
    try:
        wait_up(metrics)
        conn = http.client.HTTPConnection("127.0.0.1", ingest, timeout=60)
        start = time.monotonic()
        for b in bodies:
            while True:
                conn.request("POST", path, body=b, headers={"Content-Type": ctype})
                r = conn.getresponse()
                r.read()
                if r.status < 300:
                    break
                if r.status not in (429, 503):
                    sys.exit(f"push answered {r.status}")
                time.sleep(0.05)
        while (lines_counted(metrics) or 0) < total:
            time.sleep(0.02)
        elapsed = time.monotonic() - start
    finally:
        rss = hwm(p.pid) or 0.0
        p.kill()
        p.wait()
        if state:
            shutil.rmtree(state, ignore_errors=True)
    return elapsed, rss


def pipe_run(path):
    """(seconds, peak RSS MiB) of the pipe path on the same lines."""
    metrics = free_port()
    start = time.monotonic()
    with open(path, "rb") as f:
        p = subprocess.Popen([BIN, "run", "--log-level", "error",
                              f"--listen=127.0.0.1:{metrics}"], stdin=f,
                             stdout=subprocess.DEVNULL)
        rss = reap(p)
    return time.monotonic() - start, rss


def summary(name, runs, total):
    times = [t for t, _ in runs]
    rss = max(r for _, r in runs)
    med = statistics.median(times)
    return (f"{name:<34} {total / med:>10,.0f} lines/s  median {med:6.2f} s"
            f"  (min–max {min(times):.2f}–{max(times):.2f} s)  peak RSS {rss:5.1f} MiB")


def main():
    if not os.access(BIN, os.X_OK):
        sys.exit(f"{BIN} not found: cargo build --release")
    with tempfile.TemporaryDirectory() as d:
        corpus = os.path.join(d, "keyed.log")
        with open(corpus, "w") as f:
            subprocess.run([sys.executable, os.path.join(ROOT, "benches/gen.py"), str(LINES),
                            "--shape", "keyed"], stdout=f, check=True)
        with open(corpus, encoding="utf-8") as f:
            lines = f.read().splitlines()
        base = 1_752_667_200_000_000_000
        rows = [(base + i * 1_000_000, l) for i, l in enumerate(lines)]
        batches = [rows[i:i + BATCH] for i in range(0, len(rows), BATCH)]
        loki = [loki_body(b) for b in batches]
        otlp = [otlp_body(b) for b in batches]
        total = len(rows)
        print(f"{total} lines, {len(batches)} pushes of {BATCH}; {RUNS} runs each; {BIN}")
        results = {"loki": [], "loki_durable": [], "otlp": [], "pipe": []}
        pb = "application/x-protobuf"
        for _ in range(RUNS):
            results["loki"].append(push_run(loki, "/loki/api/v1/push", pb, total))
            results["loki_durable"].append(
                push_run(loki, "/loki/api/v1/push", pb, total, durable=True))
            results["otlp"].append(push_run(otlp, "/v1/logs", pb, total))
            results["pipe"].append(pipe_run(corpus))
        print(summary("Loki protobuf push", results["loki"], total))
        print(summary("Loki protobuf push, --state-dir", results["loki_durable"], total))
        print(summary("OTLP protobuf export", results["otlp"], total))
        print(summary("peer: cat FILE | run (pipe)", results["pipe"], total))
        for k in ("loki", "loki_durable", "otlp"):
            ratios = [a[0] / b[0] for a, b in zip(results[k], results["pipe"])]
            print(f"{k} / pipe time ratio: median {statistics.median(ratios):.2f}"
                  f" (min–max {min(ratios):.2f}–{max(ratios):.2f})")
        print(json.dumps({k: [[round(t, 3), round(r, 1)] for t, r in v]
                          for k, v in results.items()}))


if __name__ == "__main__":
    main()
