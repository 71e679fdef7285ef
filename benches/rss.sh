#!/usr/bin/env bash
# Peak resident memory against max_groups under a cardinality flood: every
# line comes from a new pod (a new stream) and names a new node, so every
# per-rule map and the stream table fill to their bounds and then evict.
#
#   bash benches/rss.sh [LINES]          # default 1000000
#
# Prints peak RSS (GNU time %M) per max_groups, for rules of the three map
# kinds (count: groups; persist: groups; spread: population + groups).
# A measurement, not a test: CI does not run it (tests/cardinality.rs holds
# the bound in CI). Needs python3 and GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
LINES=${1:-1000000}
DIR=target/bench
mkdir -p "$DIR"
FLOOD=$DIR/flood-$LINES.log
if ! [ -x /usr/bin/time ]; then
  (apt-get update -qq && apt-get install -y -qq time) >&2
fi
cargo build --release --quiet
BIN=target/release/sigwatch
if [ ! -s "$FLOOD" ]; then
  python3 - "$LINES" > "$FLOOD" <<'PY'
import sys
n = int(sys.argv[1])
t0 = 1764000000
out = sys.stdout
for i in range(n):
    msg = "failed to mark as draining" if i % 10 == 0 else ("not enough cpu" if i % 10 == 5 else "room closed")
    out.write('[pod/api-%07x-x/c] {"level":"error","ts":%d.%03d,"msg":"%s","nodeID":"ND_%012d"}\n'
              % (i, t0 + i // 1000, i % 1000, msg, i))
PY
fi
printf '%-12s %-14s %s\n' max_groups peak_rss_MiB seconds
for MG in 1000 10000 100000 1000000; do
  R=$DIR/rss-rules-$MG.yaml
  cat > "$R" <<YAML
rules:
  - id: flood.count
    title: t
    severity: warning
    match: {contains: ["failed to mark as draining"]}
    group_by: node
    max_groups: $MG
    detect: {count: {threshold: 3, window: 10m}}
  - id: flood.persist
    title: t
    severity: warning
    match: {contains: ["failed to mark as draining"]}
    group_by: node
    max_groups: $MG
    detect: {persist: {for: 5m, max_gap: 2m}}
  - id: flood.spread
    title: t
    severity: warning
    match: {contains: ["not enough cpu"]}
    group_by: node
    max_groups: $MG
    detect: {spread: {window: 10m, fraction: 0.5, min_groups: 2}}
YAML
  start=$(date +%s.%N)
  rss=$(/usr/bin/time -f %M "$BIN" replay --log-level error --rules "$R" "$FLOOD" 2>&1 >/dev/null | tail -1)
  end=$(date +%s.%N)
  printf "%-12s %-14s %s\n" "$MG" "$((rss / 1024))" "$(python3 -c "print(round($end - $start, 1))")"
done
