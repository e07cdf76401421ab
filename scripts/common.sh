# What the scripts share; sourced, not run.

# The release build's tether. The build names its target (.cargo/config.toml), so the binary
# is under target/TRIPLE/release/; target/release/ is where a build without that puts it.
release_tether() {
  local candidate
  for candidate in "$PWD"/target/*/release/tether "$PWD"/target/release/tether; do
    if [ -x "$candidate" ]; then
      echo "$candidate"
      return
    fi
  done
  echo "no release build of tether under $PWD/target: run cargo build --release" >&2
  return 1
}

# The tether a benchmark measures: the path it was given, or the release build, built first.
tether_under_test() {
  if [ -n "${1:-}" ]; then
    echo "$1"
    return
  fi
  cargo build --release --quiet >&2
  release_tether
}
