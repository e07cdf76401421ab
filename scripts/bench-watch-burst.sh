#!/usr/bin/env bash
# A burst of short commands, as an agent runs them, with and without a `tether watch` open:
# N commands (default 600: `true`, `echo`, `cat`, `ls | head`), each `"$SHELL" -c CMD`, run
# by a script under `tether agent`; the same script bare (SHELL=/bin/bash) for comparison.
# Prints each run's wall time and the watch's CPU by thread (its main loop and its process
# sampler), in ms and per command, from when it has read the sessions already there (each
# round adds one: the watch lists N, 2N, then 3N commands of the earlier rounds besides). Usage: scripts/bench-watch-burst.sh [path/to/tether] [N]
# (default: the release build). The state directory is made under ${TMPDIR:-/tmp}; its file
# system is printed, since a disk and a tmpfs give different figures.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
BIN=$(tether_under_test "${1:-}")
N=${2:-600}
if ! command -v tmux >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux
fi
umask 077
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tether-bench-burst.XXXXXX")
SOCKET="tether-bench-burst-$$"
cleanup() {
  tmux -L "$SOCKET" kill-server 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

cat >"$WORK/agent.sh" <<SCRIPT
for i in \$(seq $N); do
  case \$((i % 4)) in
    0) c='true';; 1) c="echo \$i";; 2) c='cat /etc/hostname';; 3) c='ls /etc | head -3';;
  esac
  "\$SHELL" -c "\$c" >/dev/null
done
SCRIPT
clock() { date +%s%N; }
ms_since() { echo $(( ($(clock) - $1) / 1000000 )); }
# utime + stime of each thread of process $1, in clock ticks, as "name ticks" lines.
ticks() {
  for task in /proc/"$1"/task/*; do
    echo "$(cat "$task/comm") $(awk '{print $14 + $15}' "$task/stat")"
  done
}
hz=$(getconf CLK_TCK)

echo "state directory on: $(df -T "$WORK" | awk 'NR == 2 {print $2, $1}'); load: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
for round in 1 2 3; do
  t=$(clock)
  SHELL=/bin/bash bash "$WORK/agent.sh"
  echo "round $round: bare bash: $(ms_since "$t") ms"

  t=$(clock)
  "$BIN" agent --state-dir "$WORK/alone" --session "alone-$round" -- bash "$WORK/agent.sh"
  echo "round $round: tether agent, no watch: $(ms_since "$t") ms"

  tmux -L "$SOCKET" new-session -d -x 120 -y 40 "exec $BIN watch --state-dir $WORK/state"
  watch=$(tmux -L "$SOCKET" list-panes -F '#{pane_pid}')
  # Measured from when the watch has read what is there already: its CPU still for a second.
  deadline=$((SECONDS + 120))
  before=$(ticks "$watch")
  while sleep 1; now=$(ticks "$watch"); [ "$now" != "$before" ]; do
    before=$now
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "the watch did not settle in 120 s" >&2
      exit 1
    fi
  done
  t=$(clock)
  "$BIN" agent --state-dir "$WORK/state" --session "watched-$round" -- bash "$WORK/agent.sh"
  took=$(ms_since "$t")
  sleep 1
  after=$(ticks "$watch")
  tmux -L "$SOCKET" kill-server
  cpu=$(paste <(echo "$before") <(echo "$after") | awk -v hz="$hz" -v n="$N" '
    { used = ($4 - $2) * 1000 / hz; total += used; by[$1] += used }
    END { for (t in by) printf "%s %d ms, ", t, by[t]; printf "in all %d ms (%.2f ms a command)", total, total / n }')
  echo "round $round: tether agent with a watch: $took ms; the watch's CPU: $cpu"
done
