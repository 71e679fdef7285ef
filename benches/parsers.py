#!/usr/bin/env python3
"""Time and level read on other projects' parser-test logs.

Corpora (fetched, never copied into this repository):
  * lnav's test logs: tstack/lnav, test/logfile_*
  * the CrowdSec hub's parser tests: crowdsecurity/hub, .tests/*/*.log

Each file goes through `sigwatch explain --json` (stdin: lines share their
stream's context, as in the pipeline). An oracle that knows nothing of
sigwatch says which lines *show* a time (a date-and-time or a time of day,
an epoch number under a time key) and a level (an upper-case level word, a
bracketed one, a level key); on those lines we count:

  time read     the line's time came from the line (or its wrapper)
  level read    a level was read
  header left   the time the oracle saw is still in the message

Where lnav (a peer parser, `apt-get install lnav`) parsed the same line
with a format of its own, we compare: same time to the second (month, day,
clock; the year only when the line has one) and same level.

Files are split by a hash of their path: a development part (3/4) and a
held-out part (1/4) that is reported apart and was not looked at while
building. Usage:

  python3 benches/parsers.py DATA_DIR [--sigwatch BIN] [--part dev|held|all]
        [--misses N]

DATA_DIR holds `tstack+lnav` and `crowdsecurity+hub` checkouts:

  git clone --depth 1 https://github.com/tstack/lnav DATA_DIR/tstack+lnav
  git clone --depth 1 https://github.com/crowdsecurity/hub DATA_DIR/crowdsecurity+hub
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
TIME_PATTERNS = [
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?",
    r"\d{4}/\d{2}/\d{2}[ T-]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?",
    r"\d{1,2}/" + MONTHS + r"/\d{4}[: ]\d{2}:\d{2}:\d{2}",
    r"\d{1,2}[ -]" + MONTHS + r"[ -]\d{4}[ ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?",
    MONTHS + r"\s+\d{1,2},? (?:\d{4} )?\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?",
    r"\d{2}/\d{2}/\d{2,4}[ ,]+\d{1,2}:\d{2}:\d{2}",
    r"\d{2}\.\d{2}\.\d{4} \d{2}:\d{2}:\d{2}",
    r"\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b",
    r"""["']?(?i:time|timestamp|ts|date|@t|@timestamp)["']?\s*[:=]\s*["']?\d{10}""",
]
TIME_RE = re.compile("|".join("(?:%s)" % p for p in TIME_PATTERNS))
LEVEL_WORDS = (
    "TRACE|DEBUG|DBG|INFO|INF|NOTICE|WARN|WARNING|WRN|ERROR|ERR|FATAL|FTL|"
    "CRITICAL|CRIT|SEVERE|EMERG|ALERT|PANIC|VERBOSE"
)
LEVEL_RE = re.compile(
    r"(?:^|[\s\[<(|:])(?:" + LEVEL_WORDS + r")(?=$|[\s\]>):|,])"
    r"|\[(?i:trace|debug|info|notice|warn|warning|error|fatal|crit|critical)\]"
    r"""|(?i:["']?(?:level|severity|loglevel|log\.level|lvl)["']?\s*[:=]\s*["']?[a-z]+)"""
)
LEVEL_NAMES = {
    "trace": "debug", "debug": "debug", "dbg": "debug", "verbose": "debug",
    "info": "info", "inf": "info", "notice": "info", "information": "info",
    "warn": "warn", "warning": "warn", "wrn": "warn",
    "error": "error", "err": "error", "severe": "error",
    "fatal": "fatal", "critical": "fatal", "crit": "fatal", "emerg": "fatal",
    "alert": "fatal", "panic": "fatal", "ftl": "fatal",
}


def corpus_files(data):
    out = []
    lnav = os.path.join(data, "tstack+lnav", "test")
    if os.path.isdir(lnav):
        for f in sorted(os.listdir(lnav)):
            p = os.path.join(lnav, f)
            if f.startswith("logfile_") and os.path.isfile(p) and not f.endswith((".gz", ".bz2", ".zst")):
                out.append(("lnav", p))
    hub = os.path.join(data, "crowdsecurity+hub", ".tests")
    if os.path.isdir(hub):
        for d in sorted(os.listdir(hub)):
            dd = os.path.join(hub, d)
            if not os.path.isdir(dd):
                continue
            for f in sorted(os.listdir(dd)):
                if f.endswith(".log"):
                    out.append(("crowdsec", os.path.join(dd, f)))
    return out


def part_of(path, data):
    rel = os.path.relpath(path, data)
    h = int(hashlib.sha1(rel.encode()).hexdigest(), 16)
    return "held" if h % 4 == 0 else "dev"


def text_lines(path):
    with open(path, "rb") as f:
        raw = f.read()
    if b"\0" in raw[:4096]:
        return None
    try:
        return raw.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def explain(binary, path):
    with open(path, "rb") as f:
        r = subprocess.run(
            [binary, "explain", "--json"],
            stdin=f, capture_output=True, timeout=300,
        )
    out = []
    for l in r.stdout.decode("utf-8", "replace").splitlines():
        try:
            out.append(json.loads(l))
        except ValueError:
            pass
    return out


def lnav_rows(path):
    if not shutil.which("lnav"):
        return {}
    # lnav writes its default configuration under $HOME (or the working
    # directory when $HOME is missing): give it a scratch one.
    home = os.path.join(tempfile.gettempdir(), "sigwatch-bench-lnav-home")
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ, TZ="UTC", HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"))
    try:
        r = subprocess.run(
            ["lnav", "-n", "-c",
             ";SELECT log_actual_time AS log_time, log_level, log_format, log_raw_text FROM all_logs",
             "-c", ":write-json-to -", path],
            capture_output=True, timeout=120, env=env,
        )
        rows = json.loads(r.stdout or b"[]")
    except (subprocess.TimeoutExpired, ValueError):
        return {}
    # lnav numbers its records, not the file's lines (headers and
    # continuation lines are not records): match by the record's first line.
    by_text = {}
    for row in rows:
        if isinstance(row, dict):
            first = (row.get("log_raw_text") or "").split("\n")[0].rstrip("\r")
            by_text.setdefault(first, []).append(row)
    return by_text


def seconds(s, year=None):
    """Seconds since the epoch of an ISO-ish time string (UTC), the year
    replaced by `year` when given."""
    import calendar
    m = re.match(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})", s or "")
    if not m:
        return None
    y, mo, d, h, mi, se = (int(x) for x in m.groups())
    try:
        return calendar.timegm((year or y, mo, d, h, mi, se))
    except (ValueError, OverflowError):
        return None


def same_instant(peer, ours):
    """lnav shows a line's wall clock in the line's own zone, we the UTC
    instant: the same reading differs by a whole quarter hour within
    ±14 h (a zoneless line: by nothing). The year is compared only when
    both have the same one (a line without a year takes it from the file's
    date, which differs between checkouts)."""
    o = seconds(ours)
    p = seconds(peer, year=int(ours[:4])) if ours else None
    if o is None or p is None:
        return False
    diff = abs(o - p)
    return diff % 900 == 0 and diff <= 14 * 3600


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--sigwatch", default="target/release/sigwatch")
    ap.add_argument("--part", default="all", choices=["dev", "held", "all"])
    ap.add_argument("--misses", type=int, default=0, help="print N missed lines per measure (dev only)")
    ap.add_argument("--no-peer", action="store_true")
    a = ap.parse_args()
    parts = ["dev", "held"] if a.part == "all" else [a.part]
    stats = {p: dict(files=0, lines=0, timed=0, time_read=0, leveled=0, level_read=0,
                     header_left=0, peer_t=0, peer_t_same=0, peer_l=0, peer_l_same=0)
             for p in parts}
    misses = {"time": [], "level": [], "header": [], "peer_time": [], "peer_level": []}
    for origin, path in corpus_files(a.data):
        part = part_of(path, a.data)
        if part not in parts:
            continue
        lines = text_lines(path)
        if not lines:
            continue
        got = explain(a.sigwatch, path)
        if len(got) != len(lines):
            # Joined records (pretty JSON) shift lines: match by text.
            by_line = {}
            for g in got:
                by_line.setdefault(g.get("line"), g)
            got = [by_line.get(l) for l in lines]
        peer = {} if a.no_peer else lnav_rows(path)
        s = stats[part]
        s["files"] += 1
        for i, line in enumerate(lines):
            g = got[i] if i < len(got) else None
            if g is None:
                continue
            s["lines"] += 1
            tm = TIME_RE.search(line)
            lm = LEVEL_RE.search(line)
            if tm:
                s["timed"] += 1
                if g.get("timed"):
                    s["time_read"] += 1
                elif part == "dev":
                    misses["time"].append((path, line))
                if tm.group(0) in (g.get("message") or "") and len(tm.group(0)) >= 8:
                    s["header_left"] += 1
                    if part == "dev":
                        misses["header"].append((path, line))
            if lm:
                s["leveled"] += 1
                if g.get("level"):
                    s["level_read"] += 1
                elif part == "dev":
                    misses["level"].append((path, line))
            rows = peer.get(line.rstrip("\r"))
            row = rows.pop(0) if rows else None
            if row and row.get("log_format") not in (None, "text_log") and tm and g.get("timed"):
                if seconds(row.get("log_time")) is not None:
                    s["peer_t"] += 1
                    if same_instant(row.get("log_time"), g.get("time")):
                        s["peer_t_same"] += 1
                    elif part == "dev":
                        misses["peer_time"].append((path, line, row.get("log_time"), g.get("time")))
            if row and row.get("log_format") not in (None, "text_log") and lm:
                pl = LEVEL_NAMES.get((row.get("log_level") or "").lower())
                if pl:
                    s["peer_l"] += 1
                    if pl == g.get("level"):
                        s["peer_l_same"] += 1
                    elif part == "dev":
                        misses["peer_level"].append((path, line, row.get("log_level"), g.get("level")))
    pct = lambda n, d: "%.1f %%" % (100.0 * n / d) if d else "—"
    print("| part | files | lines | time read | level read | header left | peer same time | peer same level |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for p in parts:
        s = stats[p]
        print("| %s | %d | %d | %s (%d/%d) | %s (%d/%d) | %s | %s (%d) | %s (%d) |" % (
            p, s["files"], s["lines"],
            pct(s["time_read"], s["timed"]), s["time_read"], s["timed"],
            pct(s["level_read"], s["leveled"]), s["level_read"], s["leveled"],
            pct(s["header_left"], s["timed"]),
            pct(s["peer_t_same"], s["peer_t"]), s["peer_t"],
            pct(s["peer_l_same"], s["peer_l"]), s["peer_l"]))
    if a.misses:
        for k, v in misses.items():
            print("\n## missed: %s (%d)" % (k, len(v)))
            by_file = {}
            for m in v:
                by_file[os.path.basename(m[0])] = by_file.get(os.path.basename(m[0]), 0) + 1
            top = sorted(by_file.items(), key=lambda x: -x[1])[:12]
            print("  by file: " + ", ".join("%s %d" % t for t in top))
            seen = set()
            n = 0
            for m in v:
                if m[0] in seen:
                    continue
                seen.add(m[0])
                print("  " + " | ".join(str(x)[:220] for x in m))
                n += 1
                if n >= a.misses:
                    break


if __name__ == "__main__":
    main()
