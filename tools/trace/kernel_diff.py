#!/usr/bin/env python3
"""Where a step shape's extra time goes: two kernel_trace.cc CSVs of the same run length (say
the decode bench's mixed step with and without decode rows), each kernel kind's total busy time
in both and the difference, largest first. Durations are summed, not critical-path time
(critical_path.py does that for graph replays; a mixed step runs eagerly).

  kernel_diff.py base.csv other.csv [--top T] [--steps S]

--steps divides the totals by S (the steps each trace ran) to give ms per step.
"""
import argparse
import collections
import csv

from critical_path import short_name


def totals(path):
    busy = collections.Counter()
    calls = collections.Counter()
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            key = short_name(row["name"])
            busy[key] += int(row["end_ns"]) - int(row["start_ns"])
            calls[key] += 1
    return busy, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base")
    ap.add_argument("other")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--steps", type=float, default=1.0)
    a = ap.parse_args()
    (b, bc), (o, oc) = totals(a.base), totals(a.other)
    ms = 1e6 * a.steps
    print(f"{'kernel':60s} {'base ms':>9s} {'other ms':>9s} {'diff ms':>9s} {'calls b/o':>13s}")
    keys = sorted(set(b) | set(o), key=lambda k: -abs(o[k] - b[k]))
    for k in keys[: a.top]:
        print(f"{k[:60]:60s} {b[k] / ms:9.2f} {o[k] / ms:9.2f} {(o[k] - b[k]) / ms:9.2f} {bc[k]:6d}/{oc[k]:<6d}")
    print(f"{'all kernels':60s} {sum(b.values()) / ms:9.2f} {sum(o.values()) / ms:9.2f} "
          f"{(sum(o.values()) - sum(b.values())) / ms:9.2f}")


if __name__ == "__main__":
    main()
