#!/usr/bin/env python3
"""One run's key numbers from its final_summary.json (tests/gpu/check.sh).

Usage: summary_row.py SUMMARY_JSON NAME [--expect KIND] [--expect-collective]
                      [--row-file FILE]

Prints the verdict, its action, the step averages, the Step Memory verdict and
one compact row (also appended to --row-file for the check's closing table):
verdict, diagnosis clock, GPU and CPU step time, input wait, whether any GPU
activity records arrived (docs/diagnosis.md section 8), H2D copies per step,
H2D bytes per step (median rank), pageable share and GPU idle in steps.
Also the GPU evidence: NVML's utilisation, memory, temperature and power
(System), the process's GPU memory and the caching allocator's per-step peaks
(Step Memory).
With --expect it exits 1 unless the verdict is KIND on the GPU clock; with
--expect-collective, unless collective_ms > 0 and gpu_idle_fraction is there.
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
    ap.add_argument("--expect-collective", action="store_true",
                    help="exit 1 unless collective_ms > 0 and gpu_idle_fraction is present")
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
    # NVML (system), the process's GPU memory, the allocator's peaks (step memory).
    sysavg = ((s.get("system") or {}).get("global") or {}).get("average") or {}
    sysworst = ((s.get("system") or {}).get("global") or {}).get("worst") or {}
    samples = (((s.get("system") or {}).get("global") or {}).get("window") or {}).get("samples")

    def worst(section, key):
        v = section.get(key)
        return v.get("value") if isinstance(v, dict) else v

    print(f"  system (NVML, {samples} samples): gpu util avg {fmt_num(sysavg.get('gpu_util_percent'))}% "
          f"worst {fmt_num(worst(sysworst, 'gpu_util_percent'))}% | gpu mem avg "
          f"{fmt_bytes(sysavg.get('gpu_mem_bytes'))} ({fmt_num(sysavg.get('gpu_mem_percent'))}%) | "
          f"temp avg {fmt_num(sysavg.get('gpu_temp_c'))} C worst {fmt_num(worst(sysworst, 'gpu_temp_c'))} C | "
          f"power avg {fmt_num(sysavg.get('gpu_power_w'))} W worst {fmt_num(worst(sysworst, 'gpu_power_w'))} W")
    pavg = ((s.get("process") or {}).get("global") or {}).get("average") or {}
    print(f"  process: gpu mem used {fmt_bytes(pavg.get('gpu_mem_used_bytes'))}, reserved "
          f"{fmt_bytes(pavg.get('gpu_mem_reserved_bytes'))}, headroom "
          f"{fmt_bytes(pavg.get('gpu_mem_headroom_bytes'))}")
    mworst = (mem.get("global") or {}).get("worst") or {}
    mavg = (mem.get("global") or {}).get("average") or {}
    print(f"  step memory (allocator): peak allocated avg {fmt_bytes(mavg.get('peak_allocated_bytes'))} "
          f"worst {fmt_bytes(worst(mworst, 'peak_allocated_bytes'))} | peak reserved avg "
          f"{fmt_bytes(mavg.get('peak_reserved_bytes'))} worst {fmt_bytes(worst(mworst, 'peak_reserved_bytes'))}")

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
        f"collective {fmt_ms(avg.get('collective_ms'))} | "
        f"gpu idle {fmt_pct(avg.get('gpu_idle_fraction'))}")
    print("  row: " + row)
    if a.row_file:
        with open(a.row_file, "a") as f:
            f.write(row + "\n")

    ok = True
    if a.expect_collective:
        if not (avg.get("collective_ms") or 0) > 0:
            print(f"  FAIL: collective_ms {avg.get('collective_ms')}, expected > 0")
            ok = False
        if avg.get("gpu_idle_fraction") is None:
            print("  FAIL: no gpu_idle_fraction")
            ok = False
    if a.expect is None:
        return 0 if ok else 1
    if p.get("kind") != a.expect:
        print(f"  FAIL: verdict {p.get('kind')}, expected {a.expect}")
        ok = False
    if clock != "gpu":
        print(f'  FAIL: diagnosis clock "{clock}", expected "gpu"')
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
