"""Build the compiled kernels: one extension per ``csrc/*.pyx``.

Cython directives are set once here.  ``FASTVEC_DEBUG=1`` turns bounds and
initialisation checks on; ``FASTVEC_NATIVE=1`` adds ``-march=native``;
``FASTVEC_BUILD_ONLY=a,b`` builds only the named kernels (a development aid).
"""

import os
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("FASTVEC_DEBUG") == "1"
ONLY = {name for name in os.environ.get("FASTVEC_BUILD_ONLY", "").split(",") if name}

DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": False,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "embedsignature": True,
}
CFLAGS = ["-O0", "-g"] if DEBUG else ["-O3"]
if os.environ.get("FASTVEC_NATIVE") == "1":
    CFLAGS.append("-march=native")

# C sources that a kernel links besides its own .pyx (plain C, no Python.h).
C_SOURCES: dict[str, list[str]] = {"barrier": ["csrc/ipc_sync.c"]}


def kernel(pyx: Path) -> Extension:
    return Extension(
        f"fastvec._kernels.{pyx.stem}",
        [str(pyx), *C_SOURCES.get(pyx.stem, [])],
        include_dirs=[np.get_include(), "csrc"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=CFLAGS,
    )


pyx_files = sorted(Path("csrc").glob("*.pyx"))
if not pyx_files:  # else setuptools makes a pure-Python wheel that cannot import
    raise SystemExit("setup.py: no csrc/*.pyx to build the kernels from; build from a "
                     "checkout or from the sdist, which carries them (MANIFEST.in)")
extensions = [kernel(p) for p in pyx_files if not ONLY or p.stem in ONLY]
# .pxd declarations live beside the .pyi stubs in fastvec/_kernels/, where Cython
# finds them by module name.
setup(ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES, include_path=["."]))
