"""Peak resident memory while generating stays near the mmapped model plus the KV cache.

Each measurement runs in a fresh child process and reads its own VmRSS / VmHWM: getrusage's ru_maxrss
survives fork and exec on Linux, so in a child of a large pytest process it starts at the parent's size
and hides the child's growth."""
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")

# The child's resident bytes now ("VmRSS") or at their peak so far ("VmHWM").
RSS = r"""
def rss(key):
    line = next(l for l in open("/proc/self/status") if l.startswith(key + ":"))
    return int(line.split()[1]) * 1024
"""

CHILD = RSS + r"""
import json, sys
import numpy as np  # imported before the baseline so its pages count as baseline
import specgen
base = rss("VmRSS")
g = specgen.Generator(sys.argv[1], n_threads=2, n_ctx=4096, draft="ngram")
r = g.generate("Tell me a story about a lighthouse keeper.", max_tokens=48, temperature=0)
peak = rss("VmHWM")
print(json.dumps({"base": base, "peak": peak, "file": g._g.file_size, "kv": g._g.kv_bytes}))
"""


def test_peak_rss_is_file_plus_kv_cache(model_path):
    out = subprocess.run([sys.executable, "-c", CHILD, model_path], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout.strip().splitlines()[-1])
    grown = m["peak"] - m["base"]
    # Budget: the weights once (the mapped file's pages leave the resident set as each matrix is copied
    # into the rows16 layout, quant/rows16.h) + the KV cache + 96 MiB for everything else (the
    # tokenizer's tables of 262k pieces, logits of a verification batch, activations, specgen's Python
    # modules). Measured: 438 MiB grown for a 241 MiB file and a 144 MiB cache; 543 MiB while the file
    # stayed resident beside its copy.
    budget = m["file"] + m["kv"] + 96 * 2**20
    assert grown < budget, f"RSS grew by {grown / 2**20:.0f} MiB, budget {budget / 2**20:.0f} MiB ({m})"


