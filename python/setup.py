"""Builds and installs the `wick` package: build_ext runs wick's CMake build (the pybind11
module `wick._wick` and the C++ library it links) and installs the module beside the
pure-Python parts (wick/, wick/compat/).

Offline, into a virtual environment (Debian packages only, nothing from PyPI):
    /usr/bin/python3 -m venv --system-site-packages V
    V/bin/pip install --no-build-isolation --no-index ./python

Environment:
    WICK_BUILD_DIR   reuse this configured wick build tree (e.g. build; a relative path is
                     taken from the repository root, since pip runs this file in python/):
                     only the module target is (re)built there, and it must have been
                     configured for a Python of this interpreter's ABI; default: a private
                     tree under python/build/
    WICK_BUILD_JOBS  parallel build jobs (default: the number of CPUs)
"""

import os
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("WICK_SOURCE_DIR", os.path.dirname(HERE))


def project_version():
    """The version written in the top-level CMakeLists.txt project() (the one place it is set)."""
    path = os.path.join(SOURCE_DIR, "CMakeLists.txt")
    with open(path, encoding="utf-8") as f:
        m = re.search(r"project\(wick VERSION ([0-9]+\.[0-9]+\.[0-9]+)", f.read())
    if not m:
        raise RuntimeError("%s has no `project(wick VERSION x.y.z ...)` line" % path)
    return m.group(1)


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """build_ext that runs CMake instead of compiling sources itself."""

    def build_extension(self, ext):
        if not os.path.exists(os.path.join(SOURCE_DIR, "CMakeLists.txt")):
            raise RuntimeError("wick's sources are not at %s (set WICK_SOURCE_DIR)" % SOURCE_DIR)
        reuse = os.environ.get("WICK_BUILD_DIR")
        build_dir = (os.path.join(SOURCE_DIR, reuse) if reuse else
                     os.path.abspath(os.path.join(self.build_temp, "wick-cmake")))
        if not reuse:
            os.makedirs(build_dir, exist_ok=True)
            args = ["-DWICK_PYTHON=ON", "-DWICK_BUILD_TESTS=OFF", "-DWICK_BUILD_BENCH=OFF",
                    "-DCMAKE_BUILD_TYPE=Release", "-DPython_EXECUTABLE=" + sys.executable]
            if shutil.which("ccache"):
                args.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
            subprocess.check_call(["cmake", "-S", SOURCE_DIR, "-B", build_dir, *args])
        jobs = os.environ.get("WICK_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "wick_python",
                               "-j", jobs])
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = os.path.join(build_dir, "python", "wick", "_wick" + suffix)
        if not os.path.exists(built):
            raise RuntimeError(
                "%s was not built: the build tree %s builds the module for another Python "
                "(this one is %s)" % (built, build_dir, sys.executable))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)


setup(
    name="wick",
    version=project_version(),
    description="RWKV-7 language models in C++: native bindings and the rwkv pip API",
    packages=["wick", "wick.compat"],
    ext_modules=[CMakeExtension("wick._wick")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.8",
    zip_safe=False,
)
