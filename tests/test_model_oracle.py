"""The CPU forward of Gemma 3 270M against transformers' fp32 forward of the same GGUF."""
import numpy as np
import pytest

import specgen

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, in a small village by the sea, there lived",
    "北京是中国的首都，",
    "Q: What is 17 + 25?\nA:",
]

# Measured on these prompts (next-token row, 262k logits spanning about -20..+30): max |difference|
# 0.47-2.9, mostly a shift of the whole row; on log-probabilities of transformers' top 10 at most
# 0.73. The cause is ours and llama.cpp's design: activations are quantized to 8 bits before each
# quantized matmul, and Gemma 3's large activation outliers make that coarse. transformers runs fp32.
MAX_ABS_LOGIT_DIFF = 3.5
MAX_TOP10_LOGPROB_DIFF = 1.0


def _log_softmax(x):
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


@pytest.mark.parametrize("prompt", PROMPTS)
def test_next_token_logits_match_transformers(gen, hf_oracle, prompt):
    ids = gen.tokenize(prompt)
    assert hf_oracle.tokenizer(prompt).input_ids == ids
    a = gen.logits(ids)[-1]
    b = hf_oracle.logits(ids)[-1]
    assert a.shape == b.shape == (gen.n_vocab,)
    assert int(np.argmax(a)) == int(np.argmax(b))
    top_b = np.argsort(-b)[:10]
    assert len(set(np.argsort(-a)[:10]) & set(top_b)) >= 9
    assert float(np.max(np.abs(a - b))) < MAX_ABS_LOGIT_DIFF
    assert float(np.max(np.abs(_log_softmax(a)[top_b] - _log_softmax(b)[top_b]))) < MAX_TOP10_LOGPROB_DIFF


# Greedy decoding against transformers: the token sequences agree until a step where the two models
# are near a tie. Any change of summation order moves our logits by up to ~1.3 (8-bit activations are
# re-quantized at every layer: the AVX2 and AVX-512 kernels' logits differ by 1.34 on one context), which
# decides ties of 0.1-0.3 either way, so which prompts agree for all 64 tokens changes with the kernels
# (measured with rows16: 3 of these 8; the first divergences of the others sit at oracle margins of
# 0.04-0.34 and ours of 0.06-0.24). A real defect diverges where the oracle's choice is clear.
GREEDY_PROMPTS = PROMPTS + [
    "The quick brown fox",
    "Translate to French: Good morning.\n",
    "import numpy as np\n",
]
NEAR_TIE = 0.5  # logits: below the documented top-10 log-probability error (MAX_TOP10_LOGPROB_DIFF)
# Our side of the same tie may be off by both tokens' errors: on a 2-core AVX2 EPYC (no AVX-512) the
# fibonacci prompt diverges at token 23 ("elif n == 2" against "1") where transformers' margin is 0.26
# and ours 1.62, with our top-10 log-probabilities 1.23 from transformers' at that context.
OURS_NEAR_TIE = 2 * MAX_TOP10_LOGPROB_DIFF


@pytest.mark.parametrize("prompt", GREEDY_PROMPTS)
def test_greedy_64_tokens_match_transformers_up_to_a_near_tie(gen, hf_oracle, prompt):
    ids = gen.tokenize(prompt)
    expected = hf_oracle.greedy(ids, 64)
    result = gen.generate(ids, max_tokens=64, temperature=0)
    got = result.tokens
    k = next((i for i in range(min(len(got), len(expected))) if got[i] != expected[i]), None)
    if k is None:  # transformers stops at EOS too: the common length and the stop reason
        if result.finish_reason == "length":
            assert len(got) == 64
        return
    ctx = ids + expected[:k]
    ours, oracle = gen.logits(ctx)[-1], hf_oracle.logits(ctx)[-1]
    assert oracle[expected[k]] - oracle[got[k]] < NEAR_TIE, (k, float(oracle[expected[k]] - oracle[got[k]]))
    assert ours[got[k]] - ours[expected[k]] < OURS_NEAR_TIE, (k, float(ours[got[k]] - ours[expected[k]]))


def test_batch_invariance(gen):
    """A position's logits are bit-identical whatever the batch it was computed in (1..64)."""
    ids = gen.tokenize("Speculative decoding verifies several drafted tokens in one batched forward pass, "
                       "so each row must not depend on the batch size. " * 3)[:70]
    ref = gen.logits(ids, batch_size=1)
    for bs in (2, 5, 13, 64):
        got = gen.logits(ids, batch_size=bs)
        assert np.array_equal(got, ref), f"batch_size={bs} changed logits"


def test_thread_invariance(model_path, gen):
    """Logits are bit-identical whatever the thread count: an SSD drafter on its own threads can hand
    its rows to the target (speculative/ssd/ssd.h)."""
    ids = gen.tokenize("Threads split the rows of each matrix, never one row's sums. " * 2)[:30]
    ref = gen.logits(ids, batch_size=7)
    for n in (1, 3):
        g = specgen.Generator(model_path, n_ctx=64, n_threads=n)
        try:
            assert np.array_equal(g.logits(ids, batch_size=7), ref), f"n_threads={n} changed logits"
        finally:
            g.close()
