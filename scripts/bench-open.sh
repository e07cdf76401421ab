#!/usr/bin/env bash
# `tether open` of a session with 1 GiB of stdout against `less +G` on the same file: time
# from starting each until the file's last line is on screen, and peak RSS (VmHWM).
#
# The session is made by a real `tether exec` (a temporary state directory, --max-output 2G so
# the whole GiB is stored): `yes` filler cut to 1 GiB by `head -c`, then one unique last line.
# Each viewer runs in a 200x50 tmux pane (respawn-pane), and capture-pane is polled until the
# unique line shows. The file is in the page cache for both (it was just written). Installs
# tmux and less when missing. Deletes the 1 GiB session at the end.
#
#   bash scripts/bench-open.sh [RUNS]        (default 11 runs of each; prints medians)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
RUNS=${1:-11}
need() { command -v "$1" >/dev/null 2>&1 || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1"; }; }
need tmux
need less
cargo build --release --quiet
TETHER=$(release_tether)

WORK=$(mktemp -d)
SOCKET="tether-bench-open-$$"
cleanup() {
  tmux -L "$SOCKET" kill-server 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export TETHER_STATE_DIR="$WORK/state"
mkdir -m 700 "$TETHER_STATE_DIR"
LAST="the-last-line-of-the-gibibyte-$$"
"$TETHER" exec --max-output 2G --name big -- sh -c \
  "yes 'filler line of the one-gibibyte benchmark, the same again and again' | head -c 1073741824; echo; echo $LAST" \
  >/dev/null 2>&1
LOG=$(ls "$TETHER_STATE_DIR"/sessions/*/01-big/stdout.log)
SESSION=$(basename "$(dirname "$(dirname "$LOG")")")
echo "stdout.log: $(stat -c %s "$LOG") bytes, $(wc -l <"$LOG") lines"

tmux -L "$SOCKET" new-session -d -x 200 -y 50 "sleep 100000"
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# On-CPU time of every thread of process $1 so far, in ms (from schedstat: unlike wall time,
# barely changed by what else runs on the machine).
cpu_ms() {
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ns += $1} END {printf "%d", ns / 1e6}'
}

# Runs `$1` in the pane; prints "ms_to_last_line peak_rss_kib cpu_ms_to_last_line
# ms_to_indexed" (the last: until tether's title no longer says `indexing`; `-` for less).
measure() {
  local start pid elapsed="" cpu="?" indexed="-"
  start=$(now_ms)
  tmux -L "$SOCKET" respawn-pane -k -t 0 "$1"
  pid=$(tmux -L "$SOCKET" display-message -p -t 0 '#{pane_pid}')
  for _ in $(seq 1 20000); do
    if tmux -L "$SOCKET" capture-pane -p -t 0 | grep -q "$LAST"; then
      elapsed=$(($(now_ms) - start))
      cpu=$(cpu_ms "$pid")
      break
    fi
  done
  if [[ $1 == *" open "* ]]; then
    for _ in $(seq 1 20000); do
      if ! tmux -L "$SOCKET" capture-pane -p -t 0 | grep -q "indexing"; then
        indexed=$(($(now_ms) - start))
        break
      fi
    done
  fi
  # The peak includes what comes after the first frame (tether's index filling in).
  sleep 3
  local hwm
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo "?")
  tmux -L "$SOCKET" respawn-pane -k -t 0 "sleep 100000"
  echo "${elapsed:-timeout} $hwm $cpu $indexed"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A TIMES RSS CPU INDEXED
for run in $(seq 1 "$RUNS"); do
  for viewer in tether less; do
    case $viewer in
      tether) cmd="exec env TETHER_STATE_DIR=$TETHER_STATE_DIR $TETHER open $SESSION" ;;
      less) cmd="exec less +G $LOG" ;;
    esac
    read -r ms kib cpu indexed < <(measure "$cmd")
    extra=""
    [ "$indexed" != "-" ] && extra=", all lines indexed after $indexed ms"
    echo "run $run  $viewer: last line after $ms ms ($cpu ms on a CPU), peak RSS $kib KiB$extra"
    INDEXED[$viewer]+="$indexed "
    TIMES[$viewer]+="$ms "
    RSS[$viewer]+="$kib "
    CPU[$viewer]+="$cpu "
  done
done
echo "load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
for viewer in tether less; do
  t=$(tr ' ' '\n' <<<"${TIMES[$viewer]}" | grep -v '^$' | median)
  r=$(tr ' ' '\n' <<<"${RSS[$viewer]}" | grep -v '^$' | median)
  c=$(tr ' ' '\n' <<<"${CPU[$viewer]}" | grep -v '^$' | median)
  printf '%-8s median over %s runs: last line on screen after %s ms (%s ms on a CPU), peak RSS %s MiB\n' \
    "$viewer" "$RUNS" "$t" "$c" "$((r / 1024))"
  sorted=$(tr ' ' '\n' <<<"${TIMES[$viewer]}" | grep -v '^$' | sort -n | tr '\n' ' ')
  echo "         every run, fastest first (ms): $sorted"
done
i=$(tr ' ' '\n' <<<"${INDEXED[tether]}" | grep -v '^$' | median)
echo "tether: the whole GiB indexed (its title exact) after $i ms (median)"
