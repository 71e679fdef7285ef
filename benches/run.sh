#!/usr/bin/env bash
# Throughput benchmark: sigwatch against peers on the same corpora, in one run.
#
#   bash benches/run.sh [LINES]              # default 2000000
#   RSS_LINES=20000000 bash benches/run.sh   # also peak RSS of `run` at 20 M lines
#   PROFILE=1 bash benches/run.sh            # also a perf profile of each replay thread
#
# Five corpora of LINES lines each (benches/gen.py): `mixed` (kubectl/stern
# prefixed livekit and egress, kube events, kubelet journal, gateway logfmt,
# plain text) and `json` (plain zap JSON from many nodes, no prefixes, as
# files and Loki deliver them), `keyed` (json with nodeID on every line) and
# `traced` (keyed plus a traceID and requestID per line), `slow` (keyed at
# 400 lines per second of event time instead of 1000). Prints seconds (median and min of 5 runs),
# MB/s, peak RSS, the stage timings (block scan vs engine, each alone), and
# the target pairs (benches/pairs.py: A and B alternating, the median ratio
# with its min–max). A benchmark, not a test: CI does not run it. Needs python3, ripgrep, grep, jq, GNU time (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
LINES=${1:-2000000}
DIR=target/bench
mkdir -p "$DIR"

for tool in rg jq /usr/bin/time; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "installing the peers (ripgrep, jq, time) with apt-get" >&2
    (apt-get update -qq && apt-get install -y -qq ripgrep jq time) >&2
    break
  fi
done

cargo build --release --quiet
cargo bench --bench stages --no-run --quiet 2>/dev/null
BIN=target/release/sigwatch
MIXED=$DIR/corpus-$LINES.log
JSON=$DIR/corpus-json-$LINES.log
[ -s "$MIXED" ] || { echo "generating $LINES mixed lines into $MIXED" >&2; python3 benches/gen.py "$LINES" > "$MIXED"; }
[ -s "$JSON" ] || { echo "generating $LINES json lines into $JSON" >&2; python3 benches/gen.py "$LINES" --shape json > "$JSON"; }
KEYED=$DIR/corpus-keyed-$LINES.log
TRACED=$DIR/corpus-traced-$LINES.log
[ -s "$KEYED" ] || { echo "generating $LINES keyed lines into $KEYED" >&2; python3 benches/gen.py "$LINES" --shape keyed > "$KEYED"; }
[ -s "$TRACED" ] || { echo "generating $LINES traced lines into $TRACED" >&2; python3 benches/gen.py "$LINES" --shape traced > "$TRACED"; }
# keyed at 400 lines per second of event time (the others: 1000): what the
# novelty's chatter budget sees on a slower, longer log.
SLOW=$DIR/corpus-keyed400-$LINES.log
[ -s "$SLOW" ] || { echo "generating $LINES keyed lines at 400/s into $SLOW" >&2; python3 benches/gen.py "$LINES" --shape keyed --per-second 400 > "$SLOW"; }
"$BIN" check --literals > "$DIR/literals.txt"

# Packs 30x larger: the built-in rules plus 300 rules with other literals,
# (a) word triples from 12 words, (b) triples from 120 words, to show the
# per-line cost does not grow with the number of literals.
python3 - "$DIR" <<'PY'
import os, random, sys
base = sys.argv[1]
def pack(name, words, seed):
    d = os.path.join(base, name); os.makedirs(d, exist_ok=True)
    rng = random.Random(seed)
    with open(os.path.join(d, "many.yaml"), "w") as f:
        f.write("rules:\n")
        for i in range(300):
            lit = " ".join(rng.choice(words) for _ in range(3)) + f" {i}"
            f.write(f"  - id: extra.r{i}\n    title: extra {i}\n    severity: info\n    match: {{contains: [\"{lit}\"]}}\n    group_by: node\n    detect: {{count: {{window: 5m}}}}\n")
