#!/usr/bin/env python3
"""One run's key numbers from its final_summary.json (tests/gpu/check.sh).

Usage: summary_row.py SUMMARY_JSON NAME [--expect KIND] [--row-file FILE]

Prints the verdict, its action, the step averages, the Step Memory verdict and
one compact row (also appended to --row-file for the check's closing table):
verdict, diagnosis clock, GPU and CPU step time, input wait, whether any GPU
activity records arrived (docs/diagnosis.md section 8), H2D copies per step,
H2D bytes per step (median rank), pageable share and GPU idle in steps.
With --expect it exits 1 unless the verdict is KIND on the GPU clock.
Exits 2 when the file is missing or not JSON.
"""
import argparse
import json
import sys

# The section 8 metrics: present (non-null) only when some rank had records.
ACTIVITY_METRICS = (
    "h2d_copies_per_step",
    "h2d_pageable_copies_per_step",
    "h2d_bytes_per_step",
    "h2d_pageable_share",
    "collective_ms",
    "gpu_idle_fraction",
)


def fmt_ms(v):
    return "-" if v is None else f"{v:.3f} ms"


def fmt_num(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"


def fmt_bytes(v):
    if v is None:
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if v >= size:
            return f"{v / size:.1f} {unit}"
    return f"{v:.0f} B"


def fmt_pct(v):
    return "-" if v is None else f"{100.0 * v:.1f}%"


def median_value(section, key):
    m = section.get("global", {}).get("median", {}).get(key)
    if isinstance(m, dict):
        return m.get("value")
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summary")
    ap.add_argument("name")
    ap.add_argument("--expect")
    ap.add_argument("--row-file")
    a = ap.parse_args()
    try:
        with open(a.summary) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        print(f"  no usable final_summary.json: {e}")
        return 2

    p = s.get("primary_diagnosis") or {}
    st = s.get("step_time") or {}
    glob = st.get("global") or {}
    clock = (glob.get("window") or {}).get("diagnosis_clock")
    avg = glob.get("average") or {}
    print(f"  verdict: {p.get('kind')} ({p.get('severity')}) on the {clock} clock: "
          f"{p.get('summary')}")
    print(f"  action: {p.get('action')}")
    print("  step averages: " + ", ".join(
        f"{k} {fmt_ms(avg.get(k + '_ms'))}" for k in
        ("step_time", "input_wait", "h2d", "compute", "residual", "step_time_cpu",
         "step_time_gpu")))
    mem = s.get("step_memory") or {}
    gpus = ((s.get("system") or {}).get("metadata") or {}).get("gpus_observed")
    print(f"  step memory: {(mem.get('diagnosis') or {}).get('kind')}; gpus observed: {gpus}")

    names = (st.get("metadata") or {}).get("section_metric_names") or []
    rows = (st.get("groups") or {}).get("rows") or {}
    row_values = rows.values() if isinstance(rows, dict) else rows
    ranks_with_activity = sum(
        1 for r in row_values
        if any((r.get("metrics") or {}).get(k) is not None for k in ACTIVITY_METRICS))
    activity = any(k in names for k in ACTIVITY_METRICS) and ranks_with_activity > 0
    row = (
        f"{a.name:<16} | {str(p.get('kind')):<18} | clock {str(clock):<4} | "
        f"step gpu {fmt_ms(avg.get('step_time_gpu_ms'))} cpu {fmt_ms(avg.get('step_time_cpu_ms'))} | "
        f"input wait {fmt_ms(avg.get('input_wait_ms'))} | "
        f"activity {'yes (%d rank%s)' % (ranks_with_activity, '' if ranks_with_activity == 1 else 's') if activity else 'no'} | "
        f"h2d copies/step {fmt_num(avg.get('h2d_copies_per_step'))} | "
        f"h2d bytes/step (median) {fmt_bytes(median_value(st, 'h2d_bytes_per_step'))} | "
        f"pageable {fmt_pct(avg.get('h2d_pageable_share'))} | "
        f"gpu idle {fmt_pct(avg.get('gpu_idle_fraction'))}")
    print("  row: " + row)
    if a.row_file:
        with open(a.row_file, "a") as f:
            f.write(row + "\n")

    if a.expect is None:
        return 0
    ok = True
    if p.get("kind") != a.expect:
        print(f"  FAIL: verdict {p.get('kind')}, expected {a.expect}")
        ok = False
    if clock != "gpu":
        print(f'  FAIL: diagnosis clock "{clock}", expected "gpu"')
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
