#!/usr/bin/env python3
"""Template grouping and novelty on labelled logs, against Drain3 in the
same run, with a development and a held-out part.

Corpora (fetched, never copied into this repository):

    git clone --depth 1 https://github.com/logpai/loghub        DATA/logpai+loghub
    git clone --depth 1 https://github.com/logpai/loghub-2.0    DATA/logpai+loghub-2.0
    pip install drain3

Label revisions: LogHub-2k's own (`<S>_2k.log_structured.csv`), Loghub-2.0's
2k set (`structured.csv`) and its corrected one (`structured_corrected.csv`).
A system belongs to the held-out part when a hash of its name says so (a
quarter of them); the development part is what mining was worked on.

Grouping accuracy (GA; Zhu et al., ICSE-SEIP 2019): a line is right when
the lines sharing its template are exactly those sharing its true event.
Lines sharing a true event are those with the same `EventTemplate` (Loghub-
2.0's evaluation groups by template text; LogHub-2k's own labels by
`EventId`, which is the same there). sigwatch reads the raw line (headers
and all, as `sigwatch templates --lines --json` does); Drain3 (defaults,
the masking-free `TemplateMiner`) reads the `Content` column, the line with
its header already cut off by the benchmark's own regular expressions.

Novelty: the log is mined in order and the first half is the learning
period. A template is *new after learning* when its first line is in the
second half; it is a *known event* when the true event of its lines was
already seen in the first half (a split: novelty would page for it). A
true event that is *really new* (first seen in the second half) *surfaces*
when its first line's template is new after learning.

Shape perturbation (`--perturb P`): the benchmark's 2k lines show each
variable in the few shapes that sample happened to have. To see whether
grouping depends on those shapes, each variable of each line (a `<*>` of
its true template, located in the line's `Content`) is replaced, with
probability P, by a value of another shape of its kind: a number by
another number (other digit counts, a decimal, hex), a name by another
name (a plain word, a dotted name, a word with digits, a path, an address
with a port, a UUID, a host name). Only whole tokens are replaced (not a
clock's parts, not a piece of a word). The labels stay; deterministic
(seeded). Drain3 reads the perturbed `Content` too.

Concatenated (`--concat`): a 2k sample holds few events that first occur
in its second half, so the recall measure is also taken on one stream per
part and label revision: every system's first half, system after system
(the learning half), then every system's second half; true events are
named by system and template. Templates of one system can then swallow
another's new events, as on a host that logs for many programs. Reported
as new-found (really new events whose first line opens a new template)
and false-new (new templates whose lines belong to events seen while
learning), with GA over the whole stream, for sigwatch and Drain3 alike.

    python3 benches/generality.py DATA [--sigwatch BIN] [--part dev|held|all] [--no-drain]
        [--perturb P] [--concat]
"""
import argparse
import collections
import csv
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile

SYSTEMS = ["Android", "Apache", "BGL", "HDFS", "HPC", "Hadoop", "HealthApp", "Linux", "Mac",
           "OpenSSH", "OpenStack", "Proxifier", "Spark", "Thunderbird", "Windows", "Zookeeper"]


def part_of(system):
    h = int(hashlib.sha1(system.encode()).hexdigest(), 16)
    return "held" if h % 4 == 0 else "dev"


def ga(truth, found):
    by_truth = collections.defaultdict(set)
    by_found = collections.defaultdict(set)
    for i, (t, f) in enumerate(zip(truth, found)):
        by_truth[t].add(i)
        by_found[f].add(i)
    ok = sum(1 for i, (t, f) in enumerate(zip(truth, found)) if by_found[f] == by_truth[t])
    return ok / len(truth) if truth else 0.0