pack("many", ["quota", "shard", "replica", "ledger", "socket", "cipher", "vault", "queue", "bucket", "tenant", "lease", "epoch"], 5)
rng = random.Random(11)
syl = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "xe", "zu", "pa", "de"]
vocab = sorted({"".join(rng.choice(syl) for _ in range(3)) for _ in range(400)})[:120]
pack("many-varied", vocab, 7)
PY
for p in many many-varied; do
  cp rules/*.yaml "$DIR/$p/"
  "$BIN" check --literals --rules "$DIR/$p" > "$DIR/literals-$p.txt"
done

RUNS=${RUNS:-5}
BYTES_MIXED=$(stat -c %s "$MIXED")
BYTES_JSON=$(stat -c %s "$JSON")
BYTES_KEYED=$(stat -c %s "$KEYED")
BYTES_TRACED=$(stat -c %s "$TRACED")
BYTES_SLOW=$(stat -c %s "$SLOW")
echo "corpora: $LINES lines each; mixed $((BYTES_MIXED / 1048576)) MiB, json $((BYTES_JSON / 1048576)) MiB; $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "literals: $(wc -l < "$DIR/literals.txt") (built-in pack), $(wc -l < "$DIR/literals-many.txt") and $(wc -l < "$DIR/literals-many-varied.txt") (330-rule packs)"
echo "each command runs $RUNS times (RUNS=…); ratios use the medians (the VM's noise, and"
echo "cat | wc -l's spread, make a best-of-N a lottery); min is shown too"
printf '%-48s %9s %9s %9s %10s\n' "command" "median s" "min s" "MB/s" "peak MiB"

declare -A SECS MINS RSS
printf '%-48s %9s %9s %9s %10s\n' "command" "median s" "min s" "MB/s" "peak MiB" > "$DIR/table.txt"
measure() {
  local name=$1 bytes=$2 cmd=$3 rss=0 times=()
  for _ in $(seq "$RUNS"); do
    # Output goes to a file, not /dev/null: GNU grep notices /dev/null and
    # stops at the first match, even with -c.
    /usr/bin/time -f "%e %M" -o "$DIR/time.txt" bash -c "$cmd" > "$DIR/out.txt"
    read -r e m < "$DIR/time.txt"
    times+=("$e")
    [ "$m" -gt "$rss" ] && rss=$m
  done
  local sorted med
  sorted=$(printf '%s\n' "${times[@]}" | sort -g)
  med=$(echo "$sorted" | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
  SECS[$name]=$med
  MINS[$name]=$(echo "$sorted" | head -1)
  RSS[$name]=$rss
  printf '%-48s %9.2f %9.2f %9.0f %10.1f\n' "$name" "$med" "${MINS[$name]}" "$(awk "BEGIN{print $bytes/1048576/($med+1e-9)}")" "$(awk "BEGIN{print $rss/1024}")" | tee -a "$DIR/table.txt"
}

Q="--no-summary --log-level error"
for shape in mixed json keyed traced slow; do
  case $shape in
    mixed) F=$MIXED; B=$BYTES_MIXED;;
    json) F=$JSON; B=$BYTES_JSON;;
    keyed) F=$KEYED; B=$BYTES_KEYED;;
    traced) F=$TRACED; B=$BYTES_TRACED;;
    slow) F=$SLOW; B=$BYTES_SLOW;;
  esac
  measure "[$shape] sigwatch replay FILE" "$B" "$BIN replay $Q $F"
  measure "[$shape] sigwatch replay FILE --no-novelty" "$B" "$BIN replay $Q --no-novelty $F"
  measure "[$shape] cat FILE | sigwatch run" "$B" "cat $F | $BIN run --listen none --log-level error"
  measure "[$shape] rg -j1 -c -F -f literals FILE" "$B" "rg -j1 -c -F -f $DIR/literals.txt $F"
  measure "[$shape] grep -c -F -f literals FILE" "$B" "LC_ALL=C grep -c -F -f $DIR/literals.txt $F"
  measure "[$shape] cat FILE | wc -l" "$B" "cat $F | wc -l"
done
measure "[mixed] sigwatch replay FILE (330 rules)" "$BYTES_MIXED" "$BIN replay $Q --rules $DIR/many $MIXED"
measure "[mixed] sigwatch replay FILE (330 varied)" "$BYTES_MIXED" "$BIN replay $Q --rules $DIR/many-varied $MIXED"
measure "[mixed] rg -j1 -c -F -f literals FILE (330)" "$BYTES_MIXED" "rg -j1 -c -F -f $DIR/literals-many.txt $MIXED"
measure "[mixed] jq -R select(index(literal))" "$BYTES_MIXED" "jq -cR 'select(index(\"waiting for participants to exit\"))' $MIXED"

# The targets' pairs, A and B alternating in each round (the VM's noise is
# the min–max beside each median ratio): replay / rg (wall <= 1.0, CPU <=
# 1.5), novelty on / off (<= 1.10), cat | run / cat | wc -l (<= 1.5).
echo
echo "paired runs (benches/pairs.py; targets: replay/rg <= 1.0 wall and <= 1.5 CPU, novelty on/off <= 1.10, cat|run / cat|wc -l <= 1.5):"
python3 benches/pairs.py --runs "$RUNS" --bin "$BIN" "$MIXED" "$JSON" "$KEYED" "$TRACED" "$SLOW"

ratio() { awk "BEGIN{printf \"%.2f\", ${SECS[$1]}/${SECS[$2]}}"; }
verdict() { awk "BEGIN{exit !($1 <= $2)}" && echo "met" || echo "NOT MET"; }
report() { local r; r=$(ratio "$2" "$3"); printf '%-44s = %5s   (target <= %s: %s)\n' "$1" "$r" "$4" "$(verdict "$r" "$4")"; }
echo
report "[mixed] 330 rules / built-in pack" "[mixed] sigwatch replay FILE (330 rules)" "[mixed] sigwatch replay FILE" 1.1
report "[mixed] 330 varied rules / built-in pack" "[mixed] sigwatch replay FILE (330 varied)" "[mixed] sigwatch replay FILE" 1.1
echo "  rg, 330 / 30 literals                      = $(ratio '[mixed] rg -j1 -c -F -f literals FILE (330)' '[mixed] rg -j1 -c -F -f literals FILE')"
echo "  replay / grep -F -f (mixed, json)          = $(ratio '[mixed] sigwatch replay FILE' '[mixed] grep -c -F -f literals FILE'), $(ratio '[json] sigwatch replay FILE' '[json] grep -c -F -f literals FILE')"
echo "  replay / jq (mixed)                        = $(ratio '[mixed] sigwatch replay FILE' '[mixed] jq -R select(index(literal))')"
max_rss=0
for k in "${!RSS[@]}"; do case $k in *sigwatch*) [ "${RSS[$k]}" -gt "$max_rss" ] && max_rss=${RSS[$k]};; esac; done
echo "  peak RSS of any sigwatch run above         = $(awk "BEGIN{printf \"%.1f\", $max_rss/1024}") MiB   (target <= 64: $(verdict "$max_rss" 65536))"

echo
echo "stages, each alone over the file in memory (the replay overlaps them on two threads):"
for f in "$MIXED" "$JSON"; do
  cargo bench --quiet --bench stages -- "$f" 2>/dev/null | tail -1 | sed "s|^|  $(basename "$f"): |"
done
cargo bench --quiet --bench stages -- "$MIXED" "$DIR/many" 2>/dev/null | tail -1 | sed "s|^|  $(basename "$MIXED"), 330 rules: |"

if [ -n "${RSS_LINES:-}" ]; then
  echo
  echo "peak RSS of 'sigwatch run' fed $RSS_LINES generated lines through a pipe:"
  /usr/bin/time -f "%M" -o "$DIR/rss.txt" bash -c "python3 benches/gen.py $RSS_LINES | $BIN run --log-level error > /dev/null"
  small_rss=${RSS["[mixed] cat FILE | sigwatch run"]}
  echo "  $RSS_LINES lines: $(awk '{printf "%.1f MiB", $1/1024}' "$DIR/rss.txt") ($LINES lines, same command: $(awk "BEGIN{printf \"%.1f\", $small_rss/1024}") MiB)"
fi

if [ -n "${PROFILE:-}" ] && command -v perf >/dev/null 2>&1; then
  echo
  echo "perf profile of 'sigwatch replay' on the mixed corpus (self time, top entries per thread):"
  perf record -q -e cpu-clock -F 2000 -g -o "$DIR/perf.data" "$BIN" replay $Q "$MIXED" > /dev/null 2>&1
  for t in sigwatch sigwatch-read; do
    echo "  thread $t:"
    perf report -i "$DIR/perf.data" --no-children --comm "$t" --sort symbol 2>/dev/null \
      | awk '/^ +[0-9]/ && n < 12 { n++; print }' | sed -E 's/ +- +- *$//; s/^/    /' | cut -c1-130
  done
fi
