#!/usr/bin/env python3
"""The spread of repeated measurements, and ratios that know their spread.

run.sh measures every system once per round, in interleaved rounds, so each
(system, op, size) has one sample per round. Here:
  - `summarize` gives a point's median, min and max over its rounds;
  - `ratio` divides two points' busbw medians and bounds the ratio by their
    ranges: low = min(a) / max(b), high = max(a) / min(b);
  - `verdict` calls a ratio "level" when [low, high] holds 1.0, "faster"
    when low > 1 and "slower" when high < 1.

Why min and max: with n independent rounds, the probability that a point's
true median lies outside [min, max] is 2 * 0.5^n (6 % for 5 rounds: a
distribution-free confidence interval for the median), and the ratio's
bounds are the worst pairing of the two ranges, so "faster" or "slower"
means the two ranges do not overlap once scaled. Nothing here assumes a
distribution; a disturbed round widens the range instead of moving the
median far.

Example:
  a = summarize([8.1, 8.5, 8.7]); b = summarize([7.9, 8.0, 8.2])
  r = ratio(a, b)   # {"ratio": 1.0625, "low": 0.9878, "high": 1.1013, "n": 3}
  verdict(r)        # "level"
"""
import statistics


def summarize(samples):
    """{"median", "min", "max", "n"} of a non-empty list of numbers."""
    values = sorted(samples)
    return {"median": statistics.median(values), "min": values[0], "max": values[-1],
            "n": len(values)}


def coverage(n):
    """The probability that [min, max] of n samples holds the median."""
    return 1 - 2 * 0.5 ** n if n >= 1 else 0.0


def ratio(a, b):
    """a / b from two summaries (of busbw: higher is better), with bounds;
    None when b has a zero."""
    if not a or not b or b["median"] <= 0 or b["min"] <= 0:
        return None
    return {"ratio": a["median"] / b["median"], "low": a["min"] / b["max"],
            "high": a["max"] / b["min"], "n": min(a["n"], b["n"])}


def verdict(r):
    """"level", "faster" or "slower" (the numerator against the denominator);
    "unknown (1 round)" when either side has a single sample, which has no
    spread to judge by."""
    if r is None:
        return "n/a"
    if r.get("n", 2) < 2:
        return "unknown (1 round)"
    if r["low"] > 1.0:
        return "faster"
    if r["high"] < 1.0:
        return "slower"
    return "level"
