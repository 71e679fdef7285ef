#!/usr/bin/env bash
# Seeds the fuzz corpora from the repository's own fixtures and rules, so
# libFuzzer starts from real shapes instead of from nothing.
# Usage: bash tests/fuzz/seed.sh   (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
c="$here/corpus"
mkdir -p "$c/decode" "$c/engine" "$c/rules" "$c/loki"
n=0
for f in "$root"/fixtures/*.log; do
  # A few hundred lines per fixture, one per corpus file (decode), and
  # 40-line slices (engine) so detectors see runs of related lines.
  head -n 300 "$f" | while IFS= read -r line; do
    n=$((n + 1))
    printf '%s' "$line" > "$c/decode/$(basename "$f" .log)-$n"
  done
  split -l 40 -a 3 <(head -n 400 "$f") "$c/engine/$(basename "$f" .log)-"
done
cp "$root"/rules/*.yaml "$c/rules/"
cp "$root"/fixtures/loki/*.json "$c/loki/" 2>/dev/null || true
echo "corpora: $(ls "$c/decode" | wc -l) decode, $(ls "$c/engine" | wc -l) engine, $(ls "$c/rules" | wc -l) rules, $(ls "$c/loki" | wc -l) loki"
