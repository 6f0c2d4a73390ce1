#!/usr/bin/env bash
# tests/cpp/test_ssd.cpp under ThreadSanitizer (tools/tsan_test.sh): short SSD generations on Gemma 3 270M
# (hits, forced misses, both backups, sampling, cancellation; full draft head, NanoSpec and FR-Spec heads).
# Usage: tools/tsan_ssd.sh [model.gguf] [n_tokens]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
SPECGEN_FRSPEC_TABLE="${SPECGEN_FRSPEC_TABLE:-$here/python/specgen/data/frspec_gemma3_top32768.bin}" \
  exec bash "$here/tools/tsan_test.sh" test_ssd 8 "$@"
