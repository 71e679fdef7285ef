#!/usr/bin/env python3
"""The Loki consumer's throughput, and what shards download from Loki.

    python3 benches/loki.py [LINES] [--streams 16] [--shards 4] [--runs 3]
                            [--bin target/release/sigwatch]

Generates LINES lines of the `keyed` corpus (benches/gen.py), spreads them
round-robin over STREAMS streams `{namespace="bench", pod="pod-NN"}` (one pod
a node, as a shipper labels them), stamped over the hour that ended a minute
ago, and serves them from a small Loki of its own on 127.0.0.1: `query_range`
(forward, inclusive start, exclusive end, the limit applied across streams
merged by time) and the series API, the label matchers `=`, `!=`, `=~`, `!~`
that sigwatch's selectors use (each line's JSON encoded once, an answer a
join of them).

Per run, from the start of `sigwatch run --loki … --since 2h --loki-limit
5000` until `/metrics` counts every line processed (published once a
second: LINES should make a run last several seconds):

- one unsharded consumer: lines/s and MB/s of log text, and of JSON read
  from Loki (one process, which keeps about one core busy);
- SHARDS shards (`--shard I/N --shard-by pod`) side by side: the lines all
  of them downloaded together / the lines of the query, and the same with
  the series API refused (the fallback: every shard reads every stream).

Prints medians and min–max over the runs; the first (cold cache) run is
not counted when there are more than one. The one consumer's CPU time is
read from /proc, so its lines per CPU-second do not depend on this server's
speed (it shares the machine).
"""
import bisect
import http.server
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


POSITIONAL = [a for i, a in enumerate(sys.argv[1:], 1)
              if not a.startswith("--") and not sys.argv[i - 1].startswith("--")]
LINES = int(POSITIONAL[0]) if POSITIONAL else 1_000_000
STREAMS = int(arg("--streams", "16"))
SHARDS = int(arg("--shards", "4"))
RUNS = int(arg("--runs", "3"))
BIN = arg("--bin", os.path.join(ROOT, "target/release/sigwatch"))
QUERY = '{namespace="bench"}'

MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|`[^`]*`)\s*,?')


def parse_selector(q):
    """The matchers of a selector-only query, or None."""
    q = q.strip()
    if not (q.startswith("{") and q.endswith("}")):
        return None
    body, out, pos = q[1:-1], [], 0
    while pos < len(body):
        m = MATCHER.match(body, pos)
        if not m:
            return None
        name, op, raw = m.groups()
        value = raw[1:-1] if raw.startswith("`") else json.loads(raw)
        rx = re.compile(f"^(?:{value})$") if "~" in op else None
        out.append((name, op, value, rx))
        pos = m.end()
    return out


def matches(matchers, labels):
    for name, op, value, rx in matchers:
        have = labels.get(name, "")
        ok = {"=": have == value, "!=": have != value}.get(op)
        if ok is None:
            ok = bool(rx.match(have)) == (op == "=~")
        if not ok:
            return False
    return True


class Store:
    def __init__(self, rows, streams):
        self.rows = rows  # (ts, stream index, line), sorted by ts
        self.ts = [r[0] for r in rows]
        # Each row's JSON once: an answer is a join of these.
        self.frags = [json.dumps([str(ts), line]) for ts, _, line in rows]
        self.streams = streams
        self.labels = [json.dumps(s) for s in streams]
        self.series_refused = False

    def query_range(self, params):
        matchers = parse_selector(params.get("query", ""))
        if matchers is None:
            return 400, b"parse error"
        limit = int(params.get("limit", "100"))
        if limit > 5000:
            return 400, b"max entries limit per query exceeded"
        start, end = int(params.get("start", "0")), int(params.get("end", str(2**63 - 1)))
        wanted = {i for i, s in enumerate(self.streams) if matches(matchers, s)}
        out = {}
        n = 0
        rows, frags = self.rows, self.frags
        for k in range(bisect.bisect_left(self.ts, start), len(rows)):
            ts, s, _ = rows[k]
            if ts >= end or n >= limit:
                break
            if s in wanted:
                out.setdefault(s, []).append(frags[k])
                n += 1
        result = ",".join(f'{{"stream":{self.labels[s]},"values":[{",".join(v)}]}}'
                          for s, v in sorted(out.items()))
        body = ('{"status":"success","data":{"resultType":"streams","result":['
                + result + '],"stats":{}}}').encode()
        return 200, body

    def series(self, params):
        if self.series_refused:
            return 404, b"404 page not found"
        matchers = parse_selector(params.get("match[]", ""))
        if matchers is None:
            return 400, b"parse error"
        data = [s for s in self.streams if matches(matchers, s)]
        return 200, json.dumps({"status": "success", "data": data}).encode()


