"""The multi-sequence KV cache and the ragged batched forward (cpp/src/model/kv_cache.h, batch.h,
evaluator::forward_batch) on the reference model, through specgen._testing.BatchEvaluator.

Batch invariance: a sequence's hidden rows and logits inside a ragged batch (prefill chunks mixed with
single decode rows, 1..16 sequences, one past Gemma 3's 512-token sliding window) are bit-identical to
the same sequence evaluated alone, for each KV cache type. f16 / q8_0 caches stay close to f32."""
import numpy as np
import pytest

import specgen
from specgen import _testing
from specgen.errors import ContextOverflowError, InvalidParameterError

KV_TYPES = ["f32", "f16", "q8_0"]
N_CTX = 640  # past the 512-token sliding window of Gemma 3 270M's local layers


@pytest.fixture(scope="module")
def g(model_path):
    gen = specgen.Generator(model_path, n_threads=2, n_ctx=N_CTX)
    yield gen
    gen.close()


def evaluator(g, n_seq, kv="f32", n_ctx=N_CTX):
    return _testing.BatchEvaluator(g._g, n_seq, n_ctx, kv, kv, 2)


def random_sequences(seed, lengths, vocab=20000):
    rng = np.random.default_rng(seed)
    return [[2] + rng.integers(3, vocab, n - 1).tolist() for n in lengths]


def solo_hidden(g, kv, seqs):
    """Each sequence alone, in one forward from position 0."""
    e = evaluator(g, 1, kv)
    return [e.forward([(0, s, 0)]) for s in seqs]


def schedule(rng, lengths, max_chunk):
    """Steps of a continuous batch: each step takes, for some unfinished sequences, either a prefill
    chunk of 2..max_chunk tokens or one decode row; sequences join at different steps."""
    done = [0] * len(lengths)
    start = rng.integers(0, 3, len(lengths))
    steps, step = [], 0
    while any(d < n for d, n in zip(done, lengths)):
        entries = []
        for s in rng.permutation(len(lengths)):
            if done[s] >= lengths[s] or start[s] > step or rng.random() < 0.2:
                continue
            left = lengths[s] - done[s]
            n = 1 if rng.random() < 0.5 else int(rng.integers(2, max_chunk + 1))
            n = min(n, left)
            entries.append((int(s), done[s], n))
            done[s] += n
        if entries:
            steps.append(entries)
        step += 1
    return steps


@pytest.mark.parametrize("kv", KV_TYPES)
def test_ragged_batches_equal_solo(g, kv):
    lengths = [1, 2, 3, 5, 8, 13, 17, 24, 31, 40, 9, 4, 6, 11, 20, 570]  # 16 sequences, one past the window
    seqs = random_sequences(1, lengths)
    solo = solo_hidden(g, kv, seqs)
    rng = np.random.default_rng(7)
    e = evaluator(g, len(seqs), kv)
    steps = schedule(rng, lengths, max_chunk=48)
    sizes = set()
    for entries in steps:
        h = e.forward([(s, seqs[s][p:p + n], p) for s, p, n in entries])
        sizes.add(len(entries))
        row = 0
        last_rows, want = [], []
        for s, p, n in entries:
            np.testing.assert_array_equal(h[row:row + n], solo[s][p:p + n], err_msg=f"seq {s} rows {p}..{p + n - 1}")
            last_rows.append(row + n - 1)
            want.append((s, p + n - 1))
            row += n
        # The last row of each entry (what decoding samples from): logits too.
        got = e.logits(last_rows)
        np.testing.assert_array_equal(got, e.head(np.stack([solo[s][p] for s, p in want])))
    assert max(sizes) >= 8 and 1 in sizes  # the schedule really mixed batch sizes


def test_solo_equals_generator_logits(g):
    seq = random_sequences(3, [37])[0]
    e = evaluator(g, 3)
    e.forward([(2, seq, 0)])  # a sequence other than 0
    np.testing.assert_array_equal(e.logits(list(range(37))), g.logits(seq))


