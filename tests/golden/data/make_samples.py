#!/usr/bin/env python3
"""Regenerates the sample telemetry files of tests/golden/data (format:
docs/telemetry-format.md). Deterministic: each file has its own fixed seed, so
running this again rewrites the same bytes.

    python3 tests/golden/data/make_samples.py [OUTPUT_DIR]

Every file is one training run shaped to show one diagnosis:
  single_input_bound.jsonl   1 rank, CPU only, input wait ~30% of the step
  ddp_input_straggler.jsonl  2 DDP ranks, rank 1 waits ~40 ms for input, rank 0
                             absorbs the difference in backward (the all-reduce)
  ddp4_balanced.jsonl        4 DDP ranks on 2 nodes, compute ~85%, nothing wrong
  h2d_bound.jsonl            1 GPU, pageable host-to-device copies ~25% of the step
  ddp4_compute_straggler.jsonl
                             4 DDP ranks, rank 2's GPU runs hot and its forward is
                             1.6x slower; the others wait in the all-reduce
  incomplete_forward.jsonl   1 rank whose forward phase was never marked
  residual_memory_creep.jsonl
                             1 GPU, a checkpoint every 10 steps outside the traced
                             phases (~25% residual), reserved memory creeping
"""

import json
import os
import random
import sys

START_TS = 1764662400.0  # 2025-12-02 08:00:00 UTC
GIB = 1024**3
H100_TOTAL_BYTES = 85520809984  # what NVML reports for an 80 GB H100
SAMPLE_INTERVAL_S = 1.0


def line(obj):
    return json.dumps(obj, separators=(",", ":"))


def ms(x):
    return round(x, 3)


def jitter(rng, value, fraction):
    """value scaled by a uniform factor in [1 - fraction, 1 + fraction]."""
    return value * rng.uniform(1.0 - fraction, 1.0 + fraction)


class Run:
    def __init__(self, name, world_size, strategy):
        self.header = {
            "type": "run",
            "format": "traceml-telemetry",
            "version": 1,
            "run_name": name,
            "world_size": world_size,
            "strategy": strategy,
        }
        self.ranks = []
        self.records = []  # (ts, order, record): written sorted by time

    def add(self, ts, record):
        self.records.append((ts, len(self.records), record))

    def write(self, path):
        self.records.sort(key=lambda r: (r[0], r[1]))
        with open(path, "w", newline="\n") as f:
            f.write(line(self.header) + "\n")
            for r in self.ranks:
                f.write(line(r) + "\n")
            for _, _, r in self.records:
                f.write(line(r) + "\n")


def rank_line(global_rank, local_rank, node_rank, hostname, local_world_size, world_size):
    return {
        "type": "rank",
        "global_rank": global_rank,
        "local_rank": local_rank,
        "node_rank": node_rank,
        "hostname": hostname,
        "local_world_size": local_world_size,
        "world_size": world_size,
    }


def step_line(global_rank, step, ts, phases_gpu_ms, rng, with_gpu):
    """phases_gpu_ms: event name -> duration in ms. The CPU clock sees the same
    durations scaled by one factor within 1% per (rank, step), so that its phases
    still add up; without a GPU only cpu_ms is written."""
    cpu_scale = rng.uniform(0.99, 1.01)
    events = {}
    for name, value in phases_gpu_ms.items():
        timing = {"cpu_ms": ms(value * cpu_scale)}
        if with_gpu:
            timing["gpu_ms"] = ms(value)
        events[name] = timing
    return {"type": "step", "global_rank": global_rank, "step": step, "ts": round(ts, 4),
            "events": events}


def system_line(node_rank, ts, rng, cpu_percent, ram_used, ram_total, gpu_utils, gpu_mem_used):
    gpus = []
    for index, util in enumerate(gpu_utils):
        gpus.append({
            "index": index,
            "util_percent": round(min(100.0, jitter(rng, util, 0.05)), 1),
            "mem_used_bytes": int(jitter(rng, gpu_mem_used, 0.01)),
            "mem_total_bytes": H100_TOTAL_BYTES,
            "temperature_c": round(rng.uniform(52.0, 64.0), 1),
            "power_w": round(150.0 + 5.0 * util * rng.uniform(0.95, 1.05), 1),
            "power_limit_w": 700.0,
        })
    return {
        "type": "system",
        "node_rank": node_rank,
        "ts": round(ts, 4),
        "cpu_percent": round(jitter(rng, cpu_percent, 0.1), 1),
        "ram_used_bytes": int(jitter(rng, ram_used, 0.01)),
        "ram_total_bytes": ram_total,
        "gpus": gpus,
    }


