"""Build the compiled kernels: one extension per ``csrc/*.pyx`` (``fastvec._kernels.*``)
and per ``csrc/atari/*.pyx`` (``fastvec.atari.*``, the Atari env's own).

Cython directives are set once here.  ``FASTVEC_DEBUG=1`` turns bounds and
initialisation checks on; ``FASTVEC_NATIVE=1`` adds ``-march=native``;
``FASTVEC_BUILD_ONLY=a,b`` builds only the named kernels (a development aid).
"""

import os
import sys
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
NATIVE = os.environ.get("FASTVEC_NATIVE") == "1"
if NATIVE:
    CFLAGS.append("-march=native")

# C sources that a kernel links besides its own .pyx (plain C, no Python.h).
C_SOURCES: dict[str, list[str]] = {"barrier": ["csrc/ipc_sync.c"]}


# Where each directory's kernels go: csrc/X.pyx -> fastvec._kernels.X,
# csrc/atari/X.pyx -> fastvec.atari.X.
PACKAGES = {Path("csrc"): "fastvec._kernels", Path("csrc", "atari"): "fastvec.atari"}


def kernel(pyx: Path) -> Extension:
    """The extension built from ``pyx``: ``<package>.<stem>``, its package by directory
    (``PACKAGES``); C headers are found beside the ``.pyx``."""
    return Extension(
        f"{PACKAGES[pyx.parent]}.{pyx.stem}",
        [str(pyx), *C_SOURCES.get(pyx.stem, [])],
        include_dirs=[np.get_include(), str(pyx.parent)],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=CFLAGS,
    )


def generated_dir() -> Path:
    """Where Cython writes its C: ``build/cython/<key>/``, one directory per build key.

    Cython's C depends on the Python and numpy that generate it (numpy's ``.pxd``
    differs between releases), and cythonize reuses any ``.c`` newer than its
    ``.pyx``: kept next to the ``.pyx``, the C of a Python 3.13 build broke a later
    3.11 build.  Keyed by Python, numpy and the debug and native flags, a build never
    reads C made for another.  ``<key>/selected`` is touched when this Python's key
    changes and every extension depends on it, so setuptools also recompiles a
    ``.so`` built for another key rather than keep it for being newer than the C.
    """
    python = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    key = f"{python}-numpy{np.__version__}"
    if DEBUG:
        key += "-debug"
    if NATIVE:
        key += "-native"
    out = Path("build", "cython", key)
    out.mkdir(parents=True, exist_ok=True)
    last = Path("build", "cython", f"{python}-last")  # the key this Python built last
    if not (out / "selected").exists() or not last.exists() or last.read_text() != key:
        (out / "selected").touch()
        last.write_text(key)
    return out


pyx_files = sorted(pyx for directory in PACKAGES for pyx in directory.glob("*.pyx"))
if not pyx_files:  # else setuptools makes a pure-Python wheel that cannot import
    raise SystemExit("setup.py: no csrc/*.pyx to build the kernels from; build from a "
                     "checkout or from the sdist, which carries them (MANIFEST.in)")
GENERATED = generated_dir()
extensions = [kernel(p) for p in pyx_files if not ONLY or p.stem in ONLY]
# .pxd declarations live beside the .pyi stubs in fastvec/_kernels/, where Cython
# finds them by module name.
ext_modules = cythonize(extensions, compiler_directives=DIRECTIVES, include_path=["."],
                        build_dir=str(GENERATED))
for module in ext_modules:
    module.depends.append(str(GENERATED / "selected"))
setup(ext_modules=ext_modules)
