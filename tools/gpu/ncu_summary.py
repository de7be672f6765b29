#!/usr/bin/env python3
"""Groups an Nsight Compute raw CSV (--csv --page raw) by kernel name: calls, total time and,
when the CSV has dram__bytes_read.sum / dram__bytes_write.sum, bytes moved and their rate.
  ncu_summary.py FILE.csv [--top N]"""
import csv
import sys
from collections import defaultdict


def to_float(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def short_name(full):
    """The kernel's name without its return type, template arguments and parameter list."""
    out, depth = [], 0
    for ch in full.replace("(anonymous namespace)", "").replace("<unnamed>", ""):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = "".join(out).strip()
    if name.startswith("void "):
        name = name[5:]
    return name.replace("::::", "::")


def main():
    path = sys.argv[1]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 40
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    header_at = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    header, units, data = rows[header_at], rows[header_at + 1], rows[header_at + 2:]
    col = {name: header.index(name) for name in header}
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
    byte_scale = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
    t_unit = scale.get(units[col["gpu__time_duration.sum"]], 1.0)
    groups = defaultdict(lambda: [0, 0.0, 0.0])
    for r in data:
        name = short_name(r[col["Kernel Name"]])
        t = to_float(r[col["gpu__time_duration.sum"]])
        if t is None:
            continue
        g = groups[name]
        g[0] += 1
        g[1] += t * t_unit
        for m in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
            if m in col:
                v = to_float(r[col[m]])
                if v is not None:
                    g[2] += v * byte_scale.get(units[col[m]], 1.0)
    total = sum(g[1] for g in groups.values())
    print(f"{sum(g[0] for g in groups.values())} kernels, {total:.1f} us serialised")
    for name, (n, t, b) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:top]:
        rate = f"{b / (t * 1e3):8.1f} GB/s" if b > 0 else ""
        print(f"{t:10.1f} us {100 * t / total:5.1f}% {n:5d} calls {b / 1e9:8.3f} GB {rate}  {name}")


if __name__ == "__main__":
    main()
