"""`python -m specgen.bench` (what `specgen bench` runs)."""
import sys

from specgen.bench.cli import main

sys.exit(main())