def novelty(truth, found):
    """(share of new-after-learning templates that are known events,
    share of really new events that surface, new templates, new events)."""
    half = len(truth) // 2
    first_line = {}
    for i, f in enumerate(found):
        first_line.setdefault(f, i)
    seen_events = set(truth[:half])
    new_templates = [f for f, i in first_line.items() if i >= half]
    events_of = collections.defaultdict(collections.Counter)
    for t, f in zip(truth, found):
        events_of[f][t] += 1
    known = sum(1 for f in new_templates if any(t in seen_events for t in events_of[f]))
    first_of_event = {}
    for i, t in enumerate(truth):
        first_of_event.setdefault(t, i)
    really_new = [t for t, i in first_of_event.items() if i >= half]
    surfaced = sum(1 for t in really_new if first_line[found[first_of_event[t]]] >= half)
    return known, len(new_templates), surfaced, len(really_new)


def sigwatch_groups(binary, log):
    out = subprocess.run([binary, "templates", "--lines", "--json", "--max-templates", "100000", log],
                         capture_output=True, check=True).stdout.decode("utf-8", "replace")
    return [json.loads(l)["template"] for l in out.splitlines() if l.strip()]


def drain_groups(contents):
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig
    import logging
    logging.disable(logging.CRITICAL)
    cfg = TemplateMinerConfig()
    cfg.profiling_enabled = False
    miner = TemplateMiner(config=cfg)
    ids = [miner.add_log_message(c)["cluster_id"] for c in contents]
    return ids


NUMBERS = ["0", "7", "27154", "1717073413457", "2.5", "0x7ffff36a51f0", "65535"]
NAMES = ["httpd", "ld-linux.so.2", "worker-7", "user_42", "alpha", "/var/lib/data/seg-0042.log",
         "10.0.0.21:6379", "3f2b8c1e-9d4a-4e6b-8f0a-2c5d7e9b1a3c", "db01.example.net",
         "com.example.Service"]


def perturb(raw_lines, rows, p, seed):
    """The raw lines and contents with each variable replaced by another
    shape with probability p (lines whose content cannot be aligned with
    their template stay as they are)."""
    rnd = random.Random(seed)
    out_raw, out_content = [], []
    cache = {}
    for raw, r in zip(raw_lines, rows):
        content, tmpl = r["Content"], r.get("EventTemplate") or ""
        rx = cache.get(tmpl)
        if rx is None:
            parts = [re.escape(x) for x in tmpl.split("<*>")]
            try:
                rx = re.compile("^" + "(.*?)".join(parts) + "$", re.S)
            except re.error:
                rx = False
            cache[tmpl] = rx
        m = rx.match(content) if rx else None
        at = raw.rfind(content) if content else -1
        if not m or at < 0 or m.lastindex is None:
            out_raw.append(raw)
            out_content.append(content)
            continue
        pieces, last = [], 0
        for g in range(1, m.lastindex + 1):
            a, b = m.span(g)
            pieces.append(content[last:a])
            v = content[a:b]
            # Whole tokens only (`<*>:<*>:<*>` is a clock, `Thunderbird_<*>`
            # one word): bounded by the line's start or end, a space, a
            # bracket, a quote, `=`, or closing punctuation.
            left = content[a - 1] if a > 0 else " "
            right = content[b] if b < len(content) else " "
            after = content[b + 1] if b + 1 < len(content) else " "
            whole = left in " ([<=\"'#" and (right in " )]>,\"';#" or (right in ".:" and after == " "))
            if v and " " not in v and whole and rnd.random() < p:
                # Hex without `0x` (`003a90fc`, a digest) is a number too.
                numeric = re.fullmatch(r"[-+]?[0-9][0-9.,]*|0x[0-9a-fA-F]+|(?=[a-fA-F]*[0-9])[0-9a-fA-F]{4,}", v) is not None
                v = rnd.choice(NUMBERS if numeric else NAMES)
            pieces.append(v)
            last = b
        pieces.append(content[last:])
        new = "".join(pieces)
        out_raw.append(raw[:at] + new + raw[at + len(content):])
        out_content.append(new)
    return out_raw, out_content