def process_line(global_rank, ts, rng, cpu_percent, cpu_cores, rss, ram_total, gpu):
    return {
        "type": "process",
        "global_rank": global_rank,
        "ts": round(ts, 4),
        "cpu_percent": round(jitter(rng, cpu_percent, 0.1), 1),
        "cpu_cores": cpu_cores,
        "rss_bytes": int(jitter(rng, rss, 0.01)),
        "ram_total_bytes": ram_total,
        "gpu": gpu,
    }


def sample_times(end_ts):
    ts = START_TS + SAMPLE_INTERVAL_S
    while ts <= end_ts + SAMPLE_INTERVAL_S:
        yield ts
        ts += SAMPLE_INTERVAL_S


def single_input_bound(path):
    """One CPU-only process; the loader makes every step wait ~30 ms of ~100."""
    rng = random.Random(1)
    run = Run("single_input_bound", 1, "single_process")
    run.ranks.append(rank_line(0, 0, 0, "workstation", 1, 1))
    ts = START_TS
    for step in range(1, 61):
        input_wait = jitter(rng, 30.0, 0.08)
        forward = jitter(rng, 20.0, 0.03)
        backward = jitter(rng, 35.0, 0.03)
        optimizer = jitter(rng, 10.0, 0.03)
        residual = jitter(rng, 5.0, 0.2)
        traced = forward + backward + optimizer + residual
        ts += (input_wait + traced) / 1000.0
        phases = {"input_wait": input_wait, "forward": forward, "backward": backward,
                  "optimizer_step": optimizer, "traced_step_time": traced}
        events = {name: {"cpu_ms": ms(v)} for name, v in phases.items()}
        run.add(ts, {"type": "step", "global_rank": 0, "step": step, "ts": round(ts, 4),
                     "events": events})
    for t in sample_times(ts):
        run.add(t, system_line(0, t, rng, 55.0, 12 * GIB, 32 * GIB, [], 0))
        run.add(t, process_line(0, t, rng, 180.0, 8, 3.1e9, 32 * GIB, None))
    run.write(path)


def ddp_input_straggler(path):
    """Two DDP ranks on one node. Rank 1's loader is slow (~40 ms per batch, rank 0
    ~2 ms); DDP's gradient all-reduce inside backward makes rank 0 wait for it, so
    rank 0's backward is longer by the difference and both steps take as long."""
    rng = random.Random(2)
    run = Run("ddp_input_straggler", 2, "ddp")
    for r in range(2):
        run.ranks.append(rank_line(r, r, 0, "gpu-node-0", 2, 2))
    ts = START_TS
    for step in range(1, 121):
        h2d = jitter(rng, 3.0, 0.05)
        forward = jitter(rng, 30.0, 0.02)
        backward = jitter(rng, 60.0, 0.02)
        optimizer = jitter(rng, 10.0, 0.02)
        residual = jitter(rng, 2.0, 0.2)
        waits = [jitter(rng, 2.0, 0.15), jitter(rng, 40.0, 0.08)]
        slowest = max(waits)
        step_ms = slowest + h2d + forward + backward + optimizer + residual
        ts += step_ms / 1000.0
        for r in range(2):
            own_backward = backward + (slowest - waits[r])  # waits in the all-reduce
            traced = h2d + forward + own_backward + optimizer + residual
            phases = {"input_wait": waits[r], "h2d": h2d, "forward": forward,
                      "backward": own_backward, "optimizer_step": optimizer,
                      "traced_step_time": traced}
            run.add(ts, step_line(r, step, ts, phases, rng, True))
            run.add(ts, {"type": "step_memory", "global_rank": r, "step": step,
                         "device": "cuda:%d" % r,
                         "peak_allocated_bytes": int(jitter(rng, 14.2e9, 0.005)),
                         "peak_reserved_bytes": 16106127360})
    for t in sample_times(ts):
        run.add(t, system_line(0, t, rng, 35.0, 60 * GIB, 512 * GIB, [40.0, 40.0], 16.5e9))
        for r in range(2):
            gpu = {"device": r, "allocated_bytes": int(jitter(rng, 14.0e9, 0.01)),
                   "reserved_bytes": 16106127360, "total_bytes": H100_TOTAL_BYTES}
            run.add(t, process_line(r, t, rng, 100.0 + 10.0 * r, 64, 6.0e9, 512 * GIB, gpu))
    run.write(path)


