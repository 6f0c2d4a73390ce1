"""EAGLE-3 draft heads in llama.cpp's eagle3 GGUF layout (docs/DESIGN.md section 4.1): a tiny random Llama
target and tiny random heads written here with gguf.GGUFWriter under llama.cpp's key and tensor names; the
captured target features, fc and the head's decoder layer against a PyTorch reference of the same forward;
greedy speculative output == plain output (alone, with prefix reuse, and with n_parallel = 2); the sampled
output's distribution at T=1 (chi-square); and the errors for heads that do not fit the target. With NanoSpec
(nanospec=True): S holds only target ids the head has rows for (d2t), its logits are the head's rows of S,
greedy output == plain output alone and batched, and the chi-square at T=1."""
from __future__ import annotations

import json
import subprocess

import gguf
import numpy as np
import pytest
import torch

import specgen
from specgen import _testing
from specgen.errors import InvalidParameterError
from specgen.train.head import Eagle3Head, HeadConfig, causal_attention, rms_norm

from hostile_gguf import tiny_vocab
from sampling_fit import goodness_of_fit, joint_two_tokens

E, N_LAYER, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF = 64, 8, 4, 2, 16, 128
LAYERS = [2, N_LAYER // 2, N_LAYER - 3]   # llama.cpp's converter default [2, n/2, n-3]
EPS, ROPE_BASE = 1e-5, 10000.0
D_FF, D_VOCAB = 96, 200                    # the head's FFN and reduced draft vocabulary
PROMPTS = ["the cat is on the", "a stone in the water", "when the sea"]
# Random weights, with one shared direction C in every embedding and a few favourite tokens whose LM-head
# rows lean on it, and heads whose fc leans on the last target layer and whose reduced LM head starts from
# the target's rows (as trained heads do): the drafts agree with the target often enough for the tests to
# see accepted and rejected drafts (a purely random head is never accepted).
C = np.random.default_rng(3).choice([-1.0, 1.0], E).astype(np.float32)
FAVOURITES = [40, 41, 44, 290, 291, 295, 300, 302]
OUT_SCALE, FAVOURITE_LEAN = 0.3, 0.02


def _target_weights(seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    V = len(tiny_vocab()[0])

    def mat(n_out, n_in, scale=None):
        return (rng.standard_normal((n_out, n_in)) * (scale or 1.0 / np.sqrt(n_in))).astype(np.float32)

    out = mat(V, E, OUT_SCALE)
    out[FAVOURITES] += FAVOURITE_LEAN * C
    w = {"token_embd.weight": (mat(V, E, 0.5) + C).astype(np.float32),
         "output_norm.weight": rng.uniform(0.8, 1.2, E).astype(np.float32), "output.weight": out}
    Q, KV = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    for il in range(N_LAYER):
        p = f"blk.{il}."
        w[p + "attn_norm.weight"] = rng.uniform(0.8, 1.2, E).astype(np.float32)
        w[p + "ffn_norm.weight"] = rng.uniform(0.8, 1.2, E).astype(np.float32)
        w[p + "attn_q.weight"], w[p + "attn_k.weight"], w[p + "attn_v.weight"] = mat(Q, E), mat(KV, E), mat(KV, E)
        w[p + "attn_output.weight"] = mat(E, Q, 0.2 / np.sqrt(Q))
        w[p + "ffn_gate.weight"], w[p + "ffn_up.weight"] = mat(N_FF, E), mat(N_FF, E)
        w[p + "ffn_down.weight"] = mat(E, N_FF, 0.2 / np.sqrt(N_FF))
    return w


def write_target(path, w: dict) -> str:
    tokens, types = tiny_vocab()
    g = gguf.GGUFWriter(str(path), "llama")
    g.add_context_length(512)
    g.add_embedding_length(E)
    g.add_block_count(N_LAYER)
    g.add_feed_forward_length(N_FF)
    g.add_head_count(N_HEAD)
    g.add_head_count_kv(N_HEAD_KV)
    g.add_layer_norm_rms_eps(EPS)
    g.add_rope_freq_base(ROPE_BASE)
    g.add_rope_dimension_count(HEAD_DIM)
    g.add_vocab_size(len(tokens))
    g.add_tokenizer_model("llama")
    g.add_tokenizer_pre("default")
    g.add_token_list(tokens)
    g.add_token_scores([-float(i) for i in range(len(tokens))])
    g.add_token_types(types)
    g.add_bos_token_id(2)
    g.add_eos_token_id(1)
    g.add_unk_token_id(3)
    g.add_add_bos_token(True)
    g.add_add_space_prefix(False)
    for name, x in w.items():
        g.add_tensor(name, x)
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()
    return str(path)


def _head_weights(seed: int, own_embd_and_output: bool, target_output: np.ndarray) -> dict:
    rng = np.random.default_rng(seed)
    target_vocab = target_output.shape[0]

    def mat(n_out, n_in, scale=None):
        return (rng.standard_normal((n_out, n_in)) * (scale or 1.0 / np.sqrt(n_in))).astype(np.float32)

    Q, KV = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    fc = mat(E, 3 * E, 0.05)
    fc[:, 2 * E:] += np.eye(E, dtype=np.float32)   # g leans on the last target layer's input
    w = {"fc.weight": fc,
         "blk.0.attn_norm.weight": rng.uniform(0.8, 1.2, E).astype(np.float32),
         "blk.0.attn_norm_2.weight": rng.uniform(0.8, 1.2, E).astype(np.float32),
         "blk.0.attn_q.weight": mat(Q, 2 * E), "blk.0.attn_k.weight": mat(KV, 2 * E),
         "blk.0.attn_v.weight": mat(KV, 2 * E), "blk.0.attn_output.weight": mat(E, Q, 0.2 / np.sqrt(Q)),
         "blk.0.ffn_norm.weight": rng.uniform(0.8, 1.2, E).astype(np.float32),
         "blk.0.ffn_gate.weight": mat(D_FF, E), "blk.0.ffn_up.weight": mat(D_FF, E),
         "blk.0.ffn_down.weight": mat(E, D_FF, 0.2 / np.sqrt(D_FF)),
         "output_norm.weight": rng.uniform(0.8, 1.2, E).astype(np.float32)}
    if own_embd_and_output:
        w["token_embd.weight"] = mat(target_vocab, E, 1.0)
        # llama.cpp's converter stores absolute target ids (the checkpoint's offsets plus the row), as I64.
        others = rng.choice(np.setdiff1d(np.arange(target_vocab), FAVOURITES), D_VOCAB - len(FAVOURITES), replace=False)
        w["d2t"] = np.sort(np.concatenate([FAVOURITES, others])).astype(np.int64)
        # The target's rows of those ids, as a trained head's reduced LM head starts from them.
        w["output.weight"] = (target_output[w["d2t"]] + mat(D_VOCAB, E, 0.05)).astype(np.float32)
    return w


def write_head(path, w: dict, layers=LAYERS, target_hidden=E, norm_before_residual=False, arch="eagle3",
               norm_before_fc=False) -> str:
    g = gguf.GGUFWriter(str(path), arch)
    g.add_context_length(512)
    g.add_embedding_length(E)
    g.add_block_count(1)
    g.add_feed_forward_length(D_FF)
    g.add_head_count(N_HEAD)
    g.add_head_count_kv(N_HEAD_KV)
    g.add_layer_norm_rms_eps(EPS)
    g.add_rope_freq_base(ROPE_BASE)
    g.add_array(f"{arch}.target_layers", list(layers))
    g.add_uint32(f"{arch}.target_hidden_size", target_hidden)
    g.add_bool(f"{arch}.norm_before_residual", norm_before_residual)
    if norm_before_fc:
        g.add_bool(f"{arch}.norm_before_fc", True)
    for name, x in w.items():
        if name == "d2t":
            g.add_tensor(name, x, raw_dtype=gguf.GGMLQuantizationType.I64)
        else:
            g.add_tensor(name, x)
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()
    return str(path)


# --- the PyTorch reference (specgen.train.head: the trainer's forward is the reference) -------------------
def _t(x):
    return torch.from_numpy(np.asarray(x, dtype=np.float32)).double()


def _rms(x, w):
    return rms_norm(x, _t(w), EPS)


def _attention(x_in, wq, wk, wv, wo, pos):
    return causal_attention(x_in, _t(wq), _t(wk), _t(wv), _t(wo), pos, N_HEAD, N_HEAD_KV, HEAD_DIM, ROPE_BASE)


def reference_target_features(w: dict, tokens) -> torch.Tensor:
    """The residual stream entering each of LAYERS, concatenated: [n, 3 E]."""
    pos = torch.arange(len(tokens))
    x = _t(w["token_embd.weight"])[torch.tensor(tokens)]
    kept = {}
    for il in range(N_LAYER):
        p = f"blk.{il}."
        kept[il] = x.clone()
        x = x + _attention(_rms(x, w[p + "attn_norm.weight"]), w[p + "attn_q.weight"], w[p + "attn_k.weight"],
                           w[p + "attn_v.weight"], w[p + "attn_output.weight"], pos)
        h = _rms(x, w[p + "ffn_norm.weight"])
        x = x + (torch.nn.functional.silu(h @ _t(w[p + "ffn_gate.weight"]).T) * (h @ _t(w[p + "ffn_up.weight"]).T)) \
            @ _t(w[p + "ffn_down.weight"]).T
    return torch.cat([kept[l] for l in LAYERS], dim=1)


def reference_head_module(hw: dict, tw: dict, norm_before_residual=False) -> Eagle3Head:
    """The trainer's Eagle3Head holding a test head's tensors (the target's LM head when it has none), float64."""
    tensors = dict(hw)
    tensors.setdefault("output.weight", tw["output.weight"])
    cfg = HeadConfig(n_embd=E, n_head=N_HEAD, n_head_kv=N_HEAD_KV, head_dim=HEAD_DIM, n_ff=D_FF,
                     n_draft_vocab=tensors["output.weight"].shape[0], target_hidden=E, target_layers=list(LAYERS),
                     eps=EPS, rope_base=ROPE_BASE, norm_before_residual=norm_before_residual,
                     norm_before_fc="enc.output_norm.weight" in hw)
    return Eagle3Head.from_gguf_tensors(cfg, tensors, torch.float64)


def reference_head(hw: dict, tw: dict, tokens, g, norm_before_residual=False):
    """llama.cpp's eagle3 decoder over rows (tokens[i], g[i]) at positions 0..n-1: (pre-norm h, logits)."""
    head = reference_head_module(hw, tw, norm_before_residual)
    embd = hw.get("token_embd.weight", tw["token_embd.weight"])
    with torch.no_grad():
        return head(_t(embd)[torch.tensor(tokens)], g)


# --- fixtures ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("eagle3")
    tw = _target_weights()
    heads = {"reduced": _head_weights(11, True, tw["output.weight"]), "shared": _head_weights(12, False, tw["output.weight"])}
    # norm_before_fc (EAGLE-3.1 heads): an RMSNorm (enc.output_norm) of the concatenated features before fc.
    heads["fc_norm"] = dict(heads["reduced"], **{
        "enc.output_norm.weight": np.random.default_rng(13).uniform(0.5, 1.5, 3 * E).astype(np.float32)})
    return {"target": write_target(d / "target.gguf", tw), "tw": tw, "hw": heads, "dir": d,
            "reduced": write_head(d / "head-reduced.gguf", heads["reduced"]),
            "shared": write_head(d / "head-shared.gguf", heads["shared"], norm_before_residual=True),
            "fc_norm": write_head(d / "head-fc-norm.gguf", heads["fc_norm"], norm_before_fc=True)}


@pytest.fixture(scope="module")
def plain(files):
    g = specgen.Generator(files["target"], n_ctx=256, n_threads=1)
    yield g
    g.close()


# --- the forward against PyTorch -----------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["reduced", "shared", "fc_norm"])
def test_head_forward_matches_pytorch(files, plain, variant):
    tw, hw = files["tw"], files["hw"][variant]
    head = _testing.Eagle3Head(plain._core, files[variant])
    assert head.target_layers == LAYERS
    if "d2t" in hw:
        assert head.d2t == hw["d2t"].tolist()
    else:
        assert head.d2t == list(range(tw["output.weight"].shape[0]))
    tokens = plain.tokenize(PROMPTS[0] + " " + PROMPTS[1])
    ids = np.array(tokens, dtype=np.int32)

    features = head.target_features(ids)
    want_f = reference_target_features(tw, tokens)
    err_f = float((torch.from_numpy(features).double() - want_f).abs().max())
    assert err_f < 2e-4 * float(want_f.abs().max()), err_f

    g = head.fuse(features)
    with torch.no_grad():
        want_g = reference_head_module(hw, tw).fuse(_t(features))
    err_g = float((torch.from_numpy(g).double() - want_g).abs().max())
    assert err_g < 1e-4, err_g

    # Rows (t_{P+1}, g_P): the shifted pairs the speculator writes.
    rows, g_rows = ids[1:].copy(), np.ascontiguousarray(g[:-1])
    pre, logits = head.forward(rows, g_rows, 0)
    want_h, want_logits = reference_head(hw, tw, rows.tolist(), _t(g_rows), norm_before_residual=variant == "shared")
    err_h = float((torch.from_numpy(pre).double() - want_h).abs().max())
    err_l = float((torch.from_numpy(logits).double() - want_logits).abs().max())
    print(f"{variant}: max abs error features {err_f:.2e}, g {err_g:.2e}, pre-norm {err_h:.2e}, logits {err_l:.2e}")
    assert logits.shape == (len(rows), len(head.d2t))
    assert err_h < 1e-4 and err_l < 1e-4, (err_h, err_l)


@pytest.mark.parametrize("variant", ["reduced", "shared"])
def test_nanospec_set_and_logits_over_the_heads_rows(files, plain, variant):
    """NanoSpec's S over the head: of the target ids offered, only those in d2t join (in order, once), and the
    logits over S are the full draft-vocabulary logits at those ids' rows, bit for bit."""
    head = _testing.Eagle3Head(plain._core, files[variant])
    ids = np.array(plain.tokenize(PROMPTS[2]), dtype=np.int32)
    g = head.fuse(head.target_features(ids))
    rows, g_rows = ids[1:].copy(), np.ascontiguousarray(g[:-1])
    _, logits = head.forward(rows, g_rows, 0)
    d2t = head.d2t
    offered = np.random.default_rng(5).integers(0, plain.n_vocab, 120).astype(np.int32)
    offered = np.concatenate([offered, offered[:10], np.array(FAVOURITES, np.int32)])
    s_ids, s_logits = head.subset_logits(offered)
    want = list(dict.fromkeys(int(i) for i in offered if int(i) in set(d2t)))
    assert s_ids == want
    if variant == "reduced":
        assert len(want) < len(set(offered.tolist()))  # some offered ids have no row in the head
    assert s_logits.shape == (len(rows), len(want))
    assert np.array_equal(s_logits, logits[:, [d2t.index(i) for i in want]])


# --- losslessness -------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["reduced", "shared"])
def test_greedy_output_is_plain_output(files, plain, variant):
    with specgen.Generator(files["target"], n_ctx=256, n_threads=1, draft_head=files[variant], draft_max=4) as g:
        drafted = accepted = 0
        # The second prompt extends the first: the slot's cached prefix is reused with the head's rows.
        for prompt in [PROMPTS[0], PROMPTS[0] + " sea", PROMPTS[1]]:
            want = plain.generate(prompt, max_tokens=40, temperature=0, ignore_eos=True)
            got = g.generate(prompt, max_tokens=40, temperature=0, ignore_eos=True)
            assert got.tokens == want.tokens, prompt
            drafted += got.stats.n_drafted
            accepted += got.stats.n_accepted
        assert 0 < accepted < drafted
        assert g.draft_head == files[variant]


def test_greedy_batched_output_is_plain_output(files, plain):
    with specgen.Generator(files["target"], n_ctx=256, n_threads=1, draft_head=files["shared"], draft_max=4,
                           n_parallel=2) as g:
        got = g.generate(PROMPTS, max_tokens=32, temperature=0, ignore_eos=True)
        for prompt, r in zip(PROMPTS, got):
            assert r.tokens == plain.generate(prompt, max_tokens=32, temperature=0, ignore_eos=True).tokens, prompt
        assert sum(r.stats.n_accepted for r in got) > 0


@pytest.mark.parametrize("variant", ["reduced", "shared"])
def test_nanospec_greedy_output_is_plain_output(files, plain, variant):
    # draft_p_min 0: the automatic 0.5 of a NanoSpec head would stop most of these random heads' drafts.
    with specgen.Generator(files["target"], n_ctx=256, n_threads=1, draft_head=files[variant], draft_max=4,
                           nanospec=True, draft_p_min=0) as g:
        drafted = accepted = 0
        # The second prompt extends the first: the slot's cached prefix is reused with the head's rows and S's seed.
        for prompt in [PROMPTS[0], PROMPTS[0] + " sea", PROMPTS[1]]:
            want = plain.generate(prompt, max_tokens=40, temperature=0, ignore_eos=True)
            got = g.generate(prompt, max_tokens=40, temperature=0, ignore_eos=True)
            assert got.tokens == want.tokens, prompt
            assert 0 < got.stats.vocab_set_size <= len(_testing.Eagle3Head(plain._core, files[variant]).d2t)
            assert got.stats.n_prompt_tokens_cached > 0 or prompt != PROMPTS[0] + " sea"
            drafted += got.stats.n_drafted
            accepted += got.stats.n_accepted
        assert 0 < accepted < drafted
    # The automatic draft_p_min stays lossless too.
    with specgen.Generator(files["target"], n_ctx=256, n_threads=1, draft_head=files[variant], nanospec=True) as g:
        want = plain.generate(PROMPTS[2], max_tokens=24, temperature=0, ignore_eos=True)
        assert g.generate(PROMPTS[2], max_tokens=24, temperature=0, ignore_eos=True).tokens == want.tokens


def test_nanospec_greedy_batched_output_is_plain_output(files, plain):
    # batch_draft_policy off: the step cost model would not draft three sequences with these heads' acceptance.
    with specgen.Generator(files["target"], n_ctx=256, n_threads=1, draft_head=files["reduced"], draft_max=4,
                           nanospec=True, draft_p_min=0, n_parallel=3, batch_draft_policy=False) as g:
        got = g.generate(PROMPTS, max_tokens=32, temperature=0, ignore_eos=True)
        for prompt, r in zip(PROMPTS, got):
            assert r.tokens == plain.generate(prompt, max_tokens=32, temperature=0, ignore_eos=True).tokens, prompt
            assert r.stats.n_drafted > 0 and r.stats.vocab_set_size > 0
        assert sum(r.stats.n_accepted for r in got) > 0



@pytest.mark.parametrize("nanospec", [False, True])
def test_a_busy_slots_prefix_is_copied_with_the_heads_rows(files, plain, nanospec):
    """A request that shares a long prefix with one decoding in another slot copies that slot's KV rows
    (prefix reuse across slots) with the head's rows for them (and NanoSpec's top-k), so it prefills only
    the rest; both keep plain decoding's tokens. Before, the head's rows were not copied and the whole
    prompt was prefilled again."""
    with specgen.Generator(files["target"], n_ctx=256, n_threads=1, draft_head=files["reduced"], draft_max=4,
                           nanospec=nanospec, draft_p_min=0, n_parallel=2, batch_draft_policy=False) as g:
        shared = g.tokenize(" ".join(PROMPTS * 4))
        a_ids = shared + g.tokenize(" the cat", add_bos=False)
        b_ids = shared + g.tokenize(" a stone", add_bos=False)
        a = g.generate(a_ids, max_tokens=40, temperature=0, ignore_eos=True, stream=True)
        next(a)  # a decodes: its prompt rows are committed in its slot
        b = g.generate(b_ids, max_tokens=16, temperature=0, ignore_eos=True)
        a.wait()
        assert b.stats.n_prompt_tokens_cached >= len(shared) - 2, (b.stats.n_prompt_tokens_cached, len(shared))
        assert b.stats.n_drafted > 0
        assert b.tokens == plain.generate(b_ids, max_tokens=16, temperature=0, ignore_eos=True).tokens
        assert a.tokens == plain.generate(a_ids, max_tokens=40, temperature=0, ignore_eos=True).tokens

@pytest.mark.parametrize("variant", ["reduced", "shared"])
def test_nanospec_seed_keeps_the_heads_ids(files, plain, variant):
    """After the prompt and one round, S is NanoSpec's seed (the prompt ids, the target's top-16 at every prompt
    row and the pending row, the emitted token) less the ids outside d2t: the head proposes none of those."""
    prompt = PROMPTS[1]
    ids = plain.tokenize(prompt)
    logits = plain.logits(ids)
    seed = set(ids) | {int(i) for row in logits for i in np.argsort(-row, kind="stable")[:16]}
    d2t = set(_testing.Eagle3Head(plain._core, files[variant]).d2t)
    with specgen.Generator(files["target"], n_ctx=64, n_threads=1, draft_head=files[variant], nanospec=True) as g:
        r = g.generate(prompt, max_tokens=1, temperature=0, ignore_eos=True)
    seed.add(r.tokens[0])
    assert r.stats.vocab_set_size == len(seed & d2t)
    if variant == "reduced":
        assert len(seed & d2t) < len(seed)


@pytest.mark.parametrize("nanospec", [False, True])
@pytest.mark.parametrize("variant", ["reduced", "shared"])
def test_sampled_pairs_follow_the_target_distribution(files, plain, variant, nanospec):
    """The first two tokens at T=1 (one drafted token verified, then the correction or bonus) against
    the exact joint distribution of plain decoding (chi-square, pooled to expected counts >= 5); with
    NanoSpec, q is the head's softmax over S and zero elsewhere."""
    prompt, top_k, n = PROMPTS[0], 5, 600
    pairs, accepted, drafted = [], 0, 0
    extra = dict(nanospec=True, draft_p_min=0) if nanospec else {}
    with specgen.Generator(files["target"], n_ctx=64, n_threads=1, draft_head=files[variant], draft_max=4, **extra) as g:
        for seed in range(n):
            r = g.generate(prompt, max_tokens=2, temperature=1.0, top_k=top_k, top_p=1.0, min_p=0.0, seed=seed,
                           ignore_eos=True)
            assert len(r.tokens) == 2
            pairs.append(r.tokens[0] * plain.n_vocab + r.tokens[1])
            accepted += r.stats.n_accepted
            drafted += r.stats.n_drafted
    p = goodness_of_fit(pairs, *joint_two_tokens(plain, prompt, top_k))
    print(f"{variant}{' nanospec' if nanospec else ''}: chi-square p = {p:.3f}, acceptance {accepted}/{drafted}")
    # Both verdicts happen: the test covers accepted drafts and the residual's corrections.
    assert 0 < accepted < drafted
    assert p > 1e-3


# --- heads that do not fit -----------------------------------------------------------------------------
@pytest.mark.parametrize("kw,message", [
    (dict(target_hidden=48), "target_hidden_size is 48 but the target's hidden size is 64"),
    (dict(layers=[2, 4, 8]), "outside the target's layers [0, 8)"),
    (dict(layers=[2, 4]), "target_layers has 2 entries, expected 3"),
    (dict(arch="llama"), "expected 'eagle3'"),
])
def test_mismatched_head_is_refused(files, kw, message):
    path = write_head(files["dir"] / f"bad-{len(list(files['dir'].iterdir()))}.gguf", files["hw"]["reduced"], **kw)
    with pytest.raises(InvalidParameterError, match="EAGLE-3 head") as e:
        specgen.Generator(files["target"], n_ctx=64, n_threads=1, draft_head=path)
    assert message in str(e.value)


def test_d2t_outside_the_target_vocabulary_is_refused(files):
    w = dict(files["hw"]["reduced"])
    w["d2t"] = w["d2t"].copy()
    w["d2t"][-1] = 100000
    path = write_head(files["dir"] / "bad-d2t.gguf", w)
    with pytest.raises(InvalidParameterError, match="d2t maps draft id 199 outside the target's vocabulary"):
        specgen.Generator(files["target"], n_ctx=64, n_threads=1, draft_head=path)


def test_draft_head_excludes_other_drafters(files):
    with pytest.raises(InvalidParameterError, match="draft_head drafts with an EAGLE-3 head"):
        specgen.Generator(files["target"], n_ctx=64, n_threads=1, draft_head=files["reduced"], draft="ngram")
    with pytest.raises(InvalidParameterError, match="draft_head drafts with an EAGLE-3 head"):
        specgen.Generator(files["target"], n_ctx=64, n_threads=1, draft_head=files["reduced"], ssd=True)


def test_cli_draft_head_flag(files, cli):
    base = [cli, "-m", files["target"], "-p", PROMPTS[0], "-n", "24", "--temp", "0", "-t", "1", "--ignore-eos"]
    plain_run = subprocess.run(base, capture_output=True, text=True, timeout=120)
    head_run = subprocess.run(base + ["--draft-head", files["reduced"]], capture_output=True, text=True, timeout=120)
    assert plain_run.returncode == 0 and head_run.returncode == 0, head_run.stderr
    assert head_run.stdout == plain_run.stdout
    assert "EAGLE-3 head" in head_run.stderr
    llama_spelling = subprocess.run(base + ["--spec-type", "draft-eagle3", "-md", files["reduced"]], capture_output=True,
                                    text=True, timeout=120)
    assert llama_spelling.returncode == 0 and llama_spelling.stdout == plain_run.stdout, llama_spelling.stderr
    nano = subprocess.run(base + ["--draft-head", files["reduced"], "--nanospec", "--draft-p-min", "0"],
                          capture_output=True, text=True, timeout=120)
    assert nano.returncode == 0 and nano.stdout == plain_run.stdout, nano.stderr
    assert "nanospec" in nano.stderr
    missing = subprocess.run(base + ["--draft-head", str(files["dir"] / "none.gguf")], capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode != 0 and "draft head file" in missing.stderr and "Traceback" not in missing.stderr


def test_c_api_draft_head(files, plain, tmp_path):
    """tests/c/eagle3.c: specgen_generator_params.draft_head drafts (some drafts accepted) and greedy output is
    plain decoding's, in C and against the SDK, also as auto's candidate; a missing head file, a target given
    as head and a head next to another drafter are refused with their status and a message naming the head."""
    import c_programs

    exe = c_programs.build("eagle3.c", tmp_path / "eagle3")
    n_tokens = 32
    env = dict(c_programs.loader_env(), SPECGEN_CALIBRATION=str(tmp_path / "calibration.json"))
    r = subprocess.run([exe, files["target"], files["reduced"], str(files["dir"] / "no-head.gguf"), PROMPTS[0],
                        str(n_tokens)], capture_output=True, text=True, env=env, timeout=120, errors="replace")
    assert r.returncode == 0 and "ALL CHECKS PASSED" in r.stderr, f"exit {r.returncode}\n{r.stderr}"
    want = plain.generate(PROMPTS[0], max_tokens=n_tokens, temperature=0, ignore_eos=True)
    assert r.stdout == want.text


def test_serve_draft_head_flag_replaces_the_default_drafter():
    pytest.importorskip("fastapi")
    from specgen.server import cli as serve_cli

    kw = serve_cli.generator_kwargs(serve_cli.build_parser().parse_args(["-m", "t.gguf", "--draft-head", "h.gguf"]))
    assert kw["draft_head"] == "h.gguf" and kw["draft_kind"] == "none"   # not the server's default auto


def test_bench_head_configurations(files, tmp_path):
    """specgen bench drafts with the --draft-head head in the head / head:ns / auto:head columns."""
    from specgen import bench

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": p}) + "\n" for i, p in enumerate(PROMPTS[:2])))
    res = bench.run(files["target"], "ar,head,head:ns:p0,auto:head", str(prompts), threads="1", max_tokens=16,
                    draft_max="4", warmup=False, peer=False, progress=False, draft_head=files["reduced"])
    assert res["meta"]["draft_head"] == files["reduced"]
    cells = {c["config"]: c for c in res["cells"]}
    assert all(c["status"] == "ok" for c in cells.values()), {k: c["status"] for k, c in cells.items()}
    assert cells["head:block"]["drafter"] == "eagle3" and cells["ar"]["drafter"] == "none"
    drafted = {}
    for run in res["runs"]:
        drafted[run["config"]] = drafted.get(run["config"], 0) + run["stats"]["n_drafted"]
    assert drafted["head:block"] > 0 and drafted["head:ns:p0:block"] > 0 and drafted["ar"] == 0
    with pytest.raises(ValueError, match="give --draft-head FILE"):
        bench.run(files["target"], "head", str(prompts), threads="1", max_tokens=4, warmup=False, peer=False,
                  progress=False)
