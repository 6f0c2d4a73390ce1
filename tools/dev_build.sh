#!/usr/bin/env bash
# Incremental developer build: compiles the library, CLI and extension into build/dev and links
# the extension into python/specgen so that `PYTHONPATH=python pytest` uses it without pip install.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"
cmake -S "$here" -B "$here/build/dev" -G Ninja -DSPECGEN_PYTHON=ON -DSPECGEN_BUILD_TESTS=ON \
      -DPython_EXECUTABLE="$(command -v "$py")" "$@" >/dev/null
cmake --build "$here/build/dev" -j2
ln -sf "$(ls "$here"/build/dev/_core*.so | head -1)" "$here/python/specgen/"
ln -sf "$(ls "$here"/build/dev/_testing*.so | head -1)" "$here/python/specgen/"
ln -sf "$here/build/dev/_core.pyi" "$here/python/specgen/_core.pyi"
