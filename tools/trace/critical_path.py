#!/usr/bin/env python3
"""What each kind of kernel adds to a graph replay, from a kernel_trace.cc CSV.

A replay is the kernels of one graph launch (one correlation id). With programmatic dependent
launch a kernel starts before its predecessor ends, so durations overlap and their sum says
little. Taking the replay's kernels in order of their end times, each kernel's *added* time is
its end minus the latest end before it: on a chain that is the time the step waited for it, and
the added times sum to the replay's span (first start to last end). Kernels on a concurrent
branch that end under another kernel add nothing.

  critical_path.py trace.csv [--last N] [--min-kernels K] [--top T]

For each graph (one per batch size / step shape) it takes the last N replays (default 5) and
prints their mean span and, per kernel name and grid size (CTAs: which tells shapes apart), calls a replay, mean duration, and mean added time
per replay with its share of the span.
"""
import argparse
import collections
import csv
import re
import statistics


def short_name(name):
    """The kernel's function name without namespaces, arguments or template arguments, plus
    the template arguments' integers (so GemvKernel<.., 1> and <.., 2> stay apart)."""
    name = name.replace("(anonymous namespace)", "anon")
    base = (name[5:] if name.startswith("void ") else name).split("(")[0]
    ints = re.findall(r"(?<=[<, ])(-?\d+)(?=[,>])", base)
    stem = re.sub(r"<.*", "", base).split("::")[-1]
    if stem.startswith("cutlass") or "gemm" in stem.lower() or stem.startswith("sm90_xmma"):
        return "cublas:" + stem[:40]
    return stem + ("<" + ",".join(ints) + ">" if ints else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--last", type=int, default=5)
    ap.add_argument("--min-kernels", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()

    replays = collections.defaultdict(list)
    with open(a.csv, newline="") as f:
        for r in csv.DictReader(f):
            if r["graph"] == "0":
                continue
            replays[(int(r["device"]), int(r["graph"]), int(r["correlation"]))].append(
                (int(r["start_ns"]), int(r["end_ns"]), f'{short_name(r["name"])} g{r["grid"]}',
                 int(r["grid"])))
    by_graph = collections.defaultdict(list)
    for (dev, g, corr), ks in replays.items():
        if len(ks) >= a.min_kernels:
            by_graph[(dev, g)].append((min(k[0] for k in ks), ks))

    for g in sorted(by_graph, key=lambda g: min(t for t, _ in by_graph[g])):
        runs = [ks for _, ks in sorted(by_graph[g])][-a.last:]
        spans, added, idle, dur, calls = [], collections.Counter(), collections.Counter(), collections.Counter(), collections.Counter()
        for ks in runs:
            ks = sorted(ks, key=lambda k: k[1])
            t0 = min(k[0] for k in ks)
            spans.append(ks[-1][1] - t0)
            last_end = t0
            for start, end, name, _ in ks:
                added[name] += end - last_end
                idle[name] += max(0, start - last_end)
                dur[name] += end - start
                calls[name] += 1
                last_end = max(last_end, end)
        n = len(runs)
        span = statistics.mean(spans)
        print(f"device {g[0]} graph {g[1]}: {len(runs[0])} kernels, {n} replays, span {span / 1e3:.1f} us "
              f"(min {min(spans) / 1e3:.1f}, max {max(spans) / 1e3:.1f})")
        print(f"  {'kernel (grid)':50s} {'calls':>6s} {'mean dur us':>12s} {'added us':>10s} {'share':>7s} {'idle before us':>15s}")
        for name, t in added.most_common(a.top):
            print(f"  {name[:50]:50s} {calls[name] / n:6.0f} {dur[name] / calls[name] / 1e3:12.2f} "
                  f"{t / n / 1e3:10.1f} {100 * t / n / span:6.1f}% {idle[name] / n / 1e3:15.1f}")
        rest = sum(t for name, t in added.most_common()[a.top:])
        if rest:
            print(f"  {'(the rest)':50s} {'':6s} {'':12s} {rest / n / 1e3:10.1f} {100 * rest / n / span:6.1f}%")
        print()


if __name__ == "__main__":
    main()
