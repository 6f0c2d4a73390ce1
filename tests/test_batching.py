"""The batched engine (engine/scheduler.h): sequences decoded in the same steps give exactly what
they give alone (greedy: token for token; a fixed seed: the same sample), for plain decoding and
per-sequence speculation, for every KV cache type; concurrent threads, cancellation, the queue bound
and prefix reuse."""
from __future__ import annotations

import os
import threading

import psutil
import pytest

import specgen
from sampling_fit import goodness_of_fit, target_distribution

BASE = ["The capital of France is", "def fibonacci(n):", "Once upon a time", "The printing press",
        "Hello", "List three colours:", "In 1492, Columbus", "import numpy as np\n"]
# 16 prompts of mixed lengths (a long one among them, so prefill chunks share steps with decoding).
PROMPTS = BASE + [p + " and then, after a long while, the story goes on" * (1 + i % 3) for i, p in enumerate(BASE)]
N = 10
KINDS = {
    "plain": {},
    "ngram": {"draft": "ngram"},
    "self_nanospec": {"draft": "self", "self_layers": 6, "nanospec": True},
    # In a batch auto picks among none and n-gram only; alone (size 1) the self drafter competes too.
    "auto": {"draft": "auto"},
}


@pytest.fixture(scope="module")
def solo(model_path):
    """Each prompt's greedy tokens decoded alone on a plain one-slot Generator."""
    with specgen.Generator(model_path, n_threads=2, n_ctx=512) as g:
        return [g.generate(p, max_tokens=N, temperature=0).tokens for p in PROMPTS]


@pytest.mark.parametrize("kind", list(KINDS))
def test_greedy_batches_equal_solo(model_path, solo, kind):
    # The batch policy off: every sequence drafts as much as its speculator wants (the policy only
    # shortens drafts), so the batches verify many drafts side by side.
    with specgen.Generator(model_path, n_threads=2, n_ctx=512, n_parallel=16, batch_draft_policy=False,
                           **KINDS[kind]) as g:
        for size in (1, 3, 16):
            # Rotate so each prompt meets different neighbours at each size.
            order = [(i * 5 + size) % len(PROMPTS) for i in range(size)]
            results = g.generate([PROMPTS[i] for i in order], max_tokens=N, temperature=0)
            for i, r in zip(order, results):
                assert r.tokens == solo[i], (kind, size, PROMPTS[i])
                assert r.finish_reason in ("length", "eos")
        assert g.n_free_slots == 16
        if kind != "plain":
            assert sum(r.stats["n_drafted"] for r in results) > 0


@pytest.mark.parametrize("kv", ["f32", "f16", "q8_0"])
def test_kv_types_speculative_equals_plain(model_path, kv):
    prompts = PROMPTS[:6]
    kw = dict(n_threads=2, n_ctx=512, n_parallel=6, type_k=kv, type_v=kv)
    with specgen.Generator(model_path, **kw) as g:
        plain = [r.tokens for r in g.generate(prompts, max_tokens=N, temperature=0)]
        assert g.kv_bytes_per_sequence > 0
    with specgen.Generator(model_path, draft="ngram", **kw) as g:
        spec = [r.tokens for r in g.generate(prompts, max_tokens=N, temperature=0)]
    assert spec == plain


def test_bad_kv_type(model_path):
    with pytest.raises(specgen.InvalidParameterError, match="type_k"):
        specgen.Generator(model_path, n_ctx=64, type_k="q4_0")


def test_ssd_needs_one_slot(model_path):
    with pytest.raises(specgen.InvalidParameterError, match="n_parallel"):
        specgen.Generator(model_path, n_ctx=64, draft="self", ssd=True, n_parallel=2)


@pytest.mark.parametrize("kind", ["plain", "ngram"])
def test_fixed_seed_sample_independent_of_batch(model_path, kind):
    """A fixed seed gives the same sample alone and in any batch. With speculation this holds while
    draft lengths depend on the sequence only: the batch policy (on by default) sets them from the
    batch, which keeps the distribution but not the individual sample (docs/ALGORITHMS.md section 7)."""
    kw = dict(max_tokens=N, temperature=0.9, top_k=40, top_p=0.95, min_p=0.0)
    with specgen.Generator(model_path, n_threads=2, n_ctx=512, n_parallel=8, batch_draft_policy=False,
                           **KINDS[kind]) as g:
        alone = [g.generate(p, seed=100 + i, **kw).tokens for i, p in enumerate(BASE)]
        together = g.generate(BASE, seed=[100 + i for i in range(len(BASE))], **kw)
        assert [r.tokens for r in together] == alone
        assert [r.stats.seed for r in together] == [100 + i for i in range(len(BASE))]
        reversed_ = g.generate(BASE[::-1], seed=[100 + i for i in range(len(BASE))][::-1], **kw)
        assert [r.tokens for r in reversed_][::-1] == alone


def test_chi_square_in_a_batch(model_path):
    """First tokens at temperature 1 of 400 requests decoded 8 at a time, with speculation, fit the
    target's exact next-token distribution."""
    prompt, top_k, top_p = "My favourite animal is the", 20, 1.0
    with specgen.Generator(model_path, n_threads=2, n_ctx=128, n_parallel=8, draft="ngram") as g:
        results = g.generate([prompt] * 400, seed=list(range(400)), max_tokens=1, temperature=1.0, top_k=top_k,
                             top_p=top_p, min_p=0.0)
        firsts = [r.tokens[0] for r in results if r.tokens]
        p_value = goodness_of_fit(firsts, *target_distribution(g, g.tokenize(prompt), top_k, top_p))
    assert len(firsts) >= 390
    assert p_value > 1e-3, p_value