def serve(store):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def answer(self, code, body):
            self.send_response(code)
            self.send_header("Content-Type", "application/json" if code == 200 else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def route(self, params):
            path = urllib.parse.urlparse(self.path).path
            if path == "/loki/api/v1/query_range":
                return self.answer(*store.query_range(params))
            if path == "/loki/api/v1/series":
                return self.answer(*store.series(params))
            self.answer(404, b"not found")

        def do_GET(self):
            q = urllib.parse.urlparse(self.path).query
            self.route(dict(urllib.parse.parse_qsl(q)))

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            self.route(dict(urllib.parse.parse_qsl(self.rfile.read(n).decode())))

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, *a):
            pass  # a consumer killed mid-answer

    srv = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def counter(port, kind):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            total = 0
            for l in r.read().decode().splitlines():
                if l.startswith(f'sigwatch_events_total{{kind="{kind}"'):
                    total += int(float(l.split()[-1]))
            return total
    except OSError:
        return None


def hwm(pid):
    """Peak RSS of a running process (VmHWM), MiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for l in f:
                if l.startswith("VmHWM:"):
                    return int(l.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_seconds(pid):
    """User + system CPU time of a running process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def consume(url, total, shards=None):
    """Runs one consumer (or `shards` side by side) to the last line:
    (seconds, lines downloaded from Loki in all, bytes of JSON read, CPU
    seconds of the consumers, the largest peak RSS in MiB)."""
    procs = []
    for i in range(shards or 1):
        port = free_port()
        cmd = [BIN, "run", "--log-level", "error", "--listen", f"127.0.0.1:{port}", "--loki", url,
               "--query", QUERY, "--since", "2h", "--loki-lag", "0s", "--loki-interval", "200ms",
               "--loki-limit", "5000"]
        if shards:
            cmd += ["--shard", f"{i}/{shards}", "--shard-by", "pod"]
        procs.append((subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL), port))
    start = time.monotonic()
    try:
        while True:
            done = [counter(p, "lines") for _, p in procs]
            if all(d is not None for d in done) and sum(done) >= total:
                break
            if time.monotonic() - start > 600:
                sys.exit("the consumers did not finish")
            time.sleep(0.02)
        elapsed = time.monotonic() - start
        time.sleep(1.1)  # one more publication of the Loki counters
        downloaded = sum(counter(p, "loki_lines") or 0 for _, p in procs)
        read = sum(counter(p, "loki_bytes") or 0 for _, p in procs)
        cpu = sum(cpu_seconds(p.pid) for p, _ in procs)
        rss = max(hwm(p.pid) for p, _ in procs)
        return elapsed, downloaded, read, cpu, rss
    finally:
        for p, _ in procs:
            p.kill()
            p.wait()


def med(xs):
    return f"{statistics.median(xs):.2f} (min–max {min(xs):.2f}–{max(xs):.2f})"


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
    end = time.time_ns() - 60 * 10**9
    step = 3600 * 10**9 // max(len(lines), 1)
    start = end - step * len(lines)
    rows = [(start + i * step, i % STREAMS, l) for i, l in enumerate(lines)]
    streams = [{"namespace": "bench", "pod": f"pod-{s:02}"} for s in range(STREAMS)]
    text_bytes = sum(len(l) + 1 for l in lines)
    store = Store(rows, streams)
    url = serve(store)
    total = len(rows)
    print(f"{total} lines ({text_bytes / 1e6:.0f} MB of text) in {STREAMS} streams; "
          f"{RUNS} runs; {BIN}")
    single, narrowed, fallback = [], [], []
    for r in range(RUNS):
        single.append(consume(url, total))
        narrowed.append(consume(url, total, SHARDS))
        store.series_refused = True
        fallback.append(consume(url, total, SHARDS))
        store.series_refused = False
    counted = slice(1, None) if RUNS > 1 else slice(None)
    t = [s[0] for s in single[counted]]
    cpu = statistics.median([s[3] for s in single[counted]])
    print(f"one consumer: {total / statistics.median(t):,.0f} lines/s, "
          f"{text_bytes / statistics.median(t) / 1e6:.1f} MB/s of log text, "
          f"{single[-1][2] / statistics.median(t) / 1e6:.1f} MB/s of Loki JSON; "
          f"time {med(t)} s; downloaded {single[-1][1] / total:.2f} × the lines")
    print(f"  per CPU-second of sigwatch: {total / cpu:,.0f} lines, "
          f"{text_bytes / cpu / 1e6:.1f} MB of log text, {single[-1][2] / cpu / 1e6:.1f} MB of JSON "
          f"({cpu:.2f} CPU-s a run); peak RSS {max(s[4] for s in single):.1f} MiB")
    for name, runs in ((f"{SHARDS} shards, narrowed selectors", narrowed),
                       (f"{SHARDS} shards, series API refused (fallback)", fallback)):
        t = [s[0] for s in runs[counted]]
        ratio = [s[1] / total for s in runs[counted]]
        print(f"{name}: downloaded {med(ratio)} × the lines; time {med(t)} s")
    print(json.dumps({"single": single, "narrowed": narrowed, "fallback": fallback}))


if __name__ == "__main__":
    main()
