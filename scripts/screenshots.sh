#!/usr/bin/env bash
# Makes screenshots/*.svg from the real app: runs `tether demo` in a 160x45 tmux window,
# visits its screens with send-keys, captures each with its colours and converts it to SVG.
# Usage: bash scripts/screenshots.sh   (needs tmux and python3)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin="$PWD/target/release/tether"
out="$PWD/screenshots"
mkdir -p "$out"
state=$(mktemp -d)
sock="tether-shots-$$"
tm() { tmux -L "$sock" "$@"; }
cleanup() { tm kill-server 2>/dev/null || true; rm -rf "$state"; }
trap cleanup EXIT

shot() { # name
  sleep "${2:-1}"
  tm capture-pane -e -p -t 0 > "$state/$1.ansi"
  python3 scripts/ansi2svg.py "$state/$1.ansi" "$out/$1.svg" 160 45
  echo "screenshots/$1.svg"
}

TERM=xterm-256color tm new-session -d -x 160 -y 45 "$bin --state-dir $state demo"
sleep 6
shot main 0
tm send-keys -t 0 j                 # workers: a tree with children and grandchildren
tm send-keys -t 0 Tab               # focus the tree
shot tree 2
tm send-keys -t 0 BTab j            # the runaway: SIGTERM it, then look at its timeline
tm send-keys -t 0 t
sleep 1
tm send-keys -t 0 Tab Tab Tab Tab   # focus the timeline
shot timeline 2
tm send-keys -t 0 K                 # SIGKILL asks first
shot confirm-kill 1
tm send-keys -t 0 y
tm send-keys -t 0 BTab BTab         # stdout of the runaway; search it
tm send-keys -t 0 / y e s Enter
shot search 1
tm send-keys -t 0 '?'
shot help 1
tm send-keys -t 0 Escape a
tm send-keys -t 0 -l 'cargo test --release'
shot new-command 1
tm send-keys -t 0 Escape
tm resize-window -t 0 -x 70 -y 20 2>/dev/null || true
shot too-small 1
tm resize-window -t 0 -x 160 -y 45 2>/dev/null || true
tm send-keys -t 0 BTab BTab         # back to the command list (the runaway is selected)
tm send-keys -t 0 j j j j           # prompt: a terminal of its own, waiting for an answer
tm send-keys -t 0 i
tm send-keys -t 0 -l 'y'
shot input 1
tm send-keys -t 0 Enter C-a
tm send-keys -t 0 j Tab Tab v       # dashboard: its stdout as a terminal shows it
shot screen-view 2
tm send-keys -t 0 v BTab BTab
tm send-keys -t 0 q
sleep 0.5
tm send-keys -t 0 y
sleep 4

# tether watch over an agent's session: three commands started by `tether exec` elsewhere,
# as an agent would, then the dev server stopped from the watch.
tm new-session -d -s watch -x 160 -y 45 "$bin --state-dir $state watch"
agent() { # name, shell command
  TETHER_SESSION=agent-run-42 "$bin" exec --state-dir "$state" -n "$1" -- sh -c "$2" \
    >/dev/null 2>&1 &
}
agent dev-server 'i=0; while :; do i=$((i+1)); echo "GET /api/items 200 ${i}ms"; sleep 0.4; done'
agent tests 'for i in $(seq 1 400); do echo "test case_$i ... ok"; sleep 0.05; done; echo "test result: ok. 400 passed"'
agent search 'setsid sh -c "while :; do sleep 1; done" & find / -xdev -name "*.rs" 2>&1 | head -c 200000; sleep 60'
sleep 5
tm send-keys -t watch j
sleep 1
tm capture-pane -e -p -t watch > "$state/watch.ansi"
python3 scripts/ansi2svg.py "$state/watch.ansi" "$out/watch.svg" 160 45
echo "screenshots/watch.svg"
"$bin" stop --state-dir "$state" agent-run-42 >/dev/null 2>&1 || true
wait

# The time cursor of `tether open` over the checked-in every-kind session: the `killed`
# command at the watchdog's TERM (the 7th notable event), every pane as it was then.
cp -r tests/fixtures/every-kind "$state/every-kind"
tm new-session -d -s open -x 160 -y 45 "$bin open $state/every-kind"
sleep 2
tm send-keys -t open j j j          # killed: the watchdog's command
tm send-keys -t open Home           # the cursor on the first event
tm send-keys -t open '}' '}' '}' '}' '}' '}' '}'
sleep 1
tm capture-pane -e -p -t open > "$state/time-cursor.ansi"
python3 scripts/ansi2svg.py "$state/time-cursor.ansi" "$out/time-cursor.svg" 160 45
echo "screenshots/time-cursor.svg"
tm send-keys -t open q