def read_rows(structured):
    with open(structured, encoding="utf-8", errors="replace") as f:
        return list(csv.DictReader(f))


def read_lines(log):
    with open(log, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def revisions(data, system):
    old = os.path.join(data, "logpai+loghub", system, f"{system}_2k.log")
    if os.path.exists(old + "_structured.csv"):
        yield "loghub-2k", old, old + "_structured.csv"
    new = os.path.join(data, "logpai+loghub-2.0", "2k_dataset", system, f"{system}_2k.log")
    for name, suffix in (("2.0-2k", "_structured.csv"), ("2.0-2k-corrected", "_structured_corrected.csv")):
        if os.path.exists(new + suffix):
            yield name, new, new + suffix


def show_false_new(truth, found, n, lines):
    """Prints (on stderr) new-after-learning templates whose lines belong
    to events seen while learning, with the template those events had."""
    half = len(truth) // 2
    first_line = {}
    for i, f in enumerate(found):
        first_line.setdefault(f, i)
    learned = collections.defaultdict(collections.Counter)
    example = {}
    for i, (t, f) in enumerate(zip(truth[:half], found[:half])):
        learned[t][f] += 1
        example.setdefault((t, f), i)
    shown = 0
    for f, i in sorted(first_line.items(), key=lambda x: x[1]):
        if i < half or truth[i] not in learned or shown >= n:
            continue
        shown += 1
        was = learned[truth[i]].most_common(1)[0][0]
        print(f"false new: {truth[i]}\n  now: {f}: {lines[i]}\n  was: {was}: {lines[example[(truth[i], was)]]}",
              file=sys.stderr)


def concat_main(a, parts):
    """The concatenated stream per part and label revision (see the module
    doc)."""
    print("| part | labels | systems | lines | GA sigwatch | GA Drain3 | new-found sigwatch | false-new sigwatch | new-found Drain3 | false-new Drain3 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    streams = collections.defaultdict(list)
    for system in SYSTEMS:
        part = part_of(system)
        if part not in parts:
            continue
        for label, log, structured in revisions(a.data, system):
            rows, raw = read_rows(structured), read_lines(log)
            if len(raw) != len(rows):
                continue
            if a.perturb > 0:
                raw, contents = perturb(raw, rows, a.perturb, seed=system)
                rows = [dict(r, Content=c) for r, c in zip(rows, contents)]
            streams[(part, label)].append((system, raw, rows))
    for (part, label), systems in sorted(streams.items()):
        if a.order_seed is not None:
            # Another order of the same systems: interference depends on
            # which system a second half follows.
            systems = list(systems)
            random.Random(a.order_seed).shuffle(systems)
        lines, truth, contents = [], [], []
        for half in (0, 1):
            for system, raw, rows in systems:
                h = len(rows) // 2
                sl = slice(0, h) if half == 0 else slice(h, len(rows))
                lines += raw[sl]
                truth += [system + "\t" + (r.get("EventTemplate") or r["EventId"]) for r in rows[sl]]
                contents += [r["Content"] for r in rows[sl]]
        tmp = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8")
        tmp.write("\n".join(lines) + "\n")
        tmp.close()
        found = sigwatch_groups(a.sigwatch, tmp.name)
        os.unlink(tmp.name)
        if len(found) != len(truth):
            print(f"| {part} | {label} | {len(systems)} | line count {len(found)} != {len(truth)} | | | | | | |")
            continue
        known, new, surfaced, really = novelty(truth, found)
        if a.show:
            show_false_new(truth, found, a.show, lines)
        cells = [f"{ga(truth, found):.3f}"]
        if a.no_drain:
            cells.append("—")
            drain_cells = ["—", "—"]
        else:
            d = drain_groups(contents)
            cells.append(f"{ga(truth, d):.3f}")
            dk, dn, ds, dr = novelty(truth, d)
            drain_cells = [f"{ds}/{dr} ({100.0 * ds / max(dr, 1):.1f} %)",
                           f"{dk}/{dn} ({100.0 * dk / max(dn, 1):.1f} %)"]
        print(f"| {part} | {label} | {len(systems)} | {len(truth)} | {cells[0]} | {cells[1]} | "
              f"{surfaced}/{really} ({100.0 * surfaced / max(really, 1):.1f} %) | "
              f"{known}/{new} ({100.0 * known / max(new, 1):.1f} %) | {drain_cells[0]} | {drain_cells[1]} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--sigwatch", default="target/release/sigwatch")
    ap.add_argument("--part", default="all", choices=["dev", "held", "all"])
    ap.add_argument("--no-drain", action="store_true")
    ap.add_argument("--perturb", type=float, default=0.0)
    ap.add_argument("--concat", action="store_true")
    ap.add_argument("--order-seed", type=int, default=None,
                    help="--concat: shuffle the systems' order with this seed")
    ap.add_argument("--show", type=int, default=0,
                    help="--concat: print up to N false-new templates beside the template their event had")
    a = ap.parse_args()
    parts = ["dev", "held"] if a.part == "all" else [a.part]
    if a.concat:
        concat_main(a, parts)
        return
    print("| part | labels | system | GA sigwatch | GA Drain3 | new after learning: known events | really new events surfacing |")
    print("|---|---|---|---:|---:|---:|---:|")
    summary = collections.defaultdict(lambda: collections.defaultdict(list))
    for system in SYSTEMS:
        part = part_of(system)
        if part not in parts:
            continue
        for label, log, structured in revisions(a.data, system):
            rows = read_rows(structured)
            truth = [r.get("EventTemplate") or r["EventId"] for r in rows]
            contents = [r["Content"] for r in rows]
            tmp = None
            if a.perturb > 0:
                raw = read_lines(log)
                if len(raw) != len(rows):
                    continue
                raw, contents = perturb(raw, rows, a.perturb, seed=system)
                tmp = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8")
                tmp.write("\n".join(raw) + "\n")
                tmp.close()
                log = tmp.name
            found = sigwatch_groups(a.sigwatch, log)
            if tmp:
                os.unlink(tmp.name)
            if len(found) != len(truth):
                print(f"| {part} | {label} | {system} | line count {len(found)} != {len(truth)} | | | |")
                continue
            g = ga(truth, found)
            d = None if a.no_drain else ga(truth, drain_groups(contents))
            known, new, surfaced, really = novelty(truth, found)
            s = summary[(part, label)]
            s["ga"].append(g)
            if d is not None:
                s["drain"].append(d)
            s["known"].append(known)
            s["new"].append(new)
            s["surfaced"].append(surfaced)
            s["really"].append(really)
            s["beats"].append(d is None or g >= d)
            print(f"| {part} | {label} | {system} | {g:.3f} | {'—' if d is None else f'{d:.3f}'} | "
                  f"{known}/{new} | {surfaced}/{really} |")
    print()
    print("| part | labels | systems | mean GA sigwatch | mean GA Drain3 | systems where sigwatch ≥ Drain3 | known events among new templates | really new events surfacing |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for (part, label), s in sorted(summary.items()):
        n = len(s["ga"])
        mean = sum(s["ga"]) / n
        dm = sum(s["drain"]) / len(s["drain"]) if s["drain"] else float("nan")
        known, new = sum(s["known"]), sum(s["new"])
        surf, really = sum(s["surfaced"]), sum(s["really"])
        print(f"| {part} | {label} | {n} | {mean:.3f} | {dm:.3f} | {sum(s['beats'])}/{n} | "
              f"{known}/{new} ({100.0 * known / max(new, 1):.1f} %) | {surf}/{really} ({100.0 * surf / max(really, 1):.1f} %) |")


if __name__ == "__main__":
    main()
