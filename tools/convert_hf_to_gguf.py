#!/usr/bin/env python3
"""Convert a Hugging Face checkpoint to GGUF: a thin wrapper over `specgen.convert` for use from a source tree.

    tools/convert_hf_to_gguf.py HF_DIR --outfile model.gguf --outtype q8_0

Installed specgen provides the same command as `specgen-convert` and `python -m specgen.convert`.
"""
import sys
from pathlib import Path

try:
    from specgen.convert import main
except ImportError:  # running from a checkout without specgen installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    from specgen.convert import main

if __name__ == "__main__":
    sys.exit(main())
