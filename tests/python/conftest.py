"""Shared fixtures of the Python tests: the `wick` CLI built beside the package (the reference
for every equality test), the embedded tiny model and a World-vocabulary synthetic model.

Environment (set by tests/CMakeLists.txt): WICK_BIN = the CLI, PYTHONPATH = <build>/python,
WICK_FIXTURES = the shared fixtures folder (optional tests skip without it)."""

import json
import os
import subprocess

import pytest

import wick

HERE = os.path.dirname(os.path.abspath(__file__))

# In CI (WICK_CI_STRICT=1) every package and fixture is installed: a skipped test there means
# something is missing, and fails the run instead of passing it.
_STRICT = os.environ.get("WICK_CI_STRICT") == "1"
_SKIPPED = []


def pytest_runtest_logreport(report):
    if _STRICT and report.skipped:
        _SKIPPED.append("%s: %s" % (report.nodeid, report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr))


def pytest_sessionfinish(session, exitstatus):
    if _SKIPPED:
        print("\nWICK_CI_STRICT=1: %d skipped test(s) fail the run:" % len(_SKIPPED))
        for s in _SKIPPED:
            print("  " + s)
        session.exitstatus = 1


def _default_bin():
    return os.path.join(HERE, "..", "..", "build", "wick")


@pytest.fixture(scope="session")
def wick_bin():
    path = os.environ.get("WICK_BIN", _default_bin())
    if not os.path.exists(path):
        pytest.fail("the wick CLI is not at %s (set WICK_BIN)" % path)
    return path


@pytest.fixture(scope="session")
def cli(wick_bin):
    """cli(*args) -> stdout (str) of `wick ARGS`; fails the test on a non-zero exit."""

    def run(*args, check=True):
        p = subprocess.run([wick_bin, *map(str, args)], capture_output=True,
                           env={**os.environ, "WICK_THREADS": "2"})
        if check and p.returncode != 0:
            pytest.fail("wick %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode,
                                                     p.stderr.decode(errors="replace")))
        return p.stdout.decode()

    return run


@pytest.fixture(scope="session")
def cli_json(cli):
    return lambda *args: json.loads(cli(*args))


@pytest.fixture(scope="session")
def tiny():
    """The embedded tiny byte-level model (what the CLI uses without --model)."""
    return wick.Model(None, threads=2)


@pytest.fixture(scope="session")
def tiny_tok(tiny):
    return wick.Tokenizer.for_model(tiny)


@pytest.fixture(scope="session")
def world_path(cli, tmp_path_factory):
    """A deterministic synthetic checkpoint with the World vocabulary (L 2, C 64, V 65536)."""
    path = str(tmp_path_factory.mktemp("world") / "world.safetensors")
    cli("synth", "--geometry", "2:64:65536", "--dtype", "fp32", "--seed", "3", "--out", path)
    return path


@pytest.fixture(scope="session")
def world(world_path):
    return wick.Model(world_path, threads=2)


@pytest.fixture(scope="session")
def world_tok(world):
    return wick.Tokenizer.for_model(world)


@pytest.fixture(scope="session")
def fixtures_dir():
    d = os.environ.get("WICK_FIXTURES", os.path.join(HERE, "..", "..", "..", "shared", "fixtures"))
    return d if os.path.isdir(d) else None
