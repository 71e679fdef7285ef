#!/usr/bin/env python3
"""How well sigwatch reads real logs nobody here wrote: LogHub-2k.

    git clone --depth 1 https://github.com/logpai/loghub /tmp/loghub
    cargo build --release
    python3 benches/loghub.py /tmp/loghub [target/release/sigwatch]

LogHub (Zhu et al., "Loghub: A Large Collection of System Log Datasets for
AI-driven Log Analytics", ISSRE 2023; https://github.com/logpai/loghub)
has 2,000-line samples of 16 systems, `<S>/<S>_2k.log`, each with a
`_structured.csv` ground truth: the header's columns (date, time, level,
component, pid…) and `Content`, the message. Its licence allows research
use with a citation; the data is not copied into this repository.

Each sample is piped through `sigwatch explain --json` (one decoder for the
file, as in the pipeline) and compared with the ground truth:

* time   - the event time equals the line's own stamp (to the second; the
           year only where the line has one; either stamp where there are
           two, as BGL's epoch and local time);
* level  - the level equals the one the header shows (systems with a level
           column; Linux's "Level" column holds the host and is skipped);
* exact  - the message equals `Content`;
* left   - the message is `Content` with part of the header still before it;
* over   - anything else (more than the header taken away).

The targets: time and level on >= 97 % of the lines that show
one, header left in the message on <= 3 %.
"""
import csv, json, subprocess, sys, os, calendar, datetime
if len(sys.argv) < 2:
    sys.exit(__doc__)
ROOT = sys.argv[1]
BIN = sys.argv[2] if len(sys.argv) > 2 else "target/release/sigwatch"
CMD = [BIN, "explain", "--json"]
SYSTEMS = ["Android","Apache","BGL","HDFS","HPC","Hadoop","HealthApp","Linux","Mac","OpenSSH","OpenStack","Proxifier","Spark","Thunderbird","Windows","Zookeeper"]
MON = {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m}
LEVELS = {"trace":"debug","debug":"debug","verbose":"debug","v":"debug","d":"debug",
 "info":"info","notice":"info","i":"info","information":"info",
 "warn":"warn","warning":"warn","w":"warn",
 "error":"error","err":"error","e":"error","severe":"error","failure":"error",
 "fatal":"fatal","critical":"fatal","crit":"fatal","f":"fatal","a":"fatal","emerg":"fatal","alert":"fatal","panic":"fatal"}
def gt_times(sys_, r):
    """Candidate (Y or None, M, D, h, m, s) tuples, or ('epoch', secs)."""
    out = []
    def hms(t):
        t = t.replace(",", ".")
        p = t.split(":")
        return int(p[0]), int(p[1]), int(float(p[2]) if len(p) == 3 else float(p[2]))
    try:
        if sys_ == "Android":
            mo, d = r["Date"].split("-"); h, m, s = hms(r["Time"]); out.append((None, int(mo), int(d), h, m, s))
        elif sys_ == "Apache":
            _, mon, d, t, y = r["Time"].split(); h, m, s = hms(t); out.append((int(y), MON[mon.lower()], int(d), h, m, s))
        elif sys_ in ("BGL", "Thunderbird", "HPC"):
            e = int(r["Timestamp"] if "Timestamp" in r else r["Time"]); out.append(("epoch", e))
            if sys_ == "BGL":
                t = r["Time"]; y, mo, d, rest = t[:4], t[5:7], t[8:10], t[11:]
                hh, mm, ss = rest.split(".")[:3]; out.append((int(y), int(mo), int(d), int(hh), int(mm), int(ss)))
            if sys_ == "Thunderbird":
                h, m, s = hms(r["Time"]); out.append((int(r["Date"][:4]), MON[r["Month"].lower()], int(r["Day"]), h, m, s))
        elif sys_ == "HDFS":
            d, t = r["Date"], r["Time"].zfill(6); out.append((2000 + int(d[:2]), int(d[2:4]), int(d[4:6]), int(t[:2]), int(t[2:4]), int(t[4:6])))
        elif sys_ in ("Hadoop", "OpenStack", "Windows", "Zookeeper"):
            y, mo, d = r["Date"].split("-"); h, m, s = hms(r["Time"]); out.append((int(y), int(mo), int(d), h, m, s))
        elif sys_ == "HealthApp":
            t = r["Time"]; y, mo, d = int(t[:4]), int(t[4:6]), int(t[6:8]); h, m, s = t[9:].split(":")[:3]; out.append((y, mo, d, int(h), int(m), int(s)))
        elif sys_ in ("Linux", "Mac"):
            h, m, s = hms(r["Time"]); out.append((None, MON[r["Month"].lower()], int(r["Date"]), h, m, s))
        elif sys_ == "OpenSSH":
            h, m, s = hms(r["Time"]); out.append((None, MON[r["Date"].lower()], int(r["Day"]), h, m, s))
        elif sys_ == "Proxifier":
            md, t = r["Time"].split(); mo, d = md.split("."); h, m, s = hms(t); out.append((None, int(mo), int(d), h, m, s))
        elif sys_ == "Spark":
            y, mo, d = r["Date"].split("/"); h, m, s = hms(r["Time"]); out.append((2000 + int(y), int(mo), int(d), h, m, s))
    except (KeyError, ValueError, IndexError):
        pass
    return out
