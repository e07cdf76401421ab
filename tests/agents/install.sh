#!/usr/bin/env bash
# Installs the pinned agents (tests/agents/pins) into the cache the tests share,
# target/test-agents/NAME-VERSION/, and prints each one's executable path.
#   tests/agents/install.sh [claude|codex|gemini ...]     (no argument: all three)
# Idempotent: an agent whose install finished (the `.installed` stamp) is not touched again.
# Parallel calls (tests run concurrently) serialize on a lock per agent. Fails loudly,
# never skips: no npm, or a failed install, is exit 1 with what went wrong.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${CARGO_TARGET_DIR:-$root/target}/test-agents"
pins="$here/pins"

die() { echo "install.sh: $*" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || die "npm is not installed (apt-get install nodejs npm; .ci/run does it)"
command -v node >/dev/null 2>&1 || die "node is not installed (apt-get install nodejs npm; .ci/run does it)"
command -v flock >/dev/null 2>&1 || die "flock is not installed (apt-get install util-linux)"

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  mapfile -t names < <(grep -v '^#' "$pins" | awk 'NF {print $1}')
fi
mkdir -p "$cache"

for name in "${names[@]}"; do
  read -r _ package version bin < <(awk -v n="$name" '$1 == n' "$pins") \
    || die "no pin for '$name' in $pins (known: $(grep -v '^#' "$pins" | awk '{printf "%s ", $1}'))"
  dir="$cache/$name-$version"
  exe="$dir/node_modules/.bin/$bin"
  (
    flock 9
    if [ ! -e "$dir/.installed" ]; then
      rm -rf "$dir"
      mkdir -p "$dir"
      echo "install.sh: installing $package@$version into $dir" >&2
      if ! npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
          "$package@$version" >&2; then
        die "npm install $package@$version failed (is the npm registry reachable?)"
      fi
      [ -x "$exe" ] || die "$package@$version installed no $exe"
      touch "$dir/.installed"
    fi
  ) 9>"$cache/$name.lock"
  # The node it runs on must be one the package accepts (Gemini CLI wants >= 20; Debian 12's
  # own nodejs is 18, nodesource's is newer).
  wanted=$(node -p "(require('$dir/node_modules/$package/package.json').engines || {}).node || ''")
  have=$(node -p 'process.versions.node')
  if [[ "$wanted" =~ ^\>=\ *([0-9]+) ]] && [ "${have%%.*}" -lt "${BASH_REMATCH[1]}" ]; then
    die "$package@$version needs node $wanted; this node is $have"
  fi
  echo "$exe"
done
