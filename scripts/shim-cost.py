#!/usr/bin/env python3
"""What `SHIM -c true` costs against `/bin/bash -c true`, timed in the same run.

Usage: scripts/shim-cost.py [-n CALLS] TETHER [TETHER...]

For each tether binary given, a `bash` shim link is made in a scratch directory (state and
XDG_RUNTIME_DIR there too, mode 0700): on a disk by default (`$TMPDIR` or /tmp, where a
user's ~/.local/state is), on tmpfs with `--tmpfs` (/dev/shm, so that the file system does
not show). Each line says which.
Then, on the cgroup path and on the /proc path (TETHER_CGROUP=off), `/bin/bash -c true` and
each shim are run alternately, CALLS times each, 10 ms apart, stdin /dev/null and output to
pipes as an agent calls them; the median of each and the shim's ratio to bash are printed,
with the load average. The wall times of a shared machine swing: only figures of one run
compare. `perf stat -r 30 -e page-faults,task-clock` gives the steadier figures.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", "--calls", type=int, default=40)
    parser.add_argument("--tmpfs", action="store_true",
                        help="state on /dev/shm rather than a disk")
    parser.add_argument("tether", nargs="+")
    args = parser.parse_args()

    base = tempfile.mkdtemp(prefix="tether-shim-cost-",
                            dir="/dev/shm" if args.tmpfs else None)
    place = filesystem(base)
    try:
        shims = []
        for i, binary in enumerate(args.tether):
            links = os.path.join(base, f"shims{i}")
            subprocess.run([os.path.abspath(binary), "shims", links], check=True,
                           stdout=subprocess.DEVNULL)
            shims.append(os.path.join(links, "bash"))
        for path in ("cgroup", "proc"):
            state = os.path.join(base, f"state-{path}")
            runtime = os.path.join(base, f"run-{path}")
            for d in (state, runtime):
                os.mkdir(d, 0o700)
            env = dict(os.environ, TETHER_STATE_DIR=state, XDG_RUNTIME_DIR=runtime,
                       XDG_CONFIG_HOME=os.path.join(base, "config"))
            for name in ("TETHER_SESSION", "TETHER_BROKER_ID", "TETHER_CGROUP"):
                env.pop(name, None)
            if path == "proc":
                env["TETHER_CGROUP"] = "off"
            programs = ["/bin/bash"] + shims
            times = {p: [] for p in programs}
            # One warm-up each: page cache, the session directory.
            for p in programs:
                subprocess.run([p, "-c", "true"], env=env, stdin=subprocess.DEVNULL,
                               capture_output=True)
            for _ in range(args.calls):
                for p in programs:
                    start = time.perf_counter()
                    done = subprocess.run([p, "-c", "true"], env=env, stdin=subprocess.DEVNULL,
                                          capture_output=True)
                    times[p].append(time.perf_counter() - start)
                    if done.returncode != 0:
                        sys.exit(f"{p} -c true exited {done.returncode}: {done.stderr!r}")
                    time.sleep(0.01)
            load = open("/proc/loadavg").read().split()[0]
            bash = statistics.median(times["/bin/bash"]) * 1000
            line = f"{path:6} state on {place}, load {load:>5}  bash {bash:6.2f} ms"
            for binary, shim in zip(args.tether, shims):
                median = statistics.median(times[shim]) * 1000
                line += f"  | {binary}: {median:6.2f} ms ({median / bash:.1f}x)"
            print(line, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def filesystem(path):
    """`tmpfs` or the file system type of the disk `path` is on, from /proc/mounts."""
    path = os.path.realpath(path)
    best = ("", "unknown")
    with open("/proc/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            point, kind = fields[1], fields[2]
            inside = path == point or path.startswith(point.rstrip("/") + "/")
            if inside and len(point) > len(best[0]):
                best = (point, kind)
    return best[1] if best[1] == "tmpfs" else f"a disk ({best[1]})"


if __name__ == "__main__":
    main()
