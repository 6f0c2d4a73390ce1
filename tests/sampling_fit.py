"""Goodness of fit of sampled tokens against the exact target distribution (chi-square), shared by
the speculative, NanoSpec and SSD sampling tests."""
import math

import numpy as np

from specgen import _core


def chi2_sf(x, k):
    """Survival function of the chi-square distribution (regularized upper gamma), no scipy needed."""
    # series for the lower regularized gamma P(k/2, x/2)
    a, z = k / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    term = 1.0 / a
    total = term
    for n in range(1, 10000):
        term *= z / (a + n)
        total += term
        if term < total * 1e-15:
            break
    lower = math.exp(-z + a * math.log(z) - math.lgamma(a)) * total
    return max(0.0, 1.0 - lower)


def goodness_of_fit(samples, ids, probs):
    counts = {}
    for t in samples:
        counts[t] = counts.get(t, 0) + 1
    n = len(samples)
    expected = dict(zip(ids, probs))
    unseen_mass = [t for t in counts if t not in expected]
    assert not unseen_mass, f"sampled tokens outside the target's support: {unseen_mass}"
    # pool small categories so every expected count is >= 5
    cats, pooled_obs, pooled_exp = [], 0, 0.0
    for t, pr in sorted(expected.items(), key=lambda kv: -kv[1]):
        if pr * n >= 5:
            cats.append((counts.get(t, 0), pr * n))
        else:
            pooled_obs += counts.get(t, 0)
            pooled_exp += pr * n
    if pooled_exp > 0:
        cats.append((pooled_obs, pooled_exp))
    stat = sum((o - e) ** 2 / e for o, e in cats)
    return chi2_sf(stat, max(1, len(cats) - 1))




def first_tokens_fit(g, oracle, prompt, n_seeds, top_k, top_p):
    """Generates 2 tokens at temperature 1 for seeds 0..n_seeds-1 with Generator g, and returns the
    p-value of the first tokens against the target distribution that `oracle` (a plain Generator on
    the same model) computes exactly; also returns the (first, second) pairs."""
    firsts, pairs = [], []
    for seed in range(n_seeds):
        r = g.generate(prompt, max_tokens=2, temperature=1.0, top_k=top_k, top_p=top_p, min_p=0.0, seed=seed)
        assert len(r.tokens) >= 1
        firsts.append(r.tokens[0])
        if len(r.tokens) == 2:
            pairs.append(tuple(r.tokens))
    ids = oracle.tokenize(prompt)
    return goodness_of_fit(firsts, *target_distribution(oracle, ids, top_k, top_p)), firsts, pairs


def target_distribution(oracle, ids, top_k, top_p):
    """(ids, probs) of the processed next-token distribution after `ids` at temperature 1."""
    sp = _core.SamplingParams()
    sp.temperature, sp.top_k, sp.top_p, sp.min_p = 1.0, top_k, top_p, 0.0
    out_ids, probs = _core.process_logits(oracle.logits(ids)[-1], sp, np.array(ids, dtype=np.int32))
    return list(out_ids), list(probs)


def joint_two_tokens(oracle, prompt, top_k):
    """Exact (ids, probs) of the first two processed tokens at temperature 1, pairs encoded a * V + b."""
    ids = oracle.tokenize(prompt)
    firsts, p_first = target_distribution(oracle, ids, top_k, 1.0)
    V = oracle.n_vocab
    out_ids, out_p = [], []
    for f, pf in zip(firsts, p_first):
        seconds, p_second = target_distribution(oracle, ids + [int(f)], top_k, 1.0)
        for s, ps in zip(seconds, p_second):
            out_ids.append(int(f) * V + int(s))
            out_p.append(float(pf) * float(ps))
    return out_ids, out_p
