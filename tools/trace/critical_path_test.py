#!/usr/bin/env python3
"""Tests of critical_path.summarise on hand-made traces whose attribution is known."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from critical_path import short_name, summarise  # noqa: E402

GEMV = ("void gannet::kernels::(anonymous namespace)::GemvKernel<__nv_bfloat16, __nv_bfloat16, "
        "__nv_bfloat16, false, 1>(const __nv_bfloat16*, int)")
NORM = "void gannet::kernels::(anonymous namespace)::PostNormResidualRegKernel<2, float>(int)"


def row(device, corr, graph, start, end, name, grid=1):
    return {"device": device, "correlation": corr, "graph": graph, "start_ns": start,
            "end_ns": end, "name": name, "grid": grid}


class CriticalPathTest(unittest.TestCase):
    def test_short_names_keep_template_integers(self):
        self.assertEqual(short_name(GEMV), "GemvKernel<1>")
        self.assertEqual(short_name(NORM), "PostNormResidualRegKernel<2>")
        self.assertEqual(short_name("nvjet_sm90_tst_64x8"), "nvjet_sm90_tst_64x8")

    def test_a_chain_with_overlap_a_branch_and_a_gap(self):
        # One replay: GEMV 0-10; a norm launched early (start 8) ending at 13; a side-branch kernel
        # 2-12 that ends under the norm; then 5 ns with nothing running; a GEMV 18-30.
        rows = [row(0, 7, 3, 0, 10, GEMV, 4), row(0, 7, 3, 8, 13, NORM),
                row(0, 7, 3, 2, 12, NORM, 2), row(0, 7, 3, 18, 30, GEMV, 4)]
        (g,) = summarise(rows, min_kernels=1)
        self.assertEqual((g.device, g.graph, g.kernels, g.replays, g.span_ns), (0, 3, 4, 1, 30))
        k = g.per_kernel
        self.assertEqual(k["GemvKernel<1> g4"].added_ns, 10 + 17)  # 0-10, then 13-30
        self.assertEqual(k["GemvKernel<1> g4"].idle_ns, 5)  # 13-18: nothing ran
        self.assertEqual(k["PostNormResidualRegKernel<2> g1"].added_ns, 1)  # 12-13
        self.assertEqual(k["PostNormResidualRegKernel<2> g2"].added_ns, 2)  # 10-12
        self.assertEqual(sum(v.added_ns for v in k.values()), g.span_ns)
        self.assertEqual(k["GemvKernel<1> g4"].calls, 2)
        self.assertEqual(k["GemvKernel<1> g4"].dur_ns, 11)

    def test_last_replays_per_device_and_graph_only(self):
        rows = []
        for i, length in enumerate([100, 50, 40]):  # three replays of graph 5 on device 1
            t = 1000 * i
            rows += [row(1, 20 + i, 5, t, t + length // 2, GEMV),
                     row(1, 20 + i, 5, t + length // 2, t + length, NORM)]
        rows.append(row(1, 99, 0, 0, 10**6, GEMV))  # eager, outside any graph: ignored
        rows.append(row(0, 30, 6, 0, 7, NORM))  # a one-kernel launch on device 0: below the minimum
        graphs = summarise(rows, last=2, min_kernels=2)
        self.assertEqual(len(graphs), 1)
        self.assertEqual((graphs[0].device, graphs[0].replays), (1, 2))
        self.assertEqual(graphs[0].spans_ns, [50, 40])
        self.assertEqual(graphs[0].span_ns, 45)


if __name__ == "__main__":
    unittest.main()
