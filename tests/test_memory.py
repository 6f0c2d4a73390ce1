"""Peak resident memory while generating stays near the mmapped model plus the KV cache."""
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys
import numpy as np  # imported before the baseline so its pages count as baseline
import specgen
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
g = specgen.Generator(sys.argv[1], n_threads=2, n_ctx=4096, draft="ngram")
r = g.generate("Tell me a story about a lighthouse keeper.", max_tokens=48, temperature=0)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"base": base, "peak": peak, "file": g._g.file_size, "kv": g._g.kv_bytes}))
"""


def test_peak_rss_is_file_plus_kv_cache(model_path):
    out = subprocess.run([sys.executable, "-c", CHILD, model_path], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout.strip().splitlines()[-1])
    grown = m["peak"] - m["base"]
    # Budget: the mapped file + the KV cache + 96 MiB for everything else (the tokenizer's tables of
    # 262k pieces, logits of a verification batch, activations, specgen's Python modules). Measured:
    # 454 MiB grown for a 241 MiB file and a 144 MiB cache.
    budget = m["file"] + m["kv"] + 96 * 2**20
    assert grown < budget, f"RSS grew by {grown / 2**20:.0f} MiB, budget {budget / 2**20:.0f} MiB ({m})"


DRAFT_CHILD = r"""
import json, resource, sys
import numpy as np  # imported before the baseline so its pages count as baseline
import specgen
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
g = specgen.Generator(sys.argv[1], draft=sys.argv[1], n_parallel=int(sys.argv[2]), n_threads=2, n_ctx=256)
r = g.generate("Tell me a story about a lighthouse keeper.", max_tokens=8, temperature=0)
assert r.stats["n_drafted"] > 0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"grown": peak - base, "file": g._g.file_size, "kv": g._g.kv_bytes}))
"""


def _draft_child(model_path, n_parallel):
    out = subprocess.run([sys.executable, "-c", DRAFT_CHILD, model_path, str(n_parallel)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_draft_model_is_loaded_once_for_every_slot(model_path):
    """A draft model's weights are loaded once per Generator and shared by every slot's speculator
    (each keeps its own KV cache): with the reference model drafting for itself, 4 slots grow the peak
    RSS over 1 slot by the 3 more slots' caches (the target's and the drafter's, 3 x 2 x 9 MiB at
    n_ctx 256), not by 3 more copies of the draft (its weights and their rows16 copy: >= 3 x 178 MiB
    before they were shared). Budget: half the draft's file."""
    one, four = _draft_child(model_path, 1), _draft_child(model_path, 4)
    extra = four["grown"] - one["grown"]
    budget = four["file"] // 2
    assert extra < budget, f"4 slots grew {extra / 2**20:.0f} MiB more than 1, budget {budget / 2**20:.0f} MiB ({one}, {four})"
