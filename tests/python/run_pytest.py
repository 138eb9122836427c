"""Runs the Python tests (tests/python) for CTest.

Exit status: pytest's, except that a run which cannot happen - pytest is not installed, or it
collected no test (pytest's exit 5, e.g. every file failed to import) - prints why and exits 77
(CTest: skipped), or 1 when WICK_CI_STRICT=1 (in CI a skipped suite is a failure)."""

import os
import sys


def skip(reason):
    strict = os.environ.get("WICK_CI_STRICT") == "1"
    print("python tests %s: %s" % ("FAILED (WICK_CI_STRICT=1)" if strict else "skipped", reason))
    sys.exit(1 if strict else 77)


def main():
    try:
        import pytest
    except ImportError:
        skip("pytest is not installed for %s (Debian: python3-pytest)" % sys.executable)
    here = os.path.dirname(os.path.abspath(__file__))
    rc = pytest.main([here, "-q", "-p", "no:cacheprovider", *sys.argv[1:]])
    if rc == 5:  # pytest.ExitCode.NO_TESTS_COLLECTED
        skip("pytest collected no test in %s" % here)
    sys.exit(int(rc))


if __name__ == "__main__":
    main()