@pytest.mark.parametrize("kv,tol_mean,min_agree", [("f16", 0.5, 0.9), ("q8_0", 0.6, 0.9)])
def test_quantized_kv_close_to_f32(g, kv, tol_mean, min_agree):
    # Natural text: mean |logit difference| against an f32 cache (measured 0.20 for both types) and
    # agreement of the top token (measured 0.96 f16, 1.0 q8_0 over these 48 positions).
    text = ("The history of the city begins in the Roman era, when a small settlement grew around the river "
            "crossing. Over the following centuries it became a market town, and by the fifteenth century its "
            "cathedral and university drew scholars from across the continent.")
    ids = g.tokenize(text)
    ref = evaluator(g, 1, "f32")
    ref.forward([(0, ids, 0)])
    want = ref.logits(list(range(len(ids))))
    e = evaluator(g, 1, kv)
    e.forward([(0, ids, 0)])
    got = e.logits(list(range(len(ids))))
    assert np.isfinite(got).all()
    assert np.abs(got - want).mean() < tol_mean
    assert (got.argmax(1) == want.argmax(1)).mean() >= min_agree
    assert not np.array_equal(got, want)  # the cache type really changed what attention read


def greedy(e, prompts, n_new, together):
    """Greedy continuation of each prompt (sequence i in slot i): all sequences in one batch per step,
    or each sequence on its own."""
    out = [[] for _ in prompts]
    if together:
        h = e.forward([(i, p, 0) for i, p in enumerate(prompts)])
        ends = np.cumsum([len(p) for p in prompts]) - 1
        nxt = e.logits(ends.tolist()).argmax(1)
        for _ in range(n_new):
            for i, t in enumerate(nxt):
                out[i].append(int(t))
            h = e.forward([(i, [out[i][-1]], len(p) + len(out[i]) - 1) for i, p in enumerate(prompts)])
            nxt = e.logits(list(range(len(prompts)))).argmax(1)
        return out
    for i, p in enumerate(prompts):
        e.forward([(i, p, 0)])
        t = int(e.logits([len(p) - 1])[0].argmax())
        for _ in range(n_new):
            out[i].append(t)
            e.forward([(i, [t], len(p) + len(out[i]) - 1)])
            t = int(e.logits([0])[0].argmax())
    return out


@pytest.mark.parametrize("kv", ["f16", "q8_0"])
def test_greedy_decode_batched_equals_solo(g, kv):
    prompts = [g.tokenize(t) for t in ["Once upon a time", "def fibonacci(n):", "The capital of France is",
                                       "1, 2, 3, 4,", "Water boils at", "In 1492, Columbus"]]
    solo = greedy(evaluator(g, len(prompts), kv), prompts, 12, together=False)
    batched = greedy(evaluator(g, len(prompts), kv), prompts, 12, together=True)
    assert batched == solo


def test_copy_prefix_continues_like_solo(g):
    a, tail = random_sequences(5, [30, 9])
    full = a + tail
    solo = solo_hidden(g, "f32", [full])[0]
    e = evaluator(g, 2)
    e.forward([(0, a + [7, 7, 7], 0)])  # seq 0: the shared prefix, then something else
    e.copy_prefix(0, 1, len(a))
    h = e.forward([(1, tail, len(a))])
    np.testing.assert_array_equal(h, solo[len(a):])
    e.clear(1)  # a freed slot starts over from position 0
    h = e.forward([(1, full[:5], 0)])
    np.testing.assert_array_equal(h, solo[:5])


@pytest.mark.parametrize("kv,bytes_per_elem", [("f32", 4.0), ("f16", 2.0), ("q8_0", 34 / 32)])
def test_bytes_per_sequence(g, kv, bytes_per_elem):
    e = evaluator(g, 3, kv, n_ctx=256)
    per_seq = 2 * 18 * 256 * 256 * bytes_per_elem  # K and V, 18 layers, 256 rows, 1 head of 256
    assert e.bytes_per_sequence == per_seq
    assert e.kv_bytes == 3 * per_seq


def test_bad_batches_raise(g):
    e = evaluator(g, 2, n_ctx=64)
    with pytest.raises(InvalidParameterError, match="outside"):
        e.forward([(2, [2, 3], 0)])
    with pytest.raises(InvalidParameterError, match="twice"):
        e.forward([(0, [2], 0), (0, [3], 1)])
    with pytest.raises(ContextOverflowError):
        e.forward([(1, [2] * 10, 60)])
    with pytest.raises(InvalidParameterError, match="at least one token"):
        e.forward([(0, [], 0)])
    with pytest.raises(InvalidParameterError, match="not one of"):
        _testing.BatchEvaluator(g._g, 1, 64, "q4_0", "f32", 1)
    with pytest.raises(InvalidParameterError):
        e.copy_prefix(0, 5, 3)
