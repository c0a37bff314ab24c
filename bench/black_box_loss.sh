#!/bin/bash
# What a rank's death costs the run (docs/launchers.md "When a rank dies or
# hangs"): for 1, 2 and 8 ranks of 1 ms and 20 ms steps, the last rank sends
# itself SIGKILL right after a known step (tiny_rank --die-after), the launcher
# then stops the others; each rank writes the steps it completed to a file
# (--progress), and the run's stored steps are counted (traceml export).
#
#   bench/black_box_loss.sh BUILD_DIR [CLI]
#
# BUILD_DIR holds tests/traceml_tiny_rank and bin/traceml (used to export);
# CLI is the traceml that launches (default BUILD_DIR/bin/traceml): give an
# older build's to measure it without the black box. With CLI=serve the ranks
# are started by hand into `traceml serve` (two ranks, the second killed).
# With NODES=2, two `traceml run` on this machine stand for two nodes of two
# ranks each: rank 3 (node 1) is killed; node 0's ranks run as many steps.
set -euo pipefail
build=$(cd "$1" && pwd)
cli=${2:-$build/bin/traceml}
tiny=$build/tests/traceml_tiny_rank
export_cli=$build/bin/traceml

count() {  # DIR RANKS: completed (progress files) vs stored steps, per rank
  "$export_cli" export "$1/logs/k" --out "$1/t.jsonl" 2>/dev/null
  python3 - "$1" "$2" <<'PY'
import collections, json, sys
d, n = sys.argv[1], int(sys.argv[2])
stored = collections.Counter()
for line in open(d + "/t.jsonl"):
    j = json.loads(line)
    if j.get("type") == "step":
        stored[j["global_rank"]] += 1
done = {r: int(open(f"{d}/p{r}").read()) for r in range(n)}
lost = sum(max(0, done[r] - stored[r]) for r in range(n))
print(f"completed {sum(done.values())} stored {sum(stored.values())} lost {lost}"
      f" (per rank completed {done}, stored {dict(sorted(stored.items()))})")
PY
}

if [ "${2:-}" = serve ]; then
  for us in 1000 20000; do
    die=$([ "$us" = 1000 ] && echo 1500 || echo 60)
    d=$(mktemp -d)
    "$export_cli" serve --port 0 --env-file "$d/env" --logs-dir "$d/logs" --run-name k \
      --world-size 2 > /dev/null 2>&1 &
    serve=$!
    for _ in $(seq 200); do [ -s "$d/env" ] && break; sleep 0.05; done
    set -a; . "$d/env"; set +a
    for r in 0 1; do
      extra=""; [ "$r" = 1 ] && extra="--die-after $die"
      RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 "$tiny" --steps "$die" \
        --step-us "$us" --progress "$d/p$r" $extra > /dev/null 2>&1 &
    done
    wait "$serve" || true
    echo "serve, 2 ranks, $us us steps: $(count "$d" 2)"
    rm -rf "$d"
  done
  exit 0
fi

if [ "${NODES:-1}" = 2 ]; then
  for us in 1000 20000; do
    die=$([ "$us" = 1000 ] && echo 1500 || echo 60)
    d=$(mktemp -d)
    ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
    set -- $ports
    for node in 0 1; do
      TRACEML_RUN_TOKEN=bench "$cli" run --nnodes 2 --node-rank $node --nproc-per-node 2 \
        --master-addr 127.0.0.1 --master-port "$1" --aggregator-port "$2" --run-name k \
        --logs-dir "$d/logs$node" --mode summary -- sh -c "exec $tiny --steps \
        $([ $node = 0 ] && echo $die || echo 1000000) --for-ms 60000 --step-us $us \
        --progress $d/p\$RANK \$( [ \"\$RANK\" = 3 ] && echo --die-after $die )" \
        > /dev/null 2>&1 &
    done
    wait || true
    mv "$d/logs0" "$d/logs"
    echo "traceml run, 2 nodes of 2 ranks, $us us steps: $(count "$d" 4)"
    rm -rf "$d"
  done
  exit 0
fi

for c in "1 1000 1500" "2 1000 1500" "8 1000 1500" "1 20000 60" "2 20000 60" "8 20000 60"; do
  set -- $c
  n=$1 us=$2 die=$3 victim=$(($1 - 1))
  d=$(mktemp -d)
  "$cli" run --nproc-per-node "$n" --logs-dir "$d/logs" --run-name k --aggregator-port 0 \
    --mode summary -- sh -c "exec $tiny --steps 1000000 --for-ms 60000 --step-us $us \
    --progress $d/p\$RANK \$( [ \"\$RANK\" = $victim ] && echo --die-after $die )" \
    > /dev/null 2>&1 || true
  echo "traceml run, $n ranks, $us us steps: $(count "$d" "$n")"
  rm -rf "$d"
done
