#!/usr/bin/env bash
# A/B: two sigwatch binaries on the same corpora, runs interleaved (A, B,
# A, B …) so the VM's drift hits both alike; medians of wall and user CPU
# time, and their ratio. With CALLGRIND=1, also the instructions each
# executes on the first 200 000 lines (valgrind's count: repeatable, unlike
# time on this VM).
#
#   git worktree add /tmp/base <commit> && (cd /tmp/base && cargo build --release)
#   cargo build --release
#   bash benches/ab.sh /tmp/base/target/release/sigwatch target/release/sigwatch
#   RUNS=11 CALLGRIND=1 bash benches/ab.sh OLD NEW
#
# The corpora are benches/run.sh's (generated if missing). A benchmark, not
# a test.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: benches/ab.sh OLD_BIN NEW_BIN}
B=${2:?usage: benches/ab.sh OLD_BIN NEW_BIN}
RUNS=${RUNS:-7}
LINES=${LINES:-2000000}
DIR=target/bench
mkdir -p "$DIR"
MIXED=$DIR/corpus-$LINES.log
JSON=$DIR/corpus-json-$LINES.log
[ -s "$MIXED" ] || python3 benches/gen.py "$LINES" > "$MIXED"
[ -s "$JSON" ] || python3 benches/gen.py "$LINES" --shape json > "$JSON"
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time; }

median() { sort -n | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }

for corpus in "$MIXED" "$JSON"; do
  : > "$DIR/ab-a.txt"
  : > "$DIR/ab-b.txt"
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f "%e %U" -a -o "$DIR/ab-a.txt" "$A" replay --no-summary --log-level error "$corpus" > "$DIR/ab-out-a.txt"
    /usr/bin/time -f "%e %U" -a -o "$DIR/ab-b.txt" "$B" replay --no-summary --log-level error "$corpus" > "$DIR/ab-out-b.txt"
  done
  wa=$(cut -d' ' -f1 "$DIR/ab-a.txt" | median)
  wb=$(cut -d' ' -f1 "$DIR/ab-b.txt" | median)
  ua=$(cut -d' ' -f2 "$DIR/ab-a.txt" | median)
  ub=$(cut -d' ' -f2 "$DIR/ab-b.txt" | median)
  same=$(cmp -s "$DIR/ab-out-a.txt" "$DIR/ab-out-b.txt" && echo "same alerts" || echo "ALERTS DIFFER")
  printf '%-34s wall %5ss -> %5ss (%s)   user %5ss -> %5ss (%s)   %s\n' \
    "$(basename "$corpus"), $RUNS runs" "$wa" "$wb" "$(awk -v a="$wa" -v b="$wb" 'BEGIN{printf "%.3f", b/a}')" \
    "$ua" "$ub" "$(awk -v a="$ua" -v b="$ub" 'BEGIN{printf "%.3f", b/a}')" "$same"
  if [ "${CALLGRIND:-0}" = 1 ]; then
    command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
    head -200000 "$corpus" > "$DIR/ab-slice.log"
    ia=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$A" replay --no-summary --log-level error "$DIR/ab-slice.log" 2>&1 >/dev/null | awk '/Collected/ {print $NF}')
    ib=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$B" replay --no-summary --log-level error "$DIR/ab-slice.log" 2>&1 >/dev/null | awk '/Collected/ {print $NF}')
    printf '%-34s instructions %s -> %s (%s)\n' "  first 200000 lines" "$ia" "$ib" "$(awk -v a="$ia" -v b="$ib" 'BEGIN{printf "%.3f", b/a}')"
  fi
done