DRAFT_CHILD = RSS + r"""
import json, sys
import numpy as np  # imported before the baseline so its pages count as baseline
import specgen
base = rss("VmRSS")
g = specgen.Generator(sys.argv[1], draft=sys.argv[1], n_parallel=int(sys.argv[2]), n_threads=2, n_ctx=256)
r = g.generate("Tell me a story about a lighthouse keeper.", max_tokens=8, temperature=0)
assert r.stats["n_drafted"] > 0
peak = rss("VmHWM")
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


LONG_CONTEXT_CHILD = RSS + r"""
import json, sys
import numpy as np  # imported before the baseline so its pages count as baseline
import specgen
base = rss("VmRSS")
prompts = ["Tell me a story about a lighthouse keeper.", "The capital of France is"]
g = specgen.Generator(sys.argv[1], n_threads=2, n_ctx=32768, n_parallel=2)
r = g.generate(prompts, max_tokens=16, temperature=0)
peak = rss("VmHWM")
small = specgen.Generator(sys.argv[1], n_threads=2, n_ctx=256)
same = [small.generate(p, max_tokens=16, temperature=0).tokens for p in prompts] == [x.tokens for x in r]
print(json.dumps({"grown": peak - base, "file": g._g.file_size, "kv": g._g.kv_bytes, "same": same}))
"""


def test_kv_cache_memory_follows_the_context_in_use(model_path):
    """A 32k context for 2 slots reserves a KV cache of several GiB; its pages become resident only
    where rows are written, so two short requests grow the RSS by the model and a sliver of the cache,
    and decode as with a small context."""
    out = subprocess.run([sys.executable, "-c", LONG_CONTEXT_CHILD, model_path], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout.strip().splitlines()[-1])
    assert m["same"]
    assert m["kv"] > 2 * 2**30  # the cache reserved is larger than everything else together
    # The weights once + a tenth of the cache + 96 MiB as above. Measured: 438 MiB grown for a 241 MiB
    # file and a 2.25 GiB cache; 2795 MiB while the cache was zero-filled up front.
    budget = m["file"] + m["kv"] // 10 + 96 * 2**20
    assert m["grown"] < budget, f"RSS grew by {m['grown'] / 2**20:.0f} MiB, budget {budget / 2**20:.0f} MiB ({m})"


def _overcommit_mode() -> str:
    """vm.overcommit_memory ("0" heuristic, "1" always, "2" never), "" where unknown."""
    try:
        with open("/proc/sys/vm/overcommit_memory") as f:
            return f.read().strip()
    except OSError:
        return ""


def _overcommits_always() -> bool:
    return _overcommit_mode() == "1"


@pytest.mark.skipif(_overcommits_always(), reason="vm.overcommit_memory=1 maps any size: nothing fails at load")
def test_kv_cache_larger_than_memory_is_a_clear_error(model_path):
    """A cache the machine cannot hold (here 2.25 TiB) fails at load with the sizes and the knobs."""
    import specgen

    with pytest.raises(specgen.InvalidParameterError, match=r"KV cache for 1048576 tokens x 64 sequences .* does not fit"):
        specgen.Generator(model_path, n_ctx=1 << 20, n_parallel=64)


def _meminfo() -> dict:
    with open("/proc/meminfo") as f:
        return {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if line.split()[1].isdigit()}


def _cache_beyond_available_memory(model_path):
    """(n_ctx, n_parallel) of a KV cache larger than the memory available now that the kernel still maps
    (its heuristic refuses only what exceeds RAM + swap): halfway between the two, or a skip where this
    machine leaves less than 2% between them."""
    import specgen

    try:
        mem = _meminfo()
    except OSError:
        pytest.skip("no /proc/meminfo")
    if _overcommit_mode() == "2":
        pytest.skip("vm.overcommit_memory=2 refuses what it cannot back")
    ceiling = mem["MemTotal"] + mem.get("SwapFree", 0)
    if ceiling - mem["MemAvailable"] < 0.02 * ceiling:
        pytest.skip("under 2% between the memory available and the machine's")
    with specgen.Generator(model_path, n_ctx=256) as small:
        per_token = small.kv_bytes_per_sequence / 256
    n_parallel = 32
    return int((mem["MemAvailable"] + ceiling) / 2 / (per_token * n_parallel)), n_parallel


def test_kv_cache_larger_than_available_memory_warns_at_load(model_path, cli):
    """A cache the kernel maps but the machine cannot hold loads (its pages are resident only once
    written), with a warning that names the sizes and the knobs: the SDK a RuntimeWarning, the CLI one
    stderr line before it generates."""
    import specgen

    n_ctx, n_parallel = _cache_beyond_available_memory(model_path)
    with pytest.warns(RuntimeWarning, match=rf"KV cache for {n_ctx} tokens x {n_parallel} sequences .* is more than "
                                            r"the memory available now .*lower n_ctx or n_parallel"):
        g = specgen.Generator(model_path, n_ctx=n_ctx, n_parallel=n_parallel)
    assert len(g.generate("Hello", max_tokens=2, temperature=0, ignore_eos=True).tokens) == 2
    g.close()
    out = subprocess.run([cli, "-m", model_path, "-c", str(n_ctx), "-np", str(n_parallel), "-n", "2", "--temp", "0",
                          "-p", "Hello"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    warned = [line for line in out.stderr.splitlines() if "is more than the memory available now" in line]
    assert len(warned) == 1 and warned[0].startswith("specgen: warning: the KV cache"), out.stderr


def test_server_prints_the_load_warning_once(model_path):
    from server_helpers import Server

    n_ctx, n_parallel = _cache_beyond_available_memory(model_path)
    server = Server(model_path, "-c", str(n_ctx), "-np", str(n_parallel), "--draft", "none")
    out = server.stop()
    warned = [line for line in out.splitlines() if "is more than the memory available now" in line]
    assert len(warned) == 1 and warned[0].startswith("specgen serve: warning: the KV cache"), out


def test_kv_cache_within_available_memory_loads_without_warning(model_path):
    import specgen
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        specgen.Generator(model_path, n_ctx=1024, n_parallel=2).close()
