#!/usr/bin/env bash
# Template-mining throughput: `sigwatch templates` against Drain3 on the same
# lines, in one run.
#
#   git clone --depth 1 https://github.com/logpai/loghub /tmp/loghub
#   bash benches/mining.sh /tmp/loghub [REPEAT]     # default REPEAT 32
#
# The corpus is the 16 LogHub-2k samples concatenated, REPEAT times (32:
# 1,023,584 lines, 143 MB of 16 formats), raw lines with their headers. The
# miner's message cache holds 4,096 messages and the corpus cycles 32,000
# distinct lines, so every line is tokenised: no line is a cache hit.
#
# sigwatch reads the raw lines (header reader, decoder, miner: what novelty
# and `templates` do). Drain3 (pip `drain3`, default TemplateMiner settings,
# no masking, no persistence) gets only the message text after a crude
# header cut, so it does less work per line; it runs on the first
# DRAIN_LINES lines (default 100,000: at ~10,000 lines/s the whole corpus
# would take minutes) and its rate is reported per second like sigwatch's.
# Prints lines/s (median of RUNS runs, default 5) and peak RSS of each.
# A benchmark, not a test: CI does not run it. LogHub is not copied here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${1:?usage: benches/mining.sh LOGHUB_DIR [REPEAT]}
REPEAT=${2:-32}
RUNS=${RUNS:-5}
DRAIN_LINES=${DRAIN_LINES:-100000}
DIR=target/bench
mkdir -p "$DIR"
CORPUS=$DIR/loghub-mix-$REPEAT.log
if [ ! -s "$CORPUS" ]; then
  for _ in $(seq "$REPEAT"); do cat "$ROOT"/*/*_2k.log; done > "$CORPUS"
fi
python3 -c "import drain3" 2>/dev/null || pip install --quiet drain3
[ -x /usr/bin/time ] || (apt-get update -qq && apt-get install -y -qq time) >&2
cargo build --release --quiet
BIN=target/release/sigwatch
LINES=$(wc -l < "$CORPUS")
BYTES=$(wc -c < "$CORPUS")

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

times=()
for _ in $(seq "$RUNS"); do
  /usr/bin/time -f "%e %M" -o "$DIR/mining-time.txt" "$BIN" templates "$CORPUS" --top 1 > /dev/null
  times+=("$(cat "$DIR/mining-time.txt")")
done
sw_s=$(printf '%s\n' "${times[@]}" | awk '{print $1}' | median)
sw_rss=$(printf '%s\n' "${times[@]}" | awk '{print $2}' | sort -n | tail -1)

head -n "$DRAIN_LINES" "$CORPUS" > "$DIR/mining-drain-input.log"
cat > "$DIR/mining-drain.py" <<'EOF'
import re, sys, time
from drain3 import TemplateMiner
from drain3.template_miner_config import TemplateMinerConfig
# The message after a crude header cut (the text after the first ": " or
# "] " in the first 80 bytes), so Drain3 is not asked to read headers.
cut = re.compile(r"^.{0,80}?(?:\]|:) ")
cfg = TemplateMinerConfig()
cfg.profiling_enabled = False
m = TemplateMiner(config=cfg)
lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().splitlines()
t0 = time.perf_counter()
for line in lines:
    m.add_log_message(cut.sub("", line, count=1))
dt = time.perf_counter() - t0
print(f"{len(lines) / dt:.0f} {len(m.drain.clusters)}")
EOF
drain=()
for _ in $(seq "$RUNS"); do
  /usr/bin/time -f "%M" -o "$DIR/mining-drain-rss.txt" python3 "$DIR/mining-drain.py" "$DIR/mining-drain-input.log" > "$DIR/mining-drain-out.txt"
  drain+=("$(cat "$DIR/mining-drain-out.txt") $(cat "$DIR/mining-drain-rss.txt")")
done
dr_rate=$(printf '%s\n' "${drain[@]}" | awk '{print $1}' | median)
dr_clusters=$(printf '%s\n' "${drain[@]}" | awk '{print $2}' | head -1)
dr_rss=$(printf '%s\n' "${drain[@]}" | awk '{print $3}' | sort -n | tail -1)
templates=$("$BIN" templates "$CORPUS" --json --top 1000000 | wc -l)

awk -v l="$LINES" -v b="$BYTES" -v s="$sw_s" -v rss="$sw_rss" -v t="$templates" \
    -v rep="$REPEAT" -v dr="$dr_rate" -v dl="$DRAIN_LINES" -v dc="$dr_clusters" -v drss="$dr_rss" 'BEGIN {
  printf "corpus: %d lines, %.0f MB (LogHub-2k x %d)\n", l, b / 1e6, rep
  printf "%-34s %12s %10s %10s %10s\n", "miner", "lines/s", "lines", "templates", "peak RSS"
  printf "%-34s %12.0f %10d %10d %8.1f MB\n", "sigwatch templates (raw lines)", l / s, l, t, rss / 1024
  printf "%-34s %12.0f %10d %10d %8.1f MB\n", "Drain3 defaults (messages)", dr, dl, dc, drss / 1024
  printf "ratio sigwatch / Drain3: %.0f x\n", (l / s) / dr
}'
