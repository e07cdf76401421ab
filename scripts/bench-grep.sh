#!/usr/bin/env bash
# tether grep against grep over 1 GiB of stored stdout, in the same run, on the same file.
#
# The 1 GiB is made by a real `tether exec` (an awk program printing varied log lines, cut
# to exactly 1 GiB), so the file searched is the journal's own stdout.log. Each search runs
# under /usr/bin/time -v for wall time and peak RSS, twice, the second run reported (the
# file is in the page cache for both tools). Everything is removed at the end.
#
#   scripts/bench-grep.sh            # 1 GiB
#   BENCH_BYTES=104857600 scripts/bench-grep.sh   # a quicker 100 MiB
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
BYTES=${BENCH_BYTES:-1073741824}
cargo build --release --quiet
TETHER=$(release_tether)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tether-bench-grep.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
STATE=$WORK/state
export XDG_CONFIG_HOME=$WORK/config   # no [retention] of the user's during the bench
unset TETHER_SESSION TETHER_BROKER_ID

# Log lines of 60-120 bytes: a level, a worker, a request id, a time, a path; `ERROR` once
# every 100,000 lines, `in 89N ms` on about one line in 90, `worker-7 ` on one in 32.
# Throughput is the file's size over the wall time; the machine may be shared, so the CPU
# time (user + system) is printed too.
GEN='BEGIN { srand(7); split("INFO DEBUG WARN INFO INFO", lv, " ");
  for (i = 0; ; i++) {
    if (i % 100000 == 99999) printf "2026-11-30T12:%02d:%02d.%03d ERROR worker-%d connection refused by 10.0.%d.%d\n", i/60000%60, i/1000%60, i%1000, i%32, i%256, i%200;
    else printf "2026-11-30T12:%02d:%02d.%03d %s worker-%d request %d done in %d ms path=/api/v1/items/%d\n", i/60000%60, i/1000%60, i%1000, lv[i%5+1], i%32, i*7919%1000003, int(rand()*900), int(rand()*100000);
  } }'
echo "making $BYTES bytes of stdout through tether exec ..."
start=$(date +%s.%N)
"$TETHER" --state-dir "$STATE" exec --no-pty --max-output 2G -n gen -- \
  sh -c "awk '$GEN' | head -c $BYTES" >/dev/null
echo "  done in $(echo "$(date +%s.%N) - $start" | bc) s"
SESSION=$(basename "$(ls -d "$STATE"/sessions/*/)")
LOG=$STATE/sessions/$SESSION/01-gen/stdout.log
echo "stored: $(stat -c %s "$LOG") bytes in $LOG"

# measure LABEL OUTFILE CMD... : prints wall seconds, MB/s, peak RSS and output lines.
measure() {
  local label=$1 out=$2; shift 2
  "$@" >"$out" 2>/dev/null || true          # warm-up (and page cache)
  /usr/bin/time -v -o "$WORK/time" "$@" >"$out" 2>/dev/null || true
  local wall cpu rss lines
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$WORK/time")
  cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { print s }' "$WORK/time")
  rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.1f", $2 / 1024 }' "$WORK/time")
  lines=$(wc -l <"$out")
  case $label in
    *"-c"*) lines="count $(cat "$out")" ;;
    *) lines="$lines lines" ;;
  esac
  printf "%-52s %7.2f s %7.2f s %7.0f MB/s %7s MiB %16s\n" "$label" "$wall" "$cpu" \
    "$(echo "$BYTES / 1000000 / ($wall + 0.000001)" | bc -l)" "$rss" "$lines"
}

echo
printf "%-52s %9s %9s %12s %11s %16s\n" "search" "wall" "cpu" "throughput" "peak RSS" "output"
for pattern in 'ERROR' 'in 89[0-9] ms' 'worker-7 '; do
  measure "tether grep '$pattern'" "$WORK/out" "$TETHER" --state-dir "$STATE" grep "$pattern" "$SESSION"
  measure "grep -cE '$pattern' (count only)" "$WORK/out" grep -cE "$pattern" "$LOG"
  measure "grep -nE '$pattern' (lines printed)" "$WORK/out" grep -nE "$pattern" "$LOG"
done
echo
echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); $(grep --version | head -1)"
