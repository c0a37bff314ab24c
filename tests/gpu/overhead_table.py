#!/usr/bin/env python3
"""The table of tests/gpu/overhead_variants.sh: what each CUPTI setting costs.

Reads the runs list ("workload variant round wall_ms path" a line; each run
wrote path.steps, its step times in ms, and path.cpu, its training thread's
CPU per step in us, one a line) and prints, per workload and traced variant,
over the rounds that have both the variant and the untraced run:

  - the median of the per-pair ratios traced/untraced of the median step
    time, and of the mean step time, each with its range over the pairs (the
    median step hides what a few slow steps cost, such as a duty cycle's
    windows; the mean does not);
  - the training thread's CPU a step, traced minus untraced, per pair, of the
    median and of the mean step: the median over the pairs and its range;
  - the verdict against the targets of issue 36, judged on the worse of the
    two ratios and of the two CPU figures: launch-bound <= 1.04 and
    <= 50 us, ~3 ms <= 1.015, ~10 ms <= 1.005. Fewer than 7 pairs decide
    nothing at these targets: "undecided".

Then, per variant, whether it met every target it was measured against.
Exit 0 unless the input is unusable (no untraced run, a file missing).
"""
import argparse
import statistics
import sys
from collections import defaultdict

MIN_PAIRS = 7
# workload -> (ratio target, training-thread CPU target in us or None)
TARGETS = {
    "launch_bound": (1.04, 50.0),
    "gpu_3ms": (1.015, None),
    "gpu_10ms": (1.005, None),
}


def read_numbers(path):
    with open(path) as f:
        return [float(line) for line in f if line.strip()]


def kept(values, warmup, path):
    out = values[warmup:]
    if not out:
        sys.exit(f"overhead_table: {path} has {len(values)} values, none after the warm-up")
    return out


def fmt_range(values, digits, signed=False):
    sign = "+" if signed else ""
    mid = statistics.median(values)
    return f"{mid:{sign}.{digits}f} ({min(values):{sign}.{digits}f}..{max(values):{sign}.{digits}f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--duty", default="8/128")
    args = ap.parse_args()

    runs = {}  # (workload, variant, round) -> summary
    walls = defaultdict(list)
    order = []  # workloads and variants in the order first run
    with open(args.runs) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 5:
                continue
            workload, variant, rnd, wall_ms, path = parts
            steps = kept(read_numbers(path + ".steps"), args.warmup, path + ".steps")
            cpu = kept(read_numbers(path + ".cpu"), args.warmup, path + ".cpu")
            runs[(workload, variant, int(rnd))] = {
                "step_median": statistics.median(steps),
                "step_mean": statistics.fmean(steps),
                "cpu_median": statistics.median(cpu),
                "cpu_mean": statistics.fmean(cpu),
                "steps": len(steps),
            }
            walls[workload].append(float(wall_ms) / 1000.0)
            if (workload, variant) not in order:
                order.append((workload, variant))
    if not runs:
        sys.exit("overhead_table: no runs")

    try:
        k, m = (int(x) for x in args.duty.split("/"))
    except ValueError:
        k, m = 0, 0

    print()
    print("overhead, traced / untraced (median of the per-pair ratios, their range):")
    verdicts = defaultdict(list)  # variant -> [(workload, verdict)]
    for workload in dict.fromkeys(w for w, _ in order):
        untraced = {r: s for (w, v, r), s in runs.items() if w == workload and v == "untraced"}
        if not untraced:
            sys.exit(f"overhead_table: {workload} has no untraced run")
        u_med = statistics.median(s["step_median"] for s in untraced.values())
        u_cpu = statistics.median(s["cpu_median"] for s in untraced.values())
        target = TARGETS.get(workload)
        print(
            f"  {workload}: untraced step {u_med:.3f} ms, training thread CPU {u_cpu:.0f} us a step; "
            f"a run took {statistics.fmean(walls[workload]):.1f} s on average"
            + (
                f"; target ratio <= {target[0]}"
                + (f", CPU <= {target[1]:.0f} us a step" if target[1] is not None else "")
                if target
                else "; no target"
            )
        )
        for w, variant in order:
            if w != workload or variant == "untraced":
                continue
            pairs = [
                (s, untraced[r])
                for (w2, v2, r), s in sorted(runs.items())
                if w2 == workload and v2 == variant and r in untraced
            ]
            if not pairs:
                continue
            r_med = [t["step_median"] / u["step_median"] for t, u in pairs]
            r_mean = [t["step_mean"] / u["step_mean"] for t, u in pairs]
            c_med = [t["cpu_median"] - u["cpu_median"] for t, u in pairs]
            c_mean = [t["cpu_mean"] - u["cpu_mean"] for t, u in pairs]
            ratio = max(statistics.median(r_med), statistics.median(r_mean))
            cpu = max(statistics.median(c_med), statistics.median(c_mean))
            if len(pairs) < MIN_PAIRS:
                verdict = f"undecided ({len(pairs)} pairs, < {MIN_PAIRS})"
            elif target is None:
                verdict = "no target"
            else:
                ok = ratio <= target[0] and (target[1] is None or cpu <= target[1])
                verdict = "MEETS the target" if ok else "misses the target"
            verdicts[variant].append((workload, verdict))
            sampled = ""
            if variant.startswith("duty") and m > 0:
                n = pairs[0][0]["steps"]
                inside = sum(1 for i in range(args.warmup + 1, args.warmup + n + 1) if (i - 1) % m < k)
                sampled = f", records on {inside} of {n} kept steps"
            print(
                f"    {variant:<14} {len(pairs)} pairs: median step {fmt_range(r_med, 4)}, "
                f"mean step {fmt_range(r_mean, 4)}; CPU a step, median step "
                f"{fmt_range(c_med, 0, True)} us, mean step {fmt_range(c_mean, 0, True)} us"
                f"{sampled}: {verdict}"
            )
    print()
    print("per variant, against every target it was measured on:")
    for variant, results in verdicts.items():
        decided = [v for _, v in results if not v.startswith("undecided") and v != "no target"]
        if len(decided) < len(results):
            summary = "undecided"
        elif all(v == "MEETS the target" for v in decided):
            summary = "MEETS every target"
        else:
            summary = "misses " + ", ".join(w for w, v in results if v == "misses the target")
        print(f"  {variant}: {summary}")


if __name__ == "__main__":
    main()
