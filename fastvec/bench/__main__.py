"""``python -m fastvec.bench``: run the benchmark command (see :mod:`fastvec.bench.cli`)."""

import sys

from fastvec.bench.cli import main

sys.exit(main())
