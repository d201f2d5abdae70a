"""Reads the logs of run_torch_suite.py -v: counts, and gloo's passes that a run lacks.

    suite_results.py LOG [LOG ...]        one row of counts per log
    suite_results.py --missing BASE LOG   the tests BASE passed that LOG did not,
                                          with what LOG did instead
    suite_results.py --list LOG           every test of LOG with its outcome, by name
Exits 1 when --missing finds any.
"""
import re
import sys

# unittest -v writes "test_x (__main__.Class.test_x) ... " (for a test with a
# docstring: "test_x (__main__.Class.test_x)", then the docstring's first line
# and " ... ") and, once the test is over, its outcome; the ranks' log lines
# may come in between.
START = re.compile(r"^(test_\w+) \(__main__\.\w+\.\w+\)(?: \.\.\. ?(.*))?$")
DOC = re.compile(r"^.* \.\.\. ?(.*)$")
OUTCOME = re.compile(r"^(ok|skipped\b.*|ERROR|FAIL|expected failure|unexpected success)$")
KIND = {"ok": "passed", "skipped": "skipped", "ERROR": "errors", "FAIL": "failures",
        "expected": "passed", "unexpected": "failures"}


def parse(path):
    """{test name: (kind, detail)} for the tests whose outcome the log has."""
    results, pending = {}, None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            start = START.match(line)
            if start:
                pending, line = start.group(1), start.group(2) or ""
            elif pending and DOC.match(line):
                line = DOC.match(line).group(1)
            outcome = OUTCOME.match(line)
            if pending and outcome:
                word = outcome.group(1)
                results[pending] = (KIND[word.split()[0]], word)
                pending = None
    return results


def counts(results):
    row = {kind: 0 for kind in ("passed", "skipped", "errors", "failures")}
    for kind, _ in results.values():
        row[kind] += 1
    return row


def main(argv):
    if argv[:1] == ["--missing"] and len(argv) == 3:
        base, run = parse(argv[1]), parse(argv[2])
        missing = sorted(t for t, (kind, _) in base.items()
                         if kind == "passed" and run.get(t, ("absent",))[0] != "passed")
        for test in missing:
            print(f"{test}: {run.get(test, ('', 'not in the log'))[1]}")
        print(f"{len(missing)} of {counts(base)['passed']} tests that passed in {argv[1]} "
              f"did not pass in {argv[2]}")
        return 1 if missing else 0
    if argv[:1] == ["--list"] and len(argv) == 2:
        for test, (_, word) in sorted(parse(argv[1]).items()):
            print(f"{test}: {word}")
        return 0
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    status = 0
    for path in argv:
        row = counts(parse(path))
        with open(path, errors="replace") as f:
            ran = re.findall(r"^Ran (\d+) tests? in", f.read(), re.M)
        total = sum(row.values())
        note = "" if not ran else f" (unittest: Ran {ran[-1]})"
        if ran and int(ran[-1]) != total:
            note, status = f" (BUT unittest ran {ran[-1]}: this log is not read right)", 1
        elif not ran:
            note = " (unfinished: no 'Ran N tests' yet)"
        print(f"{path}: {total} tests, " + ", ".join(f"{v} {k}" for k, v in row.items()) + note)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
