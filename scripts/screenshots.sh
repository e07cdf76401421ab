#!/usr/bin/env bash
# Makes screenshots/*.svg from the real app: runs `tether demo` in a 160x45 tmux window,
# visits its screens with send-keys, captures each with its colours and converts it to SVG.
# Usage: bash scripts/screenshots.sh   (needs tmux and python3)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
cargo build --release --quiet
bin=$(release_tether)
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

# tether watch over an agent-like run through the shell shim: a burst of short commands
# (some failing), a dev server left running in the background, a test run, and a runaway;
# the list sorted by CPU finds the runaway.
agent_state="$state/agent-state"   # the agent's sessions only, not the demo's
tm new-session -d -s watch -x 160 -y 45 "$bin --state-dir $agent_state watch"
"$bin" shims "$state/shims" >/dev/null
agent_sh() { # the shell command an agent's Bash tool would run (failures are its business)
  TETHER_SESSION=agent-run-42 TETHER_STATE_DIR="$agent_state" "$state/shims/bash" -c "$1" \
    >/dev/null 2>&1 || true
}
(
  for c in 'git status --short' 'ls -la src' 'grep -rn TODO src | head' 'cat Cargo.toml' \
    'git log --oneline -5' 'ls tests' 'grep -c fn src/main.rs' 'test -f missing.txt' \
    'python3 -c "import sys; sys.exit(2)"' 'wc -l src/*.rs | tail -1'; do
    agent_sh "$c"; sleep 0.1
  done
  agent_sh 'python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &'
  agent_sh 'for i in $(seq 1 60); do echo "test case_$i ... ok"; done; echo "test result: FAILED. 59 passed; 1 failed"; exit 101'
  agent_sh 'yes > /dev/null' &
  sleep 30
) &
agent_pid=$!
sleep 9
tm send-keys -t watch o            # busiest first: the runaway on top
sleep 2
tm capture-pane -e -p -t watch > "$state/watch.ansi"
python3 scripts/ansi2svg.py "$state/watch.ansi" "$out/watch.svg" 160 45
echo "screenshots/watch.svg"
"$bin" stop --state-dir "$agent_state" agent-run-42 >/dev/null 2>&1 || true
kill "$agent_pid" 2>/dev/null || true
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
