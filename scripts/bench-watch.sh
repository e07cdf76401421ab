#!/usr/bin/env bash
# Broker start → its row in `tether watch`: a watch runs in tmux (200x60); 20 times, a
# `tether exec -- sleep 1` starts and the screen is read until its row is there. Prints the
# median and the max in ms, and the same for exec start → the broker's command.json on disk
# (the part no watch can shorten). Usage: scripts/bench-watch.sh [path/to/tether] (default: the
# release build). The time counts from the exec's start, so it includes exec starting its
# broker: an upper bound of broker start → row.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
BIN=$(tether_under_test "${1:-}")
if ! command -v tmux >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux
fi
WORK=$(mktemp -d /tmp/tether-bench-watch.XXXXXX)
SOCKET="tether-bench-watch-$$"
STATE="$WORK/state"
cleanup() {
  tmux -L "$SOCKET" kill-server 2>/dev/null || true
  # The execs were started here; wait for each (sleep 1 ends by itself).
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

tmux -L "$SOCKET" new-session -d -x 200 -y 60 "exec $BIN --state-dir $STATE watch"
until tmux -L "$SOCKET" capture-pane -p -t 0 | grep -q Commands; do sleep 0.05; done

times=()
floors=()
for i in $(seq -w 1 20); do
  start=$(date +%s%N)
  floor=""
  "$BIN" exec --state-dir "$STATE" --session bench --name "w$i" -- sleep 1 \
    >/dev/null 2>&1 </dev/null &
  until tmux -L "$SOCKET" capture-pane -p -t 0 | grep -q "bench/w$i"; do
    # When the broker had written command.json (what names the row): the floor.
    if [ -z "$floor" ] && compgen -G "$STATE/sessions/bench/*-w$i/command.json" >/dev/null; then
      floor=$(date +%s%N)
    fi
    if (($(date +%s%N) - start > 5000000000)); then
      echo "row w$i did not appear within 5 s" >&2
      break
    fi
    sleep 0.002
  done
  end=$(date +%s%N)
  times+=($(((end - start) / 1000000)))
  floors+=($(((${floor:-$end} - start) / 1000000)))
  sleep 0.2
done
wait
summary() {
  local sorted
  sorted=$(printf '%s\n' "$@" | sort -n)
  echo "median $(echo "$sorted" | sed -n '10p;11p' | awk '{s+=$1} END {print s/2}') ms, max $(echo "$sorted" | tail -1) ms  [$(echo $sorted)]"
}
echo "exec start → row in the watch (20 runs): $(summary "${times[@]}")"
echo "exec start → broker wrote command.json: $(summary "${floors[@]}")"
