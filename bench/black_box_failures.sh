#!/bin/bash
# What each way a rank fails costs the run (docs/launchers.md "When a rank
# dies or hangs"), under `traceml run` with two ranks: for each case, the
# steps the ranks completed and those stored, and where the report places a
# hung rank against where it really was.
#
#   bench/black_box_failures.sh BUILD_DIR [CLI]
#
# BUILD_DIR holds tests/traceml_tiny_rank, bin/examples/ddp and bin/traceml
# (used to export); CLI is the traceml that launches (default
# BUILD_DIR/bin/traceml): give an older build's to measure it without the
# black box. The memory cgroup case needs root and cgroup v1's memory
# controller; it is skipped without them.
set -uo pipefail
build=$(cd "$1" && pwd)
cli=${2:-$build/bin/traceml}
tiny=$build/tests/traceml_tiny_rank
ddp=$build/bin/examples/ddp
export_cli=$build/bin/traceml

# DIR: completed steps (progress files p0, p1) against stored ones, and the
# stall the summary names (its rank, step and phase).
count() {
  "$export_cli" export "$1/logs/k" --out "$1/t.jsonl" > /dev/null 2>&1
  python3 - "$1" <<'PY'
import collections, json, os, sys
d = sys.argv[1]
stored = collections.Counter()
for line in open(d + "/t.jsonl"):
    j = json.loads(line)
    if j.get("type") == "step":
        stored[j["global_rank"]] += 1
done = {r: int(open(f"{d}/p{r}").read()) for r in (0, 1) if os.path.exists(f"{d}/p{r}")}
lost = sum(max(0, done[r] - stored[r]) for r in done)
out = (f"completed {sum(done.values())} stored {sum(stored.values())} lost {lost}"
       f" (completed {done}, stored {dict(sorted(stored.items()))})")
run = json.load(open(d + "/logs/k/final_summary.json")).get("run", {})
for s in run.get("stalls", []):
    if not s.get("resumed"):
        out += f"; R{s['rank']} named {s['kind']} at step {s['step']} ({s.get('phase')})"
print(out)
PY
}

traced() {  # DIR ARGS...: traceml run of two ranks into DIR/logs/k
  local d=$1
  shift
  "$cli" run --nproc-per-node 2 --logs-dir "$d/logs" --run-name k --aggregator-port 0 \
    --mode summary --interval 0.5 --grace-period-sec 2 -- "$@" > /dev/null 2>&1
}

# ulimit -v: rank 1's allocations fail (std::bad_alloc, SIGABRT).
d=$(mktemp -d)
traced "$d" sh -c "if [ \"\$RANK\" = 1 ]; then ulimit -v 600000; fi; exec $tiny --steps 1000000 \
  --step-us 20000 --for-ms 60000 --progress $d/p\$RANK \$( [ \"\$RANK\" = 1 ] && echo --grow-mb 8 )"
echo "ulimit -v, rank 1 aborts: $(count "$d")"
rm -rf "$d"

# A memory cgroup's OOM killer (SIGKILL).
group=/sys/fs/cgroup/memory/traceml_bench_$$
if mkdir "$group" 2> /dev/null && echo $((300 << 20)) > "$group/memory.limit_in_bytes"; then
  echo $((300 << 20)) > "$group/memory.memsw.limit_in_bytes" 2> /dev/null
  d=$(mktemp -d)
  traced "$d" sh -c "if [ \"\$RANK\" = 1 ]; then echo \$\$ > $group/tasks; fi; exec $tiny \
    --steps 1000000 --step-us 20000 --for-ms 60000 --progress $d/p\$RANK \
    \$( [ \"\$RANK\" = 1 ] && echo --grow-mb 8 )"
  echo "memory cgroup OOM killer, rank 1: $(count "$d")"
  rm -rf "$d"
  rmdir "$group"
else
  echo "memory cgroup OOM killer: skipped (no cgroup v1 memory controller here)"
fi

# SIGSTOP on rank 1, then Ctrl-C (SIGINT to traceml run).
d=$(mktemp -d)
traced "$d" sh -c "echo \$\$ > $d/pid\$RANK; exec $tiny --steps 1000000 --step-us 1000 \
  --for-ms 60000 --progress $d/p\$RANK" &
run=$!
sleep 3
kill -STOP "$(cat "$d/pid1")"
sleep 4
pkill -INT -P "$run"  # traceml run, the child of the backgrounded function
wait "$run"
echo "SIGSTOP on rank 1, then Ctrl-C: $(count "$d") (rank 1 was in step $(( 10#$(cat "$d/p1") + 1 )))"
rm -rf "$d"

# A collective hang: rank 1 stops in step 80's forward pass, rank 0 waits in
# the all-reduce; ended by Ctrl-C, or by Gloo's timeout (12 s).
for end in ctrl-c gloo; do
  d=$(mktemp -d)
  traced "$d" "$ddp" --steps 1000000 --log-every 1000 --slow-rank 1 --hang-at-step 80 \
    --timeout-s "$([ $end = gloo ] && echo 12 || echo 120)" &
  run=$!
  if [ $end = ctrl-c ]; then
    sleep 10
    pkill -INT -P "$run"
  fi
  wait "$run"
  echo 79 > "$d/p0"
  echo 79 > "$d/p1"
  echo "collective hang at step 80 (forward), ended by $end: $(count "$d")"
  rm -rf "$d"
done