def test_threads_equal_serial(model_path):
    """8 Python threads x 20 requests on one Generator (n_parallel 4): batched, equal to serial."""
    with specgen.Generator(model_path, n_threads=2, n_ctx=256, n_parallel=4, draft="ngram") as g:
        serial = {p: g.generate(p, max_tokens=4, temperature=0).tokens for p in BASE}
        errors, mismatches = [], []

        def worker(i):
            try:
                for j in range(20):
                    p = BASE[(i + j) % len(BASE)]
                    if g.generate(p, max_tokens=4, temperature=0).tokens != serial[p]:
                        mismatches.append((i, j))
            except BaseException as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        assert not any(t.is_alive() for t in threads), "a thread hung"
        assert errors == [] and mismatches == []
        assert g.n_free_slots == 4


def test_cancel_half_of_the_streams(model_path):
    with specgen.Generator(model_path, n_threads=2, n_ctx=256, n_parallel=8) as g:
        threads_before = len(os.listdir("/proc/self/task"))
        streams = [g.generate(p, max_tokens=200, temperature=0, stream=True) for p in BASE]
        for s in streams:
            assert next(s)
        for s in streams[::2]:
            s.cancel()
            assert s.finish_reason == "cancelled" and list(s) == []
        assert g.n_free_slots >= 4
        # A following batch is fully served (the remaining streams give up their slots if needed).
        want = [g.generate(p, max_tokens=4, temperature=0).tokens for p in BASE]
        got = g.generate(BASE, max_tokens=4, temperature=0)
        assert [r.tokens for r in got] == want and all(r.finish_reason == "length" for r in got)
        for s in streams[1::2]:
            s.close()
            assert s.finish_reason in ("cancelled", "length", "eos")
        assert g.n_free_slots == 8
        assert len(os.listdir("/proc/self/task")) == threads_before


def test_stream_reports_stats(model_path):
    with specgen.Generator(model_path, n_threads=2, n_ctx=128, n_parallel=2) as g:
        it = g.generate("Hello", max_tokens=3, temperature=0, stream=True, seed=7)
        assert it.stats is None
        text = "".join(it)
        assert it.finish_reason == "length" and it.stats.n_generated == 3 and it.stats.seed == 7 and text


def test_queue_full(model_path):
    with specgen.Generator(model_path, n_threads=2, n_ctx=128, n_parallel=1, max_queued=0) as g:
        running = g._start("Once upon a time", max_tokens=50, temperature=0)
        with pytest.raises(specgen.QueueFullError):
            g._start("Hello", max_tokens=2, temperature=0)
        running.cancel()
        assert g.generate("Hello", max_tokens=2, temperature=0).finish_reason == "length"


def test_prefix_reuse(model_path):
    """A multi-turn chat re-sends its history: the slot's rows are reused, the output is unchanged."""
    first = "The history of the printing press begins in"
    with specgen.Generator(model_path, n_threads=2, n_ctx=512, n_parallel=2) as g:
        r1 = g.generate(first, max_tokens=8, temperature=0)
        follow = g.tokenize(first) + r1.tokens + g.tokenize(" Later,", add_bos=False)
        r2 = g.generate(follow, max_tokens=8, temperature=0)
        s = r2.stats
        assert s["n_prompt_tokens_cached"] >= len(g.tokenize(first)) + len(r1.tokens) - 1
        # Prefill speed counts the rows the prefill computed only (a reused prompt is not a fast
        # prefill); the prompt's last token is forwarded by the first decode step.
        computed = s["n_prompt_tokens"] - 1 - s["n_prompt_tokens_cached"]
        assert computed >= 1
        assert s["prefill_tokens_per_second"] == pytest.approx(computed / s["prefill_seconds"])
        # The same prompt again: all but the row that gives the first token's logits is reused, so
        # the prefill computed nothing and reports no speed (it once reported millions of tokens/s).
        again = g.generate(follow, max_tokens=1, temperature=0).stats
        assert again["n_prompt_tokens"] - again["n_prompt_tokens_cached"] == 1
        assert again["prefill_tokens_per_second"] == 0
    with specgen.Generator(model_path, n_threads=2, n_ctx=512) as fresh:
        ref = fresh.generate(follow, max_tokens=8, temperature=0)
        assert ref.stats["n_prompt_tokens_cached"] <= 1
    assert r2.tokens == ref.tokens


def test_no_rss_growth_over_500_requests(model_path):
    with specgen.Generator(model_path, n_threads=2, n_ctx=128, n_parallel=8, draft="ngram") as g:
        proc = psutil.Process()
        for _ in range(2):  # warm-up: scratch buffers reach their size
            g.generate(BASE * 6, max_tokens=2, temperature=0)
        before = proc.memory_info().rss
        for _ in range(10):
            g.generate(BASE * 6 + BASE[:2], max_tokens=2, temperature=0)
        growth = proc.memory_info().rss - before
    assert growth < 32 * 2**20, growth
