#!/usr/bin/env python3
"""Tests of kernel_diff.compare on hand-made traces."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_diff import compare  # noqa: E402

PREFILL = "void gannet::kernels::sm90::FlashPrefillHd256Sm90Kernel<2>(gannet::kernels::PagedAttentionParams)"
GEMM_A = "nvjet_sm90_tst_176x128_64x5_1x2_h_bz_TNN"
GEMM_B = "nvjet_sm90_tst_128x304_64x3_2x1_v_bz_coopA_TNT"


def row(start, end, name):
    return {"start_ns": start, "end_ns": end, "name": name}


class KernelDiffTest(unittest.TestCase):
    def test_kinds_are_summed_and_ordered_by_the_change(self):
        base = [row(0, 10, PREFILL), row(10, 30, GEMM_A), row(30, 40, PREFILL)]
        other = [row(0, 50, PREFILL), row(50, 71, GEMM_B)]
        got = compare(base, other)
        # The prefill kernel grew by 30; GEMM A (20) left and GEMM B (21) came: ties in size of
        # change are ordered by name.
        self.assertEqual(got[0], ("FlashPrefillHd256Sm90Kernel<2>", 20, 50, 2, 1))
        self.assertEqual(got[1], (GEMM_B, 0, 21, 0, 1))
        self.assertEqual(got[2], (GEMM_A, 20, 0, 1, 0))
        self.assertEqual(sum(r[2] for r in got) - sum(r[1] for r in got), 31)

    def test_identical_traces_differ_by_nothing(self):
        t = [row(0, 5, GEMM_A), row(5, 9, PREFILL)]
        self.assertTrue(all(b == o for _, b, o, _, _ in compare(t, t)))


if __name__ == "__main__":
    unittest.main()
