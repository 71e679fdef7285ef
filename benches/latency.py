#!/usr/bin/env python3
"""From a condition to its page: fixtures streamed live into `sigwatch run`
at wall-clock pace, on stdin, through a file being appended to, and through
the Loki tail of a small Loki served here; for every alert, the time from
the instant its condition held to the notification's arrival on run's
stdout.

    python3 benches/latency.py [--bin target/release/sigwatch] [--lead 20]
        [--via stdin,file,loki] [--verbose] FIXTURE...

Each fixture is replayed first (`sigwatch replay`) for its alerts, and read
by `sigwatch explain --json` for each line's event time. An alert's
condition is the event time at which its rule's condition and `for` held:
its `starts_at` plus the rule's `for`, or the line that confirmed it if
later (`last_seen`: a spread's `for` is confirmed by a hit). The lines more
than `--lead` seconds of event time before the first condition go first as
fast as the transport takes them (a consumer catching up), the rest at the
pace of their event times (one event second per wall second). Prints
p50 / p99 / max per transport and detector kind, and every alert with
`--verbose`. Needs PyYAML (the rule pack's `for` values). A benchmark, not
a test: CI does not run it.

The Loki here answers `query_range` and `series` with nothing and serves the
tail websocket (RFC 6455 text frames, entries as Loki sends them: ≤ 100 per
frame, a `kubectl --prefix` line's pod and container as its stream's labels);
entry times are the lines' event times shifted to now (whole
seconds), so the tail's start bound keeps them.
"""

import base64
import datetime
import hashlib
import http.server
import json
import os
import queue
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import yaml


def arg(name, default):
    if name in sys.argv:
        i = sys.argv.index(name)
        v = sys.argv[i + 1]
        del sys.argv[i : i + 2]
        return v
    return default


BIN = arg("--bin", "target/release/sigwatch")
LEAD = float(arg("--lead", "20"))
VIA = arg("--via", "stdin,file,loki").split(",")
VERBOSE = "--verbose" in sys.argv
FIXTURES = [a for a in sys.argv[1:] if not a.startswith("--")]
if not FIXTURES:
    sys.exit(__doc__)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = [BIN, "run", "--listen", "none", "--log-level", "error", "--output", "json", "--no-links"]


def ns(stamp):
    d = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return int(d.timestamp()) * 10**9 + d.microsecond * 1000


def dur(s):
    units = {"ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}
    for u in ("ms", "s", "m", "h"):
        if str(s).endswith(u) and str(s)[: -len(u)].replace(".", "").isdigit():
            return int(float(str(s)[: -len(u)]) * units[u])
    return 0


def rules():
    """rule id -> (detector kind, ns from starts_at to the condition)."""
    out = {"novel": ("novelty", 30 * 10**9)}
    for f in sorted(os.listdir(os.path.join(ROOT, "rules"))):
        if not f.endswith(".yaml"):
            continue
        doc = yaml.safe_load(open(os.path.join(ROOT, "rules", f))) or {}
        for r in doc.get("rules", []):
            detect = r.get("detect", {}) or {}
            kind = next(iter(detect), "count")
            out[r["id"]] = (kind, dur(r.get("for", "0s")))
    return out


# --- the Loki tail -------------------------------------------------------

def ws_frame(payload, opcode=0x1):
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


class Loki:
    """query_range and series answer nothing; every tail connection gets
    the frames put on `frames` from the moment it connects."""

    def __init__(self):
        self.frames = queue.Queue()
        self.connected = threading.Event()
        loki = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def answer(self, body):
                body = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(n)
                self.do_GET()

            def do_GET(self):
                path = urllib.parse.urlparse(self.path).path
                if path.endswith("/tail") and self.headers.get("Upgrade", "").lower() == "websocket":
                    return self.tail()
                if path.endswith("/series"):
                    return self.answer({"status": "success", "data": []})
                self.answer({"status": "success", "data": {"resultType": "streams", "result": [], "stats": {}}})

            def tail(self):
                key = self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
                accept = base64.b64encode(hashlib.sha1(key.encode()).digest()).decode()
                self.send_response(101)
                self.send_header("Upgrade", "websocket")
                self.send_header("Connection", "Upgrade")
                self.send_header("Sec-WebSocket-Accept", accept)
                self.end_headers()
                self.wfile.flush()
                loki.connected.set()
                while True:
                    try:
                        f = loki.frames.get(timeout=1.0)
                    except queue.Empty:
                        f = ws_frame(b"", 0x9)  # Loki pings every second
                    if f is None:
                        self.wfile.write(ws_frame(struct.pack("!H", 1000), 0x8))
                        self.wfile.flush()
                        return
                    try:
                        self.wfile.write(f)
                        self.wfile.flush()
                    except OSError:
                        return

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, *a):
                pass

        self.srv = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"

    def send(self, rows):
        """rows: (labels, [ts, line]); ≤ 100 entries per frame, one stream
        per label set, as Loki sends them."""
        for i in range(0, len(rows), 100):
            streams = {}
            for labels, row in rows[i : i + 100]:
                streams.setdefault(tuple(sorted(labels.items())), []).append(row)
            body = {"streams": [{"stream": dict(k), "values": v} for k, v in streams.items()]}
            self.frames.put(ws_frame(json.dumps(body).encode()))


PREFIX = re.compile(r"^\[pod/([^/\]]+)/([^\]]+)\] ")


def loki_entry(line):
    """A `kubectl logs --prefix` line as Loki holds it: the pod and
    container as the stream's labels, the rest as the line."""
    line = line.rstrip("\r\n")
    m = PREFIX.match(line)
    if m:
        return {"app": "bench", "pod": m.group(1), "container": m.group(2)}, line[m.end() :]
    return {"app": "bench"}, line


