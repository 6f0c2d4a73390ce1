#!/usr/bin/env bash
# tests/cpp/test_batch_threads.cpp under ThreadSanitizer (tools/tsan_test.sh): 4 threads submitting to one
# generator with 4 slots (plain and n-gram), a fifth cancelling streams; outputs must equal serial ones.
# Usage: tools/tsan_batch.sh [model.gguf] [n_tokens]
set -euo pipefail
exec bash "$(cd "$(dirname "$0")" && pwd)/tsan_test.sh" test_batch_threads 4 "$@"
