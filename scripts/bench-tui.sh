#!/usr/bin/env bash
# Runs the TUI benchmarks with their peer: installs tmux and mprocs when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v tmux >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux
fi
if ! command -v mprocs >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/mprocs" ]; then
  cargo install --locked mprocs || echo "mprocs could not be installed: the peer is skipped"
fi
cargo bench --bench tui
