"""Stand-in for the `expecttest` package, which Debian does not ship.

torch.testing imports it for expect-file tests; the distributed suite uses
none, so its TestCase is unittest's and accepting new output is off.
"""
import unittest

ACCEPT = False
TestCase = unittest.TestCase
