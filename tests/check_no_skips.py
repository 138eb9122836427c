#!/usr/bin/env python3
"""Fails when a CTest run skipped a test: in CI every fixture, tool and service is installed, so a
skip means something is missing and the suite could pass without testing it.

  tests/check_no_skips.py BUILD_DIR/ctest-results.xml

Reads the JUnit file `ctest --output-junit ctest-results.xml` writes into the build folder (the
README's test command); prints each skipped test with its reason and exits 1 if there is any,
0 otherwise. Disabled tests (compiled as DISABLED_ where they cannot run, e.g. under
AddressSanitizer) are counted but not failures."""
import sys
import xml.etree.ElementTree as ET


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print("check_no_skips: cannot read %s: %s (run ctest with --output-junit)" % (sys.argv[1], e))
        return 1
    skipped, total = [], 0
    for case in root.iter("testcase"):
        total += 1
        s = case.find("skipped")
        if s is not None and case.get("status") != "disabled":
            out = case.findtext("system-out") or ""
            why = [l for l in out.splitlines() if "SKIPPED" in l or "skip" in l.lower()]
            skipped.append("%s: %s" % (case.get("name"), (why[-1] if why else s.get("message", "")).strip()))
    disabled = root.get("disabled", "0")
    if skipped:
        print("check_no_skips: %d of %d tests were skipped (in CI a skip is a failure):" % (len(skipped), total))
        for s in skipped:
            print("  " + s)
        return 1
    print("check_no_skips: %d tests, none skipped (%s disabled)" % (total, disabled))
    return 0


if __name__ == "__main__":
    sys.exit(main())
