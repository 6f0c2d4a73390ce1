"""The model families as users bring them: tiny random Hugging Face checkpoints of Llama 3 (llama3 rope
scaling), Qwen3, Qwen2 with YaRN, Mistral and Gemma 3 (linear rope scaling on its global layers), written
to GGUF in llama.cpp's layout two ways -- by hand through gguf.GGUFWriter with llama.cpp's key and tensor
names (gguf.constants), and through specgen-convert -- and run by specgen against transformers' fp32 forward.

Also: greedy speculative output equals plain output for every family (n-gram, self + NanoSpec, a smaller
draft checkpoint of the same family), and the draft/target vocabulary rule (model/vocab_compat.h)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

import specgen  # noqa: E402
from specgen import convert as conv  # noqa: E402
from specgen.errors import ModelLoadError  # noqa: E402

N_VOCAB = 320          # embedding rows; the tokenizer has fewer tokens (the token list is padded)
HIDDEN = 256           # rows of 256 so that K-quants apply to every matrix
ORIG_CTX = 16          # rope scaling's original context: the test sequences run past it
N_POS = 40             # positions compared (past ORIG_CTX)
TOKENS = [int(t) for t in np.random.default_rng(7).integers(3, 300, size=N_POS)]
# f32 files: float32 rounding only (the logits span about +-5).
F32_MAX_ABS = 1e-4
# Q4_K_M files, against transformers running the same file's dequantized weights: what is left is specgen's
# 8-bit activations (llama.cpp's design). Relative RMS error of the logits, measured 0.02-0.04 here.
Q4_REL_RMS = 0.08
# Against the original fp32 checkpoint 4-bit weights dominate: random Gaussian weights (no outliers, no
# structure) lose 21-31% relative RMS of the logits in these 2-layer models; bounded loosely.
Q4_REL_RMS_VS_FP32 = 0.45

_LINES = ["The quick brown fox jumps over the lazy dog.", "Speculative decoding drafts tokens and verifies them.",
          "Hello world! 123 456", "GGUF files hold tensors and metadata.", "Gemma, Qwen and Llama walk into a bar."]
_QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


@dataclass
class Family:
    name: str
    arch: str              # general.architecture
    rope: str              # "none", "llama3", "linear", "yarn"

    def config(self, n_layer: int):
        common = dict(vocab_size=N_VOCAB, hidden_size=HIDDEN, intermediate_size=512, num_hidden_layers=n_layer,
                      num_attention_heads=4, max_position_embeddings=64, bos_token_id=1, eos_token_id=2)
        if self.name == "llama3":
            rp = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": ORIG_CTX, "rope_theta": 10_000.0}
            return transformers.LlamaConfig(**common, num_key_value_heads=2, tie_word_embeddings=False,
                                            rms_norm_eps=1e-5, rope_parameters=rp)
        if self.name == "qwen3":
            # head_dim 48: q is 192 wide for a 256-wide model (independent of n_embd / n_head).
            return transformers.Qwen3Config(**common, num_key_value_heads=2, head_dim=48, tie_word_embeddings=True,
                                            rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0})
        if self.name == "qwen2-yarn":
            rp = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIG_CTX,
                  "rope_theta": 10_000.0}
            return transformers.Qwen2Config(**common, num_key_value_heads=2, tie_word_embeddings=False,
                                            rope_parameters=rp)
        if self.name == "mistral":
            return transformers.MistralConfig(**common, num_key_value_heads=2, tie_word_embeddings=False,
                                              sliding_window=None)
        assert self.name == "gemma3"
        # Six layers: the sixth is global (llama.cpp's fixed gemma3 pattern), with linear scaling.
        common["num_hidden_layers"] = max(n_layer, 6) if n_layer > 1 else 1
        rp = {"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
              "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0}}
        return transformers.Gemma3TextConfig(**common, num_key_value_heads=1, head_dim=64, sliding_window=8,
                                             query_pre_attn_scalar=64, pad_token_id=0, rope_parameters=rp)


FAMILIES = [Family("llama3", "llama", "llama3"), Family("qwen3", "qwen3", "none"),
            Family("qwen2-yarn", "qwen2", "yarn"), Family("mistral", "llama", "none"),
            Family("gemma3", "gemma3", "linear")]
BY_NAME = {f.name: f for f in FAMILIES}


def _randomize(model, arch: str, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_((0.0 if arch == "gemma3" else 1.0) + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.06 * torch.randn(p.shape, generator=g))


def _tokenizer_json(path: Path) -> dict:
    """A byte-level BPE tokenizer of 300 tokens (fewer than the embedding's N_VOCAB rows)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_QWEN2_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(_LINES * 20, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<pad>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tk.save(str(path))
    import json
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("families")


@pytest.fixture(scope="module")
def tok_json(root):
    return _tokenizer_json(root / "tokenizer.json")


_checkpoints: dict = {}


def _checkpoint(root: Path, tok_json: dict, name: str, n_layer: int = 2, seed: int = 1234):
    """(hf_dir, model) of one family, saved once per module."""
    key = (name, n_layer, seed)
    if key not in _checkpoints:
        fam = BY_NAME[name]
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(fam.config(n_layer), dtype=torch.float32).eval()
        _randomize(model, fam.arch, seed)
        d = root / f"hf-{name}-{n_layer}-{seed}"
        model.save_pretrained(d)
        (d / "tokenizer.json").write_text(__import__("json").dumps(tok_json))
        _checkpoints[key] = (d, model)
    return _checkpoints[key]


def _hf_logits(model, tokens=TOKENS) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0].float().numpy()