# --- the transports --------------------------------------------------------

class Stdin:
    shift = 0

    def start(self):
        self.p = subprocess.Popen(RUN, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return self.p

    def send(self, lines):
        self.p.stdin.write("".join(l for l, _ in lines).encode())
        self.p.stdin.flush()

    def close(self):
        self.p.stdin.close()


class File:
    shift = 0

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="sigwatch-latency-")
        self.path = os.path.join(self.dir, "app.log")
        self.f = open(self.path, "wb")
        self.p = subprocess.Popen(
            RUN + ["--file", os.path.join(self.dir, "*.log")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        return self.p

    def send(self, lines):
        self.f.write("".join(l for l, _ in lines).encode())
        self.f.flush()

    def close(self):
        self.p.terminate()
        self.f.close()

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class Tail:
    def __init__(self, first_ns):
        # Entry times near now (whole seconds, so stamps keep their form).
        self.shift = (time.time_ns() - first_ns) // 10**9 * 10**9

    def start(self):
        self.loki = Loki()
        self.p = subprocess.Popen(
            RUN + ["--loki", self.loki.url, "--query", '{app="bench"}', "--loki-tail", "--since", "1m"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        if not self.loki.connected.wait(30):
            sys.exit("the tail never connected")
        return self.p

    def send(self, lines):
        rows = []
        for l, t in lines:
            labels, text = loki_entry(l)
            rows.append((labels, [str(t + self.shift), text]))
        self.loki.send(rows)

    def close(self):
        self.loki.frames.put(None)
        time.sleep(0.5)
        self.p.terminate()


def measure(via, text, times, want):
    e0 = min(d for _, d in want.values()) - int(LEAD * 1e9)
    end = max(d for _, d in want.values())
    first = next((t for t in times if t is not None), e0)
    t = {"stdin": Stdin, "file": File, "loki": lambda: Tail(first)}[via]()
    proc = t.start()
    arrivals = {}

    def reader():
        for l in proc.stdout:
            try:
                n = json.loads(l)
            except ValueError:
                continue
            if n.get("state") == "firing" and not n.get("repeat"):
                key = (n["rule"], n["group"], ns(n["starts_at"]) - t.shift)
                arrivals.setdefault(key, time.monotonic())

    th = threading.Thread(target=reader)
    th.start()
    w0 = None
    backlog = []
    for line, lt in zip(text, times):
        lt = lt if lt is not None else first
        if lt > end + 5 * 10**9:
            break  # past the last condition: nothing left to time
        if lt < e0:
            backlog.append((line, lt))
            continue
        if backlog:
            t.send(backlog)
            backlog = []
        if w0 is None:
            w0 = time.monotonic() - (lt - e0) / 1e9
        delay = w0 + (lt - e0) / 1e9 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        t.send([(line, lt)])
    if backlog:
        t.send(backlog)
    # Let the last conditions come due before the input ends.
    if w0 is not None:
        wait = w0 + (end - e0) / 1e9 + 5 - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    t.close()
    proc.wait()
    th.join()
    if hasattr(t, "cleanup"):
        t.cleanup()
    # Entry times through Loki are the lines' times to the millisecond as
    # `explain` reads them: an alert may start a little apart from the
    # replay's. The same rule and group within 2 s is that alert.
    for key in sorted(set(arrivals) - set(want)):
        near = [k for k in want if k[:2] == key[:2] and abs(k[2] - key[2]) <= 2 * 10**9 and k not in arrivals]
        if near:
            if VERBOSE:
                print(f"{via}: {key[0]} {key[1]} started {(key[2] - near[0][2]) / 1e6:+.0f} ms from the replay's start")
            arrivals[near[0]] = arrivals.pop(key)
        elif VERBOSE:
            print(f"{via}: paged live, not in the replay: {key}")
    got, missing = [], []
    for key, (kind, due) in want.items():
        if due < e0 or w0 is None:
            continue
        if key not in arrivals:
            missing.append(key)
            continue
        got.append((kind, key, (arrivals[key] - (w0 + (due - e0) / 1e9)) * 1000))
    return got, missing


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
            start = ns(n["starts_at"])
            cond = max(start + extra, ns(n["last_seen"]) if n.get("last_seen") else 0)
            want.setdefault((n["rule"], n["group"], start), (kind, cond))
        if not want:
            continue
        ex = subprocess.run(
            [BIN, "explain", "--json"], input="".join(text), capture_output=True, text=True, check=True
        ).stdout.splitlines()
        times, last = [], None
        for l in ex:
            t = json.loads(l).get("time")
            last = ns(t) if t else last
            times.append(last)
        for via in VIA:
            if via == "loki" and text and text[0].strip() in ("{", "["):
                # A pretty-printed document (kubectl get events -o json) is
                # one record over many lines: not what a Loki stream holds.
                print(f"loki: {os.path.basename(fx)}: a multi-line document, not sent through Loki")
                continue
            got, missing = measure(via, text, times, want)
            for kind, key, ms in got:
                lat.setdefault((via, kind), []).append(ms)
                if VERBOSE:
                    print(f"{via:<6} {os.path.basename(fx)} {key[0]} {key[1]} {ms:.0f} ms")
            if missing:
                print(f"{via}: {os.path.basename(fx)}: {len(missing)} alert(s) of the replay not paged live: {missing[:3]}")
    print(f"{'via':<6} {'detector':<10} {'alerts':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for (via, kind), v in sorted(lat.items()):
        v.sort()
        p99 = v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))]
        print(f"{via:<6} {kind:<10} {len(v):>6} {statistics.median(v):>8.0f} {p99:>8.0f} {max(v):>8.0f}")


main()