def ddp4_balanced(path):
    """Four DDP ranks on two nodes, healthy: compute ~85% of the step, H2D ~7%,
    residual ~5%, input ~3%, with a little per-step jitter on every rank."""
    rng = random.Random(3)
    run = Run("ddp4_balanced", 4, "ddp")
    for r in range(4):
        run.ranks.append(rank_line(r, r % 2, r // 2, "gpu-node-%d" % (r // 2), 2, 4))
    ts = START_TS
    for step in range(1, 301):
        per_rank = []
        for r in range(4):
            per_rank.append({
                "input_wait": jitter(rng, 3.0, 0.1),
                "h2d": jitter(rng, 7.0, 0.03),
                "forward": jitter(rng, 28.0, 0.02),
                "backward": jitter(rng, 47.0, 0.02),
                "optimizer_step": jitter(rng, 10.0, 0.02),
                "residual": jitter(rng, 5.0, 0.1),
            })
        step_ms = max(sum(p.values()) for p in per_rank)
        ts += step_ms / 1000.0
        for r, p in enumerate(per_rank):
            residual = p.pop("residual")
            p["traced_step_time"] = (p["h2d"] + p["forward"] + p["backward"] +
                                     p["optimizer_step"] + residual)
            run.add(ts, step_line(r, step, ts, p, rng, True))
            run.add(ts, {"type": "step_memory", "global_rank": r, "step": step,
                         "device": "cuda:%d" % (r % 2),
                         "peak_allocated_bytes": int(jitter(rng, 30.0e9, 0.003)),
                         "peak_reserved_bytes": 34359738368})
    for t in sample_times(ts):
        for node in range(2):
            run.add(t, system_line(node, t, rng, 30.0, 90 * GIB, 512 * GIB, [90.0, 90.0],
                                   36.5e9))
        for r in range(4):
            gpu = {"device": r % 2, "allocated_bytes": int(jitter(rng, 29.5e9, 0.01)),
                   "reserved_bytes": 34359738368, "total_bytes": H100_TOTAL_BYTES}
            run.add(t, process_line(r, t, rng, 105.0, 64, 7.5e9, 512 * GIB, gpu))
    run.write(path)


def h2d_bound(path):
    """One GPU; every batch is copied from pageable memory (~25 ms of ~100)."""
    rng = random.Random(4)
    run = Run("h2d_bound", 1, "single_process")
    run.ranks.append(rank_line(0, 0, 0, "gpu-box", 1, 1))
    ts = START_TS
    for step in range(1, 81):
        phases = {"input_wait": jitter(rng, 2.0, 0.1), "h2d": jitter(rng, 25.0, 0.04),
                  "forward": jitter(rng, 22.0, 0.02), "backward": jitter(rng, 40.0, 0.02),
                  "optimizer_step": jitter(rng, 8.0, 0.02)}
        residual = jitter(rng, 3.0, 0.2)
        phases["traced_step_time"] = (phases["h2d"] + phases["forward"] + phases["backward"] +
                                      phases["optimizer_step"] + residual)
        ts += (phases["input_wait"] + phases["traced_step_time"]) / 1000.0
        run.add(ts, step_line(0, step, ts, phases, rng, True))
        run.add(ts, {"type": "step_memory", "global_rank": 0, "step": step, "device": "cuda:0",
                     "peak_allocated_bytes": int(jitter(rng, 9.0e9, 0.005)),
                     "peak_reserved_bytes": 10737418240})
    for t in sample_times(ts):
        run.add(t, system_line(0, t, rng, 45.0, 20 * GIB, 128 * GIB, [55.0], 11.0e9))
        gpu = {"device": 0, "allocated_bytes": int(jitter(rng, 8.8e9, 0.01)),
               "reserved_bytes": 10737418240, "total_bytes": H100_TOTAL_BYTES}
        run.add(t, process_line(0, t, rng, 120.0, 32, 5.0e9, 128 * GIB, gpu))
    run.write(path)


def ddp4_compute_straggler(path):
    """Four DDP ranks on one node. Rank 2's GPU is thermally throttled: its forward
    takes 1.6x as long, and the other ranks wait for it in backward's all-reduce."""
    rng = random.Random(5)
    run = Run("ddp4_compute_straggler", 4, "ddp")
    for r in range(4):
        run.ranks.append(rank_line(r, r, 0, "gpu-node-0", 4, 4))
    ts = START_TS
    for step in range(1, 151):
        forwards = [jitter(rng, 30.0, 0.02) * (1.6 if r == 2 else 1.0) for r in range(4)]
        backward = jitter(rng, 50.0, 0.02)
        optimizer = jitter(rng, 8.0, 0.02)
        slowest = max(forwards)
        step_ms = 2.0 + 3.0 + slowest + backward + optimizer + 2.0
        ts += step_ms / 1000.0
        for r in range(4):
            own_backward = backward + (slowest - forwards[r])
            phases = {"input_wait": jitter(rng, 2.0, 0.1), "h2d": jitter(rng, 3.0, 0.05),
                      "forward": forwards[r], "backward": own_backward,
                      "optimizer_step": optimizer}
            phases["traced_step_time"] = (phases["h2d"] + forwards[r] + own_backward +
                                          optimizer + jitter(rng, 2.0, 0.2))
            run.add(ts, step_line(r, step, ts, phases, rng, True))
    for t in sample_times(ts):
        s = system_line(0, t, rng, 35.0, 100 * GIB, 512 * GIB, [92.0, 92.0, 80.0, 92.0], 40.0e9)
        s["gpus"][2]["temperature_c"] = round(rng.uniform(87.0, 89.0), 1)
        run.add(t, s)
        for r in range(4):
            gpu = {"device": r, "allocated_bytes": int(jitter(rng, 30.0e9, 0.01)),
                   "reserved_bytes": 36507222016, "total_bytes": H100_TOTAL_BYTES}
            run.add(t, process_line(r, t, rng, 100.0, 64, 7.0e9, 512 * GIB, gpu))
    run.write(path)


def incomplete_forward(path):
    """One CPU process whose training loop never marks the forward phase."""
    rng = random.Random(6)
    run = Run("incomplete_forward", 1, "single_process")
    run.ranks.append(rank_line(0, 0, 0, "laptop", 1, 1))
    ts = START_TS
    for step in range(1, 41):
        phases = {"input_wait": jitter(rng, 1.0, 0.1), "backward": jitter(rng, 12.0, 0.03),
                  "optimizer_step": jitter(rng, 2.0, 0.03)}
        phases["traced_step_time"] = jitter(rng, 8.0, 0.03) + phases["backward"] + \
            phases["optimizer_step"]
        ts += (phases["input_wait"] + phases["traced_step_time"]) / 1000.0
        run.add(ts, step_line(0, step, ts, phases, rng, False))
    for t in sample_times(ts):
        run.add(t, system_line(0, t, rng, 30.0, 6 * GIB, 16 * GIB, [], 0))
        run.add(t, process_line(0, t, rng, 95.0, 4, 1.2e9, 16 * GIB, None))
    run.write(path)


def residual_memory_creep(path):
    """One GPU; every 10th step also writes a checkpoint between the traced phases
    (~2.5x the step), and a cache keeps growing the allocator's reserved pool."""
    rng = random.Random(7)
    run = Run("residual_memory_creep", 1, "single_process")
    run.ranks.append(rank_line(0, 0, 0, "gpu-box", 1, 1))
    ts = START_TS
    for step in range(1, 241):
        phases = {"input_wait": jitter(rng, 1.5, 0.1), "h2d": jitter(rng, 1.0, 0.05),
                  "forward": jitter(rng, 20.0, 0.02), "backward": jitter(rng, 38.0, 0.02),
                  "optimizer_step": jitter(rng, 6.0, 0.02)}
        residual = jitter(rng, 2.0, 0.2) + (150.0 if step % 10 == 0 else 0.0)
        phases["traced_step_time"] = (phases["h2d"] + phases["forward"] + phases["backward"] +
                                      phases["optimizer_step"] + residual)
        ts += (phases["input_wait"] + phases["traced_step_time"]) / 1000.0
        run.add(ts, step_line(0, step, ts, phases, rng, True))
        growth = 1.5 * GIB * (step - 1) / 239.0
        run.add(ts, {"type": "step_memory", "global_rank": 0, "step": step, "device": "cuda:0",
                     "peak_allocated_bytes": int(jitter(rng, 6.0e9, 0.005) + growth),
                     "peak_reserved_bytes": int(8 * GIB + growth)})
    for t in sample_times(ts):
        run.add(t, system_line(0, t, rng, 25.0, 18 * GIB, 128 * GIB, [75.0], 9.5e9))
        gpu = {"device": 0, "allocated_bytes": int(jitter(rng, 6.5e9, 0.02)),
               "reserved_bytes": int(9 * GIB), "total_bytes": H100_TOTAL_BYTES}
        run.add(t, process_line(0, t, rng, 110.0, 32, 4.0e9, 128 * GIB, gpu))
    run.write(path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    single_input_bound(os.path.join(out, "single_input_bound.jsonl"))
    ddp_input_straggler(os.path.join(out, "ddp_input_straggler.jsonl"))
    ddp4_balanced(os.path.join(out, "ddp4_balanced.jsonl"))
    h2d_bound(os.path.join(out, "h2d_bound.jsonl"))
    ddp4_compute_straggler(os.path.join(out, "ddp4_compute_straggler.jsonl"))
    incomplete_forward(os.path.join(out, "incomplete_forward.jsonl"))
    residual_memory_creep(os.path.join(out, "residual_memory_creep.jsonl"))


if __name__ == "__main__":
    main()