# --------------------------------------------------------------------------------------------------------------
# llama.cpp's layout, written by hand with the gguf package's names
# --------------------------------------------------------------------------------------------------------------

def _llama3_factors(rp: dict, head_dim: int) -> np.ndarray:
    """rope_freqs.weight as llama.cpp's converter computes it: per pair, the divisor of the base frequency."""
    base, factor = rp["rope_theta"], rp["factor"]
    low_wl = rp["original_max_position_embeddings"] / rp["low_freq_factor"]
    high_wl = rp["original_max_position_embeddings"] / rp["high_freq_factor"]
    out = []
    for i in range(0, head_dim, 2):
        wavelen = 2 * math.pi * base ** (i / head_dim)
        if wavelen < high_wl:
            out.append(1.0)
        elif wavelen > low_wl:
            out.append(factor)
        else:
            smooth = (rp["original_max_position_embeddings"] / wavelen - rp["low_freq_factor"]) / (
                rp["high_freq_factor"] - rp["low_freq_factor"])
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF's half-split q/k rows -> the interleaved pairs of GGUF llama."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_llamacpp_gguf(path: Path, fam: Family, model, tok_json: dict, n_tokens: int | None = None,
                        rename: dict[int, str] | None = None, llama3_as_metadata: bool = False) -> Path:
    """The GGUF llama.cpp's convert_hf_to_gguf.py writes for `model`: its keys and tensor names. The token list
    has n_tokens entries (default: padded with [PADi] to the embedding's rows, as llama.cpp does).
    llama3_as_metadata: llama3 rope scaling as rope.scaling.* keys instead of the rope_freqs tensor."""
    cfg = model.config
    MT, names = gguf.MODEL_TENSOR, gguf.TENSOR_NAMES
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w = gguf.GGUFWriter(str(path), fam.arch)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    rp = cfg.rope_parameters.get("full_attention", cfg.rope_parameters)
    w.add_rope_freq_base(rp["rope_theta"])
    if fam.arch in ("qwen3", "gemma3"):
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if fam.arch == "llama":
        w.add_vocab_size(cfg.vocab_size)
        w.add_rope_dimension_count(head_dim)
    if rp["rope_type"] == "llama3" and llama3_as_metadata:
        w.add_string(gguf.Keys.Rope.SCALING_TYPE.format(arch=fam.arch), "llama3")
        w.add_rope_scaling_factor(rp["factor"])
        w.add_rope_scaling_orig_ctx_len(rp["original_max_position_embeddings"])
        w.add_float32(f"{fam.arch}.rope.scaling.low_freq_factor", rp["low_freq_factor"])
        w.add_float32(f"{fam.arch}.rope.scaling.high_freq_factor", rp["high_freq_factor"])
    elif rp["rope_type"] == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rp["factor"])
    elif rp["rope_type"] == "yarn":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rp["factor"])
        w.add_rope_scaling_orig_ctx_len(rp["original_max_position_embeddings"])
    if fam.arch == "gemma3":
        w.add_sliding_window(cfg.sliding_window)
    w.add_file_type(0)

    vocab = tok_json["model"]["vocab"]
    tokens = [""] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    types = [int(gguf.TokenType.CONTROL) if i < 3 else int(gguf.TokenType.NORMAL) for i in range(len(tokens))]
    for i, text in (rename or {}).items():
        tokens[i] = text
    n_tokens = cfg.vocab_size if n_tokens is None else n_tokens
    for i in range(len(tokens), n_tokens):
        tokens.append(f"[PAD{i}]")
        types.append(int(gguf.TokenType.UNUSED))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens[:n_tokens])
    w.add_token_types(types[:n_tokens])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tok_json["model"]["merges"]])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    plus_one = fam.arch == "gemma3"   # Gemma3RMSNorm scales by 1 + w; GGUF stores the multiplier

    def norm(x):
        return x + np.float32(1.0) if plus_one else x

    def add(name: str, x: np.ndarray) -> None:
        w.add_tensor(name, np.ascontiguousarray(x, dtype=np.float32))

    add(names[MT.TOKEN_EMBD] + ".weight", sd["model.embed_tokens.weight"])
    if fam.rope == "llama3" and not llama3_as_metadata:
        add(names[MT.ROPE_FREQS] + ".weight", _llama3_factors(rp, head_dim))
    layer_map = {MT.ATTN_NORM: "input_layernorm", MT.ATTN_Q: "self_attn.q_proj", MT.ATTN_K: "self_attn.k_proj",
                 MT.ATTN_V: "self_attn.v_proj", MT.ATTN_OUT: "self_attn.o_proj", MT.FFN_GATE: "mlp.gate_proj",
                 MT.FFN_UP: "mlp.up_proj", MT.FFN_DOWN: "mlp.down_proj"}
    if fam.arch == "gemma3":
        layer_map.update({MT.ATTN_POST_NORM: "post_attention_layernorm", MT.FFN_NORM: "pre_feedforward_layernorm",
                          MT.FFN_POST_NORM: "post_feedforward_layernorm"})
    else:
        layer_map[MT.FFN_NORM] = "post_attention_layernorm"
    if fam.arch in ("qwen3", "gemma3"):
        layer_map.update({MT.ATTN_Q_NORM: "self_attn.q_norm", MT.ATTN_K_NORM: "self_attn.k_norm"})
    for il in range(cfg.num_hidden_layers):
        for mt, hf in layer_map.items():
            for kind in ("weight", "bias"):
                key = f"model.layers.{il}.{hf}.{kind}"
                if key not in sd:
                    continue
                x = sd[key]
                if fam.arch == "llama" and mt in (MT.ATTN_Q, MT.ATTN_K):
                    x = _permute(x, cfg.num_attention_heads if mt == MT.ATTN_Q else cfg.num_key_value_heads)
                if "norm" in hf:
                    x = norm(x)
                add(names[mt].format(bid=il) + "." + kind, x)
    add(names[MT.OUTPUT_NORM] + ".weight", norm(sd["model.norm.weight"]))
    if not cfg.tie_word_embeddings:
        add(names[MT.OUTPUT] + ".weight", sd["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


_files: dict = {}


def llamacpp_file(root, tok_json, name, n_layer=2, seed=1234, **kw) -> Path:
    key = (name, n_layer, seed, tuple(sorted((k, str(v)) for k, v in kw.items())))
    if key not in _files:
        _, model = _checkpoint(root, tok_json, name, n_layer, seed)
        _files[key] = write_llamacpp_gguf(root / f"lc-{name}-{n_layer}-{seed}-{len(_files)}.gguf", BY_NAME[name],
                                          model, tok_json, **kw)
    return _files[key]


def converted_file(root, tok_json, name, outtype, n_layer=2, seed=1234) -> Path:
    key = ("convert", name, outtype, n_layer, seed)
    if key not in _files:
        d, _ = _checkpoint(root, tok_json, name, n_layer, seed)
        _files[key] = conv.convert(d, root / f"sc-{name}-{outtype}-{n_layer}-{seed}.gguf", outtype, progress=False)
    return _files[key]


def _generator(path, **kw) -> specgen.Generator:
    return specgen.Generator(str(path), n_ctx=96, n_threads=2, **kw)


# --------------------------------------------------------------------------------------------------------------
# Logits against transformers
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("writer", ["llamacpp", "specgen-convert"])
@pytest.mark.parametrize("name", [f.name for f in FAMILIES])
def test_f32_logits_match_transformers(root, tok_json, name, writer):
    """Every position (0..39, past rope scaling's original context of 16) within 1e-4 of transformers."""
    path = (llamacpp_file(root, tok_json, name) if writer == "llamacpp"
            else converted_file(root, tok_json, name, "f32"))
    want = _hf_logits(_checkpoint(root, tok_json, name)[1])
    with _generator(path) as g:
        # The token list is padded to the embedding's rows: the vocabulary is all N_VOCAB ids.
        assert g.n_vocab == N_VOCAB
        got = g.logits(TOKENS, batch_size=16)
    assert got.shape == want.shape == (N_POS, N_VOCAB)
    err = float(np.max(np.abs(got - want)))
    print(f"{name} {writer}: max abs {err:.3g}, logits span {float(np.abs(want).max()):.3g}")
    assert err < F32_MAX_ABS, f"max |specgen - transformers| = {err:.3g}"


def test_llama3_scaling_as_metadata(root, tok_json):
    """The same Llama 3 file with its scaling given as rope.scaling.type "llama3" metadata instead of the
    rope_freqs tensor: the same logits."""
    path = llamacpp_file(root, tok_json, "llama3", llama3_as_metadata=True)
    assert "rope_freqs.weight" not in {t.name for t in gguf.GGUFReader(path).tensors}
    with _generator(path) as g:
        got = g.logits(TOKENS)
    assert float(np.max(np.abs(got - _hf_logits(_checkpoint(root, tok_json, "llama3")[1])))) < F32_MAX_ABS


def _cuda_devices() -> int:
    from specgen import _core

    return _core.cuda_device_count()


@pytest.mark.skipif(_cuda_devices() == 0, reason="no CUDA device (or specgen built without CUDA)")
@pytest.mark.parametrize("name", ["llama3", "qwen2-yarn", "gemma3", "qwen3"])
def test_cuda_rope_scaling_matches_cpu(root, tok_json, name):
    """The device rotates with the host's inverse frequencies and attention factor: same logits as the CPU."""
    path = llamacpp_file(root, tok_json, name)
    with _generator(path) as cpu, specgen.Generator(str(path), n_ctx=96, device="cuda") as gpu:
        a, b = cpu.logits(TOKENS), gpu.logits(TOKENS)
    assert float(np.max(np.abs(a - b))) < F32_MAX_ABS


def test_rope_scaling_changes_the_logits(root, tok_json):
    """The scaled families are not accidentally run unscaled: dropping the scaling moves the logits by far more
    than the tolerance (so the comparisons above check it)."""
    for name in ("llama3", "qwen2-yarn", "gemma3"):
        _, model = _checkpoint(root, tok_json, name)
        cfg = model.config
        plain = type(model)(type(cfg)(**{**cfg.to_dict(), "rope_parameters": _unscaled(cfg.rope_parameters)})).eval()
        plain.load_state_dict(model.state_dict())
        diff = float(np.max(np.abs(_hf_logits(plain) - _hf_logits(model))))
        assert diff > 100 * F32_MAX_ABS, f"{name}: scaling changes logits by only {diff:.3g}"


def _unscaled(rp: dict) -> dict:
    if "full_attention" in rp:
        return {k: _unscaled(v) for k, v in rp.items()}
    return {"rope_type": "default", "rope_theta": rp["rope_theta"]}


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _dequantized_model(path: Path, name: str, model):
    """A copy of `model` whose matrices are the file's (quantized) ones, dequantized by gguf.quants."""
    import copy

    fam = BY_NAME[name]
    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    clone = copy.deepcopy(model)
    with torch.no_grad():
        for hf_name, p in clone.named_parameters():
            gname = conv._gguf_name(hf_name, fam.arch)
            if p.dim() < 2 or gname not in tensors:
                continue
            t = tensors[gname]
            w = gguf.quants.dequantize(t.data, t.tensor_type).reshape(p.shape)
            if fam.arch == "llama" and gname.endswith(("attn_q.weight", "attn_k.weight")):
                cfg = model.config
                w = _unpermute(w, cfg.num_attention_heads if "attn_q" in gname else cfg.num_key_value_heads)
            p.copy_(torch.from_numpy(np.ascontiguousarray(w)))
    return clone


def _rel_rms(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.sqrt(np.mean((got - want) ** 2)) / np.sqrt(np.mean(want ** 2)))


@pytest.mark.parametrize("name", [f.name for f in FAMILIES])
def test_q4_k_m_logits_close_to_transformers(root, tok_json, name):
    path = converted_file(root, tok_json, name, "q4_k_m")
    reader = gguf.GGUFReader(path)
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    # llama-quantize's choice for 2 layers: the last layer's attn_v / ffn_down get more bits.
    model = _checkpoint(root, tok_json, name)[1]
    n_layer = model.config.num_hidden_layers
    assert types["blk.0.attn_q.weight"] == "Q4_K" and types["output_norm.weight"] == "F32"
    assert [types[f"blk.{il}.ffn_down.weight"] for il in range(n_layer)] == [
        "Q6_K" if conv._more_bits_layer(il, n_layer) else "Q4_K" for il in range(n_layer)]
    assert types[f"blk.{n_layer - 1}.attn_v.weight"] == "Q6_K"
    with _generator(path) as g:
        got = g.logits(TOKENS)
    same_weights = _rel_rms(got, _hf_logits(_dequantized_model(path, name, model)))
    fp32 = _rel_rms(got, _hf_logits(model))
    print(f"{name}: q4_k_m relative RMS {same_weights:.4f} (vs fp32 checkpoint {fp32:.4f})")
    assert same_weights < Q4_REL_RMS
    assert fp32 < Q4_REL_RMS_VS_FP32


@pytest.mark.parametrize("kind", ["yarn-explicit", "linear"])
def test_rope_scaling_parameters_through_the_converter(root, tok_json, kind):
    """YaRN with an explicit attention_factor and beta_fast / beta_slow (rope.scaling.yarn_* keys), and linear
    scaling on a Llama: specgen-convert's f32 file against transformers past the original context."""
    if kind == "linear":
        fam = BY_NAME["mistral"]
        rp = {"rope_type": "linear", "factor": 4.0, "rope_theta": 10_000.0}
    else:
        fam = BY_NAME["qwen2-yarn"]
        rp = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": ORIG_CTX, "rope_theta": 10_000.0,
              "attention_factor": 1.3, "beta_fast": 16.0, "beta_slow": 2.0}
    cfg = fam.config(2)
    cfg.rope_parameters = rp
    torch.manual_seed(3)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    _randomize(model, fam.arch, 3)
    d = root / f"hf-{kind}"
    model.save_pretrained(d)
    (d / "tokenizer.json").write_text(__import__("json").dumps(tok_json))
    path = conv.convert(d, root / f"{kind}.gguf", "f32", progress=False)
    if kind != "linear":
        fields = gguf.GGUFReader(path).fields
        assert fields["qwen2.rope.scaling.yarn_beta_fast"].contents() == pytest.approx(16.0)
        assert fields["qwen2.rope.scaling.yarn_beta_slow"].contents() == pytest.approx(2.0)
    with _generator(path) as g:
        got = g.logits(TOKENS)
    assert float(np.max(np.abs(got - _hf_logits(model)))) < F32_MAX_ABS


def test_tokenizer_smaller_than_embedding_is_padding(root, tok_json):
    """A token list of 300 for 320 rows (a multiple of 64): the vocabulary is the tokenizer's, the padded rows are
    never part of the head, and the logits of the real ids are unchanged."""
    path = llamacpp_file(root, tok_json, "qwen2-yarn", n_tokens=300)
    want = _hf_logits(_checkpoint(root, tok_json, "qwen2-yarn")[1])[:, :300]
    with _generator(path) as g:
        assert g.n_vocab == 300
        got = g.logits(TOKENS)
        assert got.shape == (N_POS, 300)
        assert float(np.max(np.abs(got - want))) < F32_MAX_ABS
        out = g.generate(TOKENS[:8], max_tokens=12, temperature=1.5, seed=3, min_p=0, top_k=0, top_p=1)
        assert all(0 <= t < 300 for t in out.tokens)


def test_converter_metadata_for_llamacpp(root, tok_json):
    """specgen-convert writes llama.cpp's keys for the scaled families."""
    r = gguf.GGUFReader(converted_file(root, tok_json, "qwen2-yarn", "f32"))
    assert r.fields["qwen2.rope.scaling.type"].contents() == "yarn"
    assert r.fields["qwen2.rope.scaling.factor"].contents() == pytest.approx(4.0)
    assert r.fields["qwen2.rope.scaling.original_context_length"].contents() == ORIG_CTX
    r = gguf.GGUFReader(converted_file(root, tok_json, "llama3", "f32"))
    t = {t.name: t for t in r.tensors}["rope_freqs.weight"]
    rp = _checkpoint(root, tok_json, "llama3")[1].config.rope_parameters
    np.testing.assert_allclose(np.asarray(t.data), _llama3_factors(rp, HIDDEN // 4), rtol=1e-6)
    r = gguf.GGUFReader(converted_file(root, tok_json, "qwen3", "f32"))
    assert r.fields["general.architecture"].contents() == "qwen3"
    assert r.fields["qwen3.attention.key_length"].contents() == 48
    assert "blk.0.attn_q_norm.weight" in {t.name for t in r.tensors}


@pytest.mark.parametrize("name", [f.name for f in FAMILIES])
def test_converter_writes_llamacpp_layout(root, tok_json, name):
    """specgen-convert's f32 file has exactly the tensors of the llama.cpp-layout file (names, shapes, values) and
    the same values for every architecture key that file has."""
    ours = gguf.GGUFReader(converted_file(root, tok_json, name, "f32"))
    ref = gguf.GGUFReader(llamacpp_file(root, tok_json, name))
    ours_t = {t.name: t for t in ours.tensors}
    ref_t = {t.name: t for t in ref.tensors}
    assert sorted(ours_t) == sorted(ref_t)
    for n, t in ref_t.items():
        assert list(ours_t[n].shape) == list(t.shape), n
        np.testing.assert_allclose(np.asarray(ours_t[n].data), np.asarray(t.data), rtol=1e-6, atol=1e-7, err_msg=n)
    arch = BY_NAME[name].arch
    for key, field in ref.fields.items():
        if key.startswith(arch + "."):
            assert key in ours.fields, key
            assert ours.fields[key].contents() == pytest.approx(field.contents()), key


@pytest.mark.parametrize("name", ["mistral"])
def test_transformers_reads_converted_file_back(root, tok_json, name):
    """transformers' own GGUF loader (an independent reader of llama.cpp's conventions) gets the same model.
    Only for the family it reads completely: it ignores qwen3's attention.key_length, rope_freqs and the
    rope.scaling keys (the layout test above checks those against llama.cpp's names instead)."""
    path = converted_file(root, tok_json, name, "f32")
    back = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                             dtype=torch.float32).eval()
    want = _hf_logits(_checkpoint(root, tok_json, name)[1])
    assert float(np.max(np.abs(_hf_logits(back) - want))) < F32_MAX_ABS


# --------------------------------------------------------------------------------------------------------------
# Speculative decoding on every family: greedy output == plain output
# --------------------------------------------------------------------------------------------------------------

PROMPT = TOKENS[:12] + TOKENS[:6]   # a repeat, so that n-gram drafting has something to find


@pytest.mark.parametrize("name", [f.name for f in FAMILIES])
def test_speculative_greedy_equals_plain(root, tok_json, name):
    path = llamacpp_file(root, tok_json, name)
    draft = llamacpp_file(root, tok_json, name, n_layer=1, seed=99)
    with _generator(path) as g:
        plain = g.generate(PROMPT, max_tokens=28, temperature=0).tokens
    assert len(plain) > 0
    configs = {"ngram": dict(draft="ngram"),
               "self+nanospec": dict(draft="self", self_layers=1, nanospec=True, nanospec_capacity=64),
               "draft model": dict(draft=str(draft), draft_max=4)}
    for label, kw in configs.items():
        with _generator(path, **kw) as g:
            assert g.generate(PROMPT, max_tokens=28, temperature=0).tokens == plain, f"{name}: {label}"


# --------------------------------------------------------------------------------------------------------------
# Draft / target vocabulary compatibility
# --------------------------------------------------------------------------------------------------------------

def _grown(model, n_vocab: int):
    """`model` with n_vocab rows: its own, then random ones (the rows a bigger sibling's padding adds)."""
    big = transformers.AutoModelForCausalLM.from_config(
        type(model.config)(**{**model.config.to_dict(), "vocab_size": n_vocab}), dtype=torch.float32).eval()
    sd = model.state_dict()
    g = torch.Generator().manual_seed(n_vocab)
    with torch.no_grad():
        for k, v in big.state_dict().items():
            extra = 0.06 * torch.randn(n_vocab - sd[k].shape[0], HIDDEN, generator=g) if v.shape != sd[k].shape else None
            v.copy_(sd[k] if extra is None else torch.cat([sd[k], extra]))
    return big


def test_padded_vocabulary_draft_pair(root, tok_json):
    """Vocabularies of 320 and 384 tokens (64 more [PAD] entries, as Qwen2.5 0.5B vs 7B differ by 128): accepted
    both ways. A bigger draft never proposes an id the target lacks; a smaller draft reads the target's extra ids
    (here in the prompt) as its unknown token and keeps them out of its NanoSpec set. Greedy output equals plain
    decoding, also with NanoSpec and under SSD."""
    fam = BY_NAME["qwen2-yarn"]
    target_320 = llamacpp_file(root, tok_json, "qwen2-yarn")
    draft_320 = llamacpp_file(root, tok_json, "qwen2-yarn", n_layer=1, seed=5)
    _, small = _checkpoint(root, tok_json, "qwen2-yarn", n_layer=1, seed=5)
    draft_384 = write_llamacpp_gguf(root / "draft-384.gguf", fam, _grown(small, 384), tok_json)
    target_384 = write_llamacpp_gguf(root / "target-384.gguf", fam,
                                     _grown(_checkpoint(root, tok_json, "qwen2-yarn")[1], 384), tok_json)
    for target, draft, n_vocab, prompt in ((target_320, draft_384, 320, PROMPT),
                                           (target_384, draft_320, 384, PROMPT[:5] + [350, 383] + PROMPT[5:])):
        with _generator(target) as g:
            plain = g.generate(prompt, max_tokens=24, temperature=0).tokens
        for kw in (dict(draft=str(draft)), dict(draft=str(draft), nanospec=True),
                   dict(draft=str(draft), ssd=True, n_threads_draft=1)):
            with _generator(target, **kw) as g:
                assert g.generate(prompt, max_tokens=24, temperature=0).tokens == plain, (n_vocab, kw)
                r = g.generate(prompt, max_tokens=24, temperature=1.0, seed=11, top_k=0, top_p=1, min_p=0)
                assert all(0 <= t < n_vocab for t in r.tokens)


def test_mismatched_draft_pair_names_the_first_differing_id(root, tok_json):
    target = llamacpp_file(root, tok_json, "qwen2-yarn")
    bad = llamacpp_file(root, tok_json, "qwen2-yarn", n_layer=1, seed=5, rename={7: "zz", 40: "yy"})
    for kw in (dict(draft=str(bad)), dict(draft=str(bad), ssd=True)):
        with pytest.raises(ModelLoadError, match=r"token 7 is 'zz'"):
            _generator(target, **kw)
    # Ids below 5 are not compared (special placeholders differ between sizes of one family, as llama.cpp allows).
    ok = llamacpp_file(root, tok_json, "qwen2-yarn", n_layer=1, seed=5, rename={3: "<other>"})
    _generator(target, draft=str(ok)).close()


def test_draft_vocabulary_too_different_in_size(root, tok_json):
    target = llamacpp_file(root, tok_json, "qwen2-yarn")
    _, small = _checkpoint(root, tok_json, "qwen2-yarn", n_layer=1, seed=5)
    huge = transformers.AutoModelForCausalLM.from_config(
        transformers.Qwen2Config(**{**small.config.to_dict(), "vocab_size": 512}), dtype=torch.float32).eval()
    draft = write_llamacpp_gguf(root / "draft-512.gguf", BY_NAME["qwen2-yarn"], huge, tok_json)
    with pytest.raises(ModelLoadError, match="more than 128"):
        _generator(target, draft=str(draft))
