#!/usr/bin/env bash
# Throughput benchmark: sigwatch against peers on the same corpus, in one run.
#
#   bash benches/run.sh [LINES]        # default 2000000
#   RSS_LINES=20000000 bash benches/run.sh   # also check peak RSS at 20 M lines
#
# Prints seconds (best of 3), ratios and peak RSS. A benchmark, not a test:
# CI does not run it. Needs python3 (corpus), ripgrep, grep, jq, GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
LINES=${1:-2000000}
DIR=target/bench
mkdir -p "$DIR"
CORPUS=$DIR/corpus-$LINES.log

for tool in rg jq /usr/bin/time; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "installing the peers (ripgrep, jq, time) with apt-get" >&2
    (apt-get update -qq && apt-get install -y -qq ripgrep jq time) >&2
    break
  fi
done

cargo build --release --quiet
BIN=target/release/sigwatch
if [ ! -s "$CORPUS" ]; then
  echo "generating $LINES lines into $CORPUS" >&2
  python3 benches/gen.py "$LINES" > "$CORPUS"
fi
"$BIN" check --literals > "$DIR/literals.txt"
# A pack 30x larger: the built-in rules plus 300 rules with other literals,
# to show per-line cost does not grow with the number of literals.
python3 - "$DIR/many" <<'PY'
import os, random, sys
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
rng = random.Random(5)
words = ["quota", "shard", "replica", "ledger", "socket", "cipher", "vault", "queue", "bucket", "tenant", "lease", "epoch"]
with open(os.path.join(d, "many.yaml"), "w") as f:
    f.write("rules:\n")
    for i in range(300):
        lit = " ".join(rng.choice(words) for _ in range(3)) + f" {i}"
        f.write(f"  - id: extra.r{i}\n    title: extra {i}\n    severity: info\n    match: {{contains: [\"{lit}\"]}}\n    group_by: node\n    detect: {{count: {{window: 5m}}}}\n")
PY
cp rules/*.yaml "$DIR/many/"
"$BIN" check --literals --rules "$DIR/many" > "$DIR/literals-many.txt"

BYTES=$(stat -c %s "$CORPUS")
echo "corpus: $LINES lines, $((BYTES / 1048576)) MiB; $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "literals: $(wc -l < "$DIR/literals.txt") (built-in pack)"
printf '%-44s %9s %9s %10s\n' "command" "seconds" "MB/s" "peak MiB"

declare -A SECS RSS
measure() {
  local name=$1 cmd=$2 best="" rss=0
  for _ in 1 2 3; do
    # Output goes to a file, not /dev/null: GNU grep notices /dev/null and
    # stops at the first match, even with -c.
    /usr/bin/time -f "%e %M" -o "$DIR/time.txt" bash -c "$cmd" > "$DIR/out.txt"
    read -r e m < "$DIR/time.txt"
    if [ -z "$best" ] || awk "BEGIN{exit !($e < $best)}"; then best=$e; fi
    [ "$m" -gt "$rss" ] && rss=$m
  done
  SECS[$name]=$best
  RSS[$name]=$rss
  printf '%-44s %9.2f %9.0f %10.1f\n' "$name" "$best" "$(awk "BEGIN{print $BYTES/1048576/($best+1e-9)}")" "$(awk "BEGIN{print $rss/1024}")"
}

measure "sigwatch replay FILE" "$BIN replay --no-summary --log-level error $CORPUS"
measure "sigwatch replay FILE (330 rules)" "$BIN replay --no-summary --log-level error --rules $DIR/many $CORPUS"
measure "cat FILE | sigwatch run" "cat $CORPUS | $BIN run --log-level error"
# -c keeps the peers' output small; they still read everything.
measure "rg -j1 -c -F -f literals FILE" "rg -j1 -c -F -f $DIR/literals.txt $CORPUS"
measure "rg -j1 -c -F -f literals FILE (330 rules)" "rg -j1 -c -F -f $DIR/literals-many.txt $CORPUS"
measure "grep -c -F -f literals FILE" "LC_ALL=C grep -c -F -f $DIR/literals.txt $CORPUS"
measure "cat FILE | wc -l" "cat $CORPUS | wc -l"
measure "jq -R select(index(literal))" "jq -cR 'select(index(\"waiting for participants to exit\"))' $CORPUS"

ratio() { awk "BEGIN{printf \"%.2f\", ${SECS[$1]}/${SECS[$2]}}"; }
echo
echo "replay / rg -j1 -F -f         = $(ratio 'sigwatch replay FILE' 'rg -j1 -c -F -f literals FILE')   (target <= 1.0)"
echo "run from pipe / cat | wc -l   = $(ratio 'cat FILE | sigwatch run' 'cat FILE | wc -l')   (target <= 1.1)"
echo "330 rules / built-in pack     = $(ratio 'sigwatch replay FILE (330 rules)' 'sigwatch replay FILE')   (one automaton pass: ~1.0)"
echo "  rg, 330 / 30 literals       = $(ratio 'rg -j1 -c -F -f literals FILE (330 rules)' 'rg -j1 -c -F -f literals FILE')"
echo "replay (330) / rg (330)       = $(ratio 'sigwatch replay FILE (330 rules)' 'rg -j1 -c -F -f literals FILE (330 rules)')"
echo "replay / grep -F -f           = $(ratio 'sigwatch replay FILE' 'grep -c -F -f literals FILE')"
echo "replay / jq                   = $(ratio 'sigwatch replay FILE' 'jq -R select(index(literal))')"

if [ -n "${RSS_LINES:-}" ]; then
  echo
  echo "peak RSS of 'sigwatch run' fed $RSS_LINES generated lines through a pipe:"
  /usr/bin/time -f "%M" -o "$DIR/rss.txt" bash -c "python3 benches/gen.py $RSS_LINES | $BIN run --log-level error > /dev/null"
  small_rss=${RSS["cat FILE | sigwatch run"]}
  echo "  $RSS_LINES lines: $(awk '{printf "%.1f MiB", $1/1024}' "$DIR/rss.txt") (2M lines, same command: $((small_rss / 1024)) MiB)"
fi
