#!/usr/bin/env python3
"""What each kind of kernel adds to a graph replay, from a kernel_trace.cc CSV.

A replay is the kernels of one graph launch (one correlation id). With programmatic dependent
launch a kernel starts before its predecessor ends, so durations overlap and their sum says
little. Taking the replay's kernels in order of their end times, each kernel's *added* time is
its end minus the latest end before it: on a chain that is the time the step waited for it, and
the added times sum to the replay's span (first start to last end). Kernels on a concurrent
branch that end under another kernel add nothing. The part of a kernel's added time during which
no kernel ran at all is its *idle before* (a host node, a copy, a wait on another stream).

  critical_path.py trace.csv [--last N] [--min-kernels K] [--top T]

For each device and graph (one per batch size / step shape) it takes the last N replays (default
5) and prints their mean span and, per kernel name and grid size (CTAs: which tells shapes
apart), calls a replay, mean duration, mean added time with its share of the span, and idle
before.
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
    return stem + ("<" + ",".join(ints) + ">" if ints else "")


Kernel = collections.namedtuple("Kernel", "calls dur_ns added_ns idle_ns")
Graph = collections.namedtuple("Graph", "device graph kernels replays span_ns spans_ns per_kernel")


def summarise(rows, last=5, min_kernels=20):
    """Graphs (in order of first replay) with their mean span and, per 'name gGRID', the mean
    calls, duration, added and idle time per replay over the last `last` replays. rows: dicts
    with the CSV's columns; kernels outside graphs and launches of fewer than min_kernels
    kernels are left out."""
    replays = collections.defaultdict(list)
    for r in rows:
        if str(r["graph"]) == "0":
            continue
        key = (int(r["device"]), int(r["graph"]), int(r["correlation"]))
        replays[key].append((int(r["start_ns"]), int(r["end_ns"]),
                             f'{short_name(r["name"])} g{r["grid"]}'))
    by_graph = collections.defaultdict(list)
    for (dev, g, _), ks in replays.items():
        if len(ks) >= min_kernels:
            by_graph[(dev, g)].append((min(k[0] for k in ks), ks))
    out = []
    for dev, g in sorted(by_graph, key=lambda key: min(t for t, _ in by_graph[key])):
        runs = [ks for _, ks in sorted(by_graph[(dev, g)])][-last:]
        spans = []
        added, idle, dur, calls = (collections.Counter() for _ in range(4))
        for ks in runs:
            ks = sorted(ks, key=lambda k: k[1])
            t0 = min(k[0] for k in ks)
            spans.append(ks[-1][1] - t0)
            last_end = t0
            for start, end, name in ks:
                added[name] += end - last_end
                idle[name] += max(0, start - last_end)
                dur[name] += end - start
                calls[name] += 1
                last_end = max(last_end, end)
        n = len(runs)
        per = {name: Kernel(calls[name] / n, dur[name] / calls[name], added[name] / n,
                            idle[name] / n) for name in calls}
        out.append(Graph(dev, g, len(runs[0]), n, statistics.mean(spans), spans, per))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--last", type=int, default=5)
    ap.add_argument("--min-kernels", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        graphs = summarise(csv.DictReader(f), a.last, a.min_kernels)
    for gr in graphs:
        span = gr.span_ns
        print(f"device {gr.device} graph {gr.graph}: {gr.kernels} kernels, {gr.replays} replays, "
              f"span {span / 1e3:.1f} us (min {min(gr.spans_ns) / 1e3:.1f}, "
              f"max {max(gr.spans_ns) / 1e3:.1f})")
        print(f"  {'kernel (grid)':50s} {'calls':>6s} {'mean dur us':>12s} {'added us':>10s} "
              f"{'share':>7s} {'idle before us':>15s}")
        ranked = sorted(gr.per_kernel.items(), key=lambda kv: -kv[1].added_ns)
        for name, k in ranked[:a.top]:
            print(f"  {name[:50]:50s} {k.calls:6.0f} {k.dur_ns / 1e3:12.2f} {k.added_ns / 1e3:10.1f} "
                  f"{100 * k.added_ns / span:6.1f}% {k.idle_ns / 1e3:15.1f}")
        rest = sum(k.added_ns for _, k in ranked[a.top:])
        if rest:
            print(f"  {'(the rest)':50s} {'':6s} {'':12s} {rest / 1e3:10.1f} {100 * rest / span:6.1f}%")
        print()


if __name__ == "__main__":
    main()
