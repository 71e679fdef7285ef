#!/usr/bin/env bash
# Peak resident memory against max_groups under a cardinality flood: every
# line comes from a new pod (a new stream) and names a new node, so every
# per-rule map and the stream table fill to their bounds and then evict.
#
#   bash benches/rss.sh [LINES]          # default 1000000
#
# Prints peak RSS (GNU time %M) per max_groups, for rules of the three map
# kinds (count: groups; persist: groups; spread: population + groups); then
# `cat FILE | sigwatch run` on default settings (the built-in pack, novelty
# on, /metrics served) over RUN_LINES (default 2000000) lines from as many
# distinct nodes, none matching a rule, in two shapes: zap JSON naming its
# nodeID, and every line behind a kubectl prefix of its own pod.
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

RUN_LINES=${RUN_LINES:-2000000}
printf '\n%-34s %-14s %s\n' "run, built-in pack, $RUN_LINES nodes" peak_rss_MiB seconds
for SHAPE in json prefix; do
  F=$DIR/nodes-$SHAPE-$RUN_LINES.log
  if [ ! -s "$F" ]; then
    python3 - "$RUN_LINES" "$SHAPE" > "$F" <<'PY'
import sys
n, shape = int(sys.argv[1]), sys.argv[2]
t0 = 1764000000.0
w = sys.stdout.write
for i in range(n):
    if shape == "json":
        w('{"level":"info","ts":%.6f,"logger":"livekit","msg":"room participant count","nodeID":"ND_%08x","room":"RM_%d","count":%d}\n'
          % (t0 + i * 0.001, i * 2654435761 % 2**32, i % 977, i % 13))
    else:
        w('[pod/livekit-%07d/livekit] {"level":"info","ts":%.6f,"msg":"room participant count","nodeID":"ND_%08x"}\n'
          % (i, t0 + i * 0.001, i))
PY
  fi
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  start=$(date +%s.%N)
  rss=$( { /usr/bin/time -f %M "$BIN" run --log-level error --listen "127.0.0.1:$PORT" < "$F" > /dev/null; } 2>&1 | tail -1)
  end=$(date +%s.%N)
  printf "%-34s %-14s %s\n" "$SHAPE" "$((rss / 1024))" "$(python3 -c "print(round($end - $start, 1))")"
done