def time_ok(ours, cands):
    if not ours: return False
    t = datetime.datetime.strptime(ours[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    for c in cands:
        if c[0] == "epoch":
            if int(t.timestamp()) == c[1]: return True
        else:
            y, mo, d, h, m, s = c
            if (y is None or y == t.year) and (mo, d, h, m, s) == (t.month, t.day, t.hour, t.minute, t.second): return True
    return False
tot = {"lines":0,"time_shown":0,"time_ok":0,"level_shown":0,"level_ok":0,"exact":0,"left":0,"over":0}
verbose = os.environ.get("VERBOSE")  # VERBOSE=1: three examples of each miss
print(f"{'system':<12} {'time':>7} {'level':>7} {'exact':>7} {'left':>7} {'over':>7}")
for s in SYSTEMS:
    log = os.path.join(ROOT, s, f"{s}_2k.log")
    rows = list(csv.DictReader(open(log + "_structured.csv", encoding="utf-8", errors="replace")))
    res = subprocess.run(CMD, stdin=open(log, "rb"), capture_output=True)
    outs = [json.loads(l) for l in res.stdout.decode("utf-8", "replace").splitlines() if l.strip()]
    if len(outs) != len(rows):
        print(s, "count mismatch", len(outs), len(rows), res.stderr[:300]); continue
    st = {k: 0 for k in tot}
    bad = {"time": [], "level": [], "left": [], "over": []}
    raw = open(log, encoding="utf-8", errors="replace").read().split("\n")
    for r, o, line in zip(rows, outs, raw):
        st["lines"] += 1
        cands = gt_times(s, r)
        if cands:
            st["time_shown"] += 1
            if time_ok(o.get("time"), cands): st["time_ok"] += 1
            elif len(bad["time"]) < 3: bad["time"].append((line[:120], o.get("time")))
        lv = LEVELS.get((r.get("Level") or "").strip().lower()) if s != "Linux" else None
        if lv:
            st["level_shown"] += 1
            if o.get("level") == lv: st["level_ok"] += 1
            elif len(bad["level"]) < 3: bad["level"].append((line[:120], o.get("level"), lv))
        msg = (o.get("message") or "").strip(); c = r["Content"].strip()
        if msg == c: st["exact"] += 1
        elif msg.endswith(c) and len(msg) > len(c):
            st["left"] += 1
            if len(bad["left"]) < 3: bad["left"].append((line[:120], msg[:80]))
        else:
            st["over"] += 1
            if len(bad["over"]) < 3: bad["over"].append((line[:120], msg[:80], c[:60]))
    for k in tot: tot[k] += st[k]
    pct = lambda a, b: f"{100*a/b:6.1f}%" if b else "     - "
    print(f"{s:<12} {pct(st['time_ok'],st['time_shown'])} {pct(st['level_ok'],st['level_shown'])} {pct(st['exact'],st['lines'])} {pct(st['left'],st['lines'])} {pct(st['over'],st['lines'])}")
    if verbose:
        for k, v in bad.items():
            for x in v: print("    ", k, x)
pct = lambda a, b: f"{100*a/b:6.1f}%" if b else "     - "
print(f"{'ALL':<12} {pct(tot['time_ok'],tot['time_shown'])} {pct(tot['level_ok'],tot['level_shown'])} {pct(tot['exact'],tot['lines'])} {pct(tot['left'],tot['lines'])} {pct(tot['over'],tot['lines'])}")
print(json.dumps(tot))
