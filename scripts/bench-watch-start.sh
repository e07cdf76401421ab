#!/usr/bin/env bash
# `tether watch` start → its first frame, over many recent sessions: one command is journaled
# by `tether exec`, its session copied until there are N (default 5,001; every copy recent, so
# the watch follows them all), then a watch starts in tmux (200x60) and the screen is read
# until its frame is there. Five runs; prints each time in ms. Usage:
# scripts/bench-watch-start.sh [path/to/tether] [N] (default: the release build, 5001).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
BIN=$(tether_under_test "${1:-}")
N=${2:-5001}
WORK=$(mktemp -d /tmp/tether-bench-watch-start.XXXXXX)
SOCKET="tether-bench-watch-start-$$"
STATE="$WORK/state"
cleanup() {
  tmux -L "$SOCKET" kill-server 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$BIN" exec --state-dir "$STATE" --session s00000 -- sh -c 'echo out; echo err >&2' \
  >/dev/null 2>&1 </dev/null
for i in $(seq -w 1 $((N - 1))); do
  cp -a "$STATE/sessions/s00000" "$STATE/sessions/s$i"
done
# Copies keep their times: touched, so every session ended just now.
find "$STATE/sessions" -exec touch {} +

times=()
for run in 1 2 3 4 5; do
  start=$(date +%s%N)
  tmux -L "$SOCKET" new-session -d -x 200 -y 60 "exec $BIN --state-dir $STATE watch"
  until tmux -L "$SOCKET" capture-pane -p -t 0 | grep -q Commands; do
    if (($(date +%s%N) - start > 120000000000)); then
      echo "no frame within 120 s" >&2
      break
    fi
    sleep 0.01
  done
  end=$(date +%s%N)
  times+=($(((end - start) / 1000000)))
  tmux -L "$SOCKET" kill-server 2>/dev/null || true
  sleep 0.5
done
echo "watch start → first frame over $N sessions (5 runs, ms): ${times[*]}"
