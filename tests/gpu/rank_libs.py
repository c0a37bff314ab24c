#!/usr/bin/env python3
"""Which CUDA libraries a running rank really loaded (tests/gpu/check.sh).

Usage: rank_libs.py ROOT_PID EXE_NAME OUT_FILE [MAX_SECONDS]

Started beside a `traceml run` whose process (or a wrapper such as `timeout`)
is ROOT_PID. Every 0.2 s until ROOT_PID is gone (or MAX_SECONDS, default 300)
it finds the descendants of ROOT_PID whose executable is named EXE_NAME (the
ranks) and reads their /proc/<pid>/maps, keeping every mapped file that
matches the libraries below (they are dlopen'ed at different moments: CUDA
when torch starts, CUPTI when the GPU clock starts, NVML with the sampler).
The launcher's own maps are read too (tagged "launcher"). Writes one line per
library path to OUT_FILE ("rank <pid>: <path>"), or a line saying nothing was
seen, and exits 0.
"""
import os
import re
import sys
import time

LIBS = re.compile(r"/(libcudart|libcupti|libnvidia-ml|libcuda|libnccl|libcublas|libcudnn|"
                  r"libtorch_cuda|libc10_cuda)[^/]*\.so[^/]*$")


def children():
    """pid -> parent pid for every process we can read."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: split after it.
        rest = stat[stat.rfind(")") + 2:].split()
        if len(rest) > 1:
            parents[int(entry)] = int(rest[1])
    return parents


def descendants(root, parents):
    out, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid:
                out.append(child)
                frontier.append(child)
    return out


def exe_name(pid):
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""


def mapped_libs(pid):
    found = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    if LIBS.search(path):
                        found.add(path)
    except OSError:
        pass
    return found


def main():
    root, name, out_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    deadline = time.monotonic() + (float(sys.argv[4]) if len(sys.argv) > 4 else 300.0)
    seen = {}  # (who, path) -> first seen, seconds after start
    ranks = set()
    start = time.monotonic()
    while os.path.exists(f"/proc/{root}") and time.monotonic() < deadline:
        for pid in descendants(root, children()):
            exe = exe_name(pid)
            if exe == name:
                who = f"rank {pid}"
                ranks.add(pid)
            elif exe == "traceml":
                who = f"launcher {pid}"
            else:
                continue
            for path in mapped_libs(pid):
                seen.setdefault((who, path), time.monotonic() - start)
        time.sleep(0.2)
    with open(out_file, "w") as f:
        if not ranks:
            f.write(f"no process named {name} seen under pid {root}\n")
        elif not seen:
            f.write(f"rank(s) {sorted(ranks)} mapped none of the CUDA libraries\n")
        for (who, path), t in sorted(seen.items(), key=lambda kv: (kv[0][0], kv[1], kv[0][1])):
            f.write(f"{who}: {path} (seen at {t:.1f} s)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
