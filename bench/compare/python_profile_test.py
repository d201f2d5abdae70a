#!/usr/bin/env python3
"""python_profile.py's reading of `perf report --sort dso -n --stdio`: each
library lands in its group, and the shares are of all samples (standard
library only; no perf or torch needed)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_profile  # noqa: E402

REPORT = """\
# To display the perf.data header info, please use --header/--header-only options.
#
# Overhead       Samples  Shared Object
# ........  ............  ..................................
#
    40.00%           400  [kernel.kallsyms]
    12.00%           120  python3.11
     8.00%            80  libtorch_cpu.so.1.13.0
     5.00%            50  libc10.so.1.13.0
     6.00%            60  libc.so.6
     4.00%            40  [vdso]
     7.00%            70  libsyncline-backend-ucx.so
     3.00%            30  libsyncline.so.0.1.0
     2.00%            20  _C.cpython-311-x86_64-linux-gnu.so
     5.00%            50  libucp.so.0.0.0
     3.00%            30  libuct_cma.so.0.0.0
     4.00%            40  libhwy.so.1.0.3
     1.00%            10  libstdc++.so.6.0.30
"""


class ParseTest(unittest.TestCase):
    def test_groups_and_shares(self):
        shares, total = python_profile.parse_dso_report(REPORT)
        self.assertEqual(total, 1000)
        want = {"kernel": 0.40, "torch+Python": 0.25, "libc": 0.11, "backend": 0.07,
                "core": 0.03, "syncline_torch": 0.02, "transport": 0.08, "other": 0.04}
        for group, share in want.items():
            self.assertAlmostEqual(shares[group], share, places=6, msg=group)
        self.assertAlmostEqual(sum(shares.values()), 1.0, places=6)

    def test_plugins_and_gloo(self):
        self.assertEqual(python_profile.group_of("libsyncline-plugin-trace.so"), "backend")
        self.assertEqual(python_profile.group_of("/usr/lib/libgloo.so.0"), "transport")
        self.assertEqual(python_profile.group_of("libtorch_python.so"), "torch+Python")
        self.assertEqual(python_profile.group_of("libsyncline.so.0.1.0"), "core")

    def test_empty_report(self):
        shares, total = python_profile.parse_dso_report("# no samples\n")
        self.assertEqual(total, 0)
        self.assertEqual(sum(shares.values()), 0)


if __name__ == "__main__":
    unittest.main()
