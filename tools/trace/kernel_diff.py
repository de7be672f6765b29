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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from critical_path import short_name  # noqa: E402


def totals(rows):
    """Busy nanoseconds and calls per kernel kind (short_name) of trace rows."""
    busy = collections.Counter()
    calls = collections.Counter()
    for r in rows:
        key = short_name(r["name"])
        busy[key] += int(r["end_ns"]) - int(r["start_ns"])
        calls[key] += 1
    return busy, calls


def compare(base_rows, other_rows):
    """(kind, base ns, other ns, base calls, other calls) for every kind in either trace, the
    largest change first."""
    (b, bc), (o, oc) = totals(base_rows), totals(other_rows)
    keys = sorted(set(b) | set(o), key=lambda k: (-abs(o[k] - b[k]), k))
    return [(k, b[k], o[k], bc[k], oc[k]) for k in keys]


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base")
    ap.add_argument("other")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--steps", type=float, default=1.0)
    a = ap.parse_args()
    rows = compare(read(a.base), read(a.other))
    ms = 1e6 * a.steps
    print(f"{'kernel':60s} {'base ms':>9s} {'other ms':>9s} {'diff ms':>9s} {'calls b/o':>13s}")
    for k, b, o, bc, oc in rows[: a.top]:
        print(f"{k[:60]:60s} {b / ms:9.2f} {o / ms:9.2f} {(o - b) / ms:9.2f} {bc:6d}/{oc:<6d}")
    tb, to = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{'all kernels':60s} {tb / ms:9.2f} {to / ms:9.2f} {(to - tb) / ms:9.2f}")


if __name__ == "__main__":
    main()
