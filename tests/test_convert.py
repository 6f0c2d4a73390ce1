"""specgen.convert: tiny random Llama / Qwen2 / Gemma 3 checkpoints -> GGUF, checked three ways:
the file's metadata and tensors (gguf.GGUFReader), transformers loading the GGUF back (an independent reader of
llama.cpp's conventions: q/k permutation, Gemma norm +1), and specgen's own logits against transformers'."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
spm = pytest.importorskip("sentencepiece")
tokenizers = pytest.importorskip("tokenizers")

import specgen  # noqa: E402
from specgen import convert as conv  # noqa: E402
from specgen.errors import ModelLoadError  # noqa: E402

ARCHS = ("llama", "qwen2", "gemma3")
PLAIN_OUTTYPES = ("f32", "f16", "bf16", "q8_0")
TOKENS = [1, 17, 42, 99, 3, 250, 7, 128, 64, 5, 200, 11]
N_VOCAB = 320          # > the tokenizers' 300 tokens: the converter pads the token list
HIDDEN = 256           # rows of 256 so that K-quants apply to every matrix

_LINES = ["The quick brown fox jumps over the lazy dog.", "Speculative decoding drafts tokens and verifies them.",
          "Hello world! 123 456", "GGUF files hold tensors and metadata.", "Gemma, Qwen and Llama walk into a bar."]
_QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


# --------------------------------------------------------------------------------------------------------------
# Tiny checkpoints
# --------------------------------------------------------------------------------------------------------------

def _spm_model(add_dummy_prefix: bool) -> bytes:
    """Like the real Llama / Gemma models: no normalization, spaces kept; Gemma adds no dummy prefix."""
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_LINES * 20), model_writer=buf, vocab_size=310,
                                   model_type="bpe", byte_fallback=True, hard_vocab_limit=False,
                                   character_coverage=1.0, minloglevel=2,
                                   normalization_rule_name="identity", remove_extra_whitespaces=False,
                                   add_dummy_prefix=add_dummy_prefix)
    return buf.getvalue()


def _bpe_tokenizer_json(path: Path) -> None:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_QWEN2_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(_LINES * 20, trainers.BpeTrainer(
        vocab_size=299, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tk.add_special_tokens(["<|im_start|>"])
    tk.save(str(path))


def _config(arch: str):
    common = dict(vocab_size=N_VOCAB, hidden_size=HIDDEN, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, max_position_embeddings=256)
    if arch == "llama":
        return transformers.LlamaConfig(**common, num_key_value_heads=2, tie_word_embeddings=False,
                                        rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)
    if arch == "qwen2":
        return transformers.Qwen2Config(**common, num_key_value_heads=2, tie_word_embeddings=True,
                                        bos_token_id=0, eos_token_id=0)
    # query_pre_attn_scalar stays at its default (256 != head_dim) so that attention.scale matters.
    return transformers.Gemma3TextConfig(**common, num_key_value_heads=1, head_dim=64, sliding_window=8,
                                         bos_token_id=1, eos_token_id=2, pad_token_id=0)


def _randomize(model, arch: str) -> None:
    """Non-trivial norms (zero-centred for Gemma, whose HF norm is 1 + w) and biases, larger weights."""
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                base = 0.0 if arch == "gemma3" else 1.0
                p.copy_(base + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=g))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{arch: (hf_dir, model)}; llama is saved sharded (model.safetensors.index.json)."""
    root = tmp_path_factory.mktemp("hf")
    out = {}
    for arch in ARCHS:
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(_config(arch), dtype=torch.float32).eval()
        _randomize(model, arch)
        d = root / arch
        model.save_pretrained(d, max_shard_size="600KB" if arch == "llama" else "1GB")
        if arch == "qwen2":
            _bpe_tokenizer_json(d / "tokenizer.json")
        else:
            (d / "tokenizer.model").write_bytes(_spm_model(add_dummy_prefix=arch == "llama"))
        out[arch] = (d, model)
    assert (out["llama"][0] / "model.safetensors.index.json").is_file()
    return out


@pytest.fixture(scope="module")
def converted(checkpoints, tmp_path_factory):
    """Lazily converted files: converted(arch, outtype) -> Path, each conversion done once per module."""
    root = tmp_path_factory.mktemp("gguf")
    done: dict[tuple[str, str], Path] = {}

    def get(arch: str, outtype: str) -> Path:
        if (arch, outtype) not in done:
            done[arch, outtype] = conv.convert(checkpoints[arch][0], root / f"{arch}-{outtype}.gguf", outtype,
                                               progress=False)
        return done[arch, outtype]
    return get


def _hf_logits(model, tokens=TOKENS) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0].float().numpy()


def _field(reader, key):
    return reader.fields[key].contents()


# --------------------------------------------------------------------------------------------------------------
# File contents
# --------------------------------------------------------------------------------------------------------------

_EXPECTED_LAYER_TENSORS = {
    "llama": ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
              "ffn_down"],
    "qwen2": ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
              "ffn_down", "attn_q.bias", "attn_k.bias", "attn_v.bias"],
    "gemma3": ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
               "post_attention_norm", "ffn_norm", "post_ffw_norm", "ffn_gate", "ffn_up", "ffn_down"],
}
_QTYPE = {"f32": "F32", "f16": "F16", "bf16": "BF16", "q8_0": "Q8_0", "q4_k": "Q4_K", "q6_k": "Q6_K"}


@pytest.mark.parametrize("outtype", PLAIN_OUTTYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_metadata_and_tensors(converted, checkpoints, arch, outtype):
    reader = gguf.GGUFReader(converted(arch, outtype))
    cfg = checkpoints[arch][1].config
    head_dim = getattr(cfg, "head_dim", None) or HIDDEN // 4
    assert _field(reader, "general.architecture") == arch
    assert _field(reader, f"{arch}.block_count") == 2
    assert _field(reader, f"{arch}.embedding_length") == HIDDEN
    assert _field(reader, f"{arch}.feed_forward_length") == 512
    assert _field(reader, f"{arch}.context_length") == 256
    assert _field(reader, f"{arch}.attention.head_count") == 4
    assert _field(reader, f"{arch}.attention.head_count_kv") == cfg.num_key_value_heads
    assert _field(reader, f"{arch}.attention.key_length") == head_dim
    assert _field(reader, f"{arch}.attention.value_length") == head_dim
    assert _field(reader, f"{arch}.attention.layer_norm_rms_epsilon") == pytest.approx(cfg.rms_norm_eps)
    theta = cfg.rope_parameters["full_attention" if arch == "gemma3" else "rope_theta"]
    theta = theta["rope_theta"] if isinstance(theta, dict) else theta
    assert _field(reader, f"{arch}.rope.freq_base") == pytest.approx(theta)
    if arch == "gemma3":
        assert _field(reader, "gemma3.attention.sliding_window") == 8
        assert _field(reader, "gemma3.rope.freq_base_swa") == pytest.approx(10_000.0)
        assert list(_field(reader, "gemma3.attention.sliding_window_pattern")) == [True, True]
        assert _field(reader, "gemma3.attention.scale") == pytest.approx(256 ** -0.5)

    tokens = _field(reader, "tokenizer.ggml.tokens")
    assert len(tokens) == N_VOCAB and tokens[-1] == f"[PAD{N_VOCAB - 1}]"
    types = list(_field(reader, "tokenizer.ggml.token_type"))
    assert types[-1] == gguf.TokenType.UNUSED
    if arch == "qwen2":
        assert _field(reader, "tokenizer.ggml.model") == "gpt2"
        assert _field(reader, "tokenizer.ggml.pre") == "qwen2"
        assert len(_field(reader, "tokenizer.ggml.merges")) > 0
        assert tokens[0] == "<|endoftext|>" and types[0] == gguf.TokenType.CONTROL
        assert _field(reader, "tokenizer.ggml.add_bos_token") is False
    else:
        assert _field(reader, "tokenizer.ggml.model") == "llama"
        assert tokens[:3] == ["<unk>", "<s>", "</s>"]
        assert types[:4] == [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL,
                             gguf.TokenType.BYTE]
        assert len(_field(reader, "tokenizer.ggml.scores")) == N_VOCAB
        assert _field(reader, "tokenizer.ggml.bos_token_id") == 1
        assert _field(reader, "tokenizer.ggml.eos_token_id") == 2
        assert _field(reader, "tokenizer.ggml.add_bos_token") is True
        assert _field(reader, "tokenizer.ggml.add_space_prefix") is (arch == "llama")

    by_name = {t.name: t for t in reader.tensors}
    expected = {"token_embd.weight", "output_norm.weight"}
    if arch == "llama":
        expected.add("output.weight")  # the only untied model
    for i in range(2):
        expected |= {f"blk.{i}.{n}" if n.endswith(".bias") else f"blk.{i}.{n}.weight"
                     for n in _EXPECTED_LAYER_TENSORS[arch]}
    assert set(by_name) == expected
    for name, t in by_name.items():
        want = "F32" if len(t.shape) == 1 else _QTYPE[outtype]
        assert t.tensor_type.name == want, name
    # ggml order: ne = [in, out] for an HF [out, in] weight.
    assert list(by_name["blk.0.attn_q.weight"].shape) == [HIDDEN, 4 * head_dim]
    assert list(by_name["token_embd.weight"].shape) == [HIDDEN, N_VOCAB]


def test_gemma3_norms_are_stored_plus_one(converted, checkpoints):
    reader = gguf.GGUFReader(converted("gemma3", "f32"))
    model = checkpoints["gemma3"][1]
    got = {t.name: np.asarray(t.data) for t in reader.tensors}
    sd = model.state_dict()
    np.testing.assert_allclose(got["blk.1.attn_k_norm.weight"], sd["model.layers.1.self_attn.k_norm.weight"] + 1)
    np.testing.assert_allclose(got["output_norm.weight"], sd["model.norm.weight"] + 1)
    np.testing.assert_allclose(got["blk.0.post_ffw_norm.weight"],
                               sd["model.layers.0.post_feedforward_layernorm.weight"] + 1)


def test_llama_q_k_are_permuted_to_interleaved_rope(converted, checkpoints):
    reader = gguf.GGUFReader(converted("llama", "f32"))
    model = checkpoints["llama"][1]
    got = {t.name: np.asarray(t.data) for t in reader.tensors}
    wq = model.state_dict()["model.layers.0.self_attn.q_proj.weight"].numpy()
    hd = HIDDEN // 4
    # Row 2i of a head is HF row i and row 2i + 1 is HF row i + hd/2 (HF's rotate_half pairs).
    head0 = got["blk.0.attn_q.weight"][:hd]
    np.testing.assert_array_equal(head0[0::2], wq[: hd // 2])
    np.testing.assert_array_equal(head0[1::2], wq[hd // 2: hd])
    # Qwen2 and Gemma 3 keep HF's order (NeoX RoPE in llama.cpp).
    got_q = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(converted("qwen2", "f32")).tensors}
    np.testing.assert_array_equal(got_q["blk.0.attn_q.weight"],
                                  checkpoints["qwen2"][1].state_dict()["model.layers.0.self_attn.q_proj.weight"])


def test_sharded_and_single_file_checkpoints_convert_identically(checkpoints, converted, tmp_path):
    d, model = checkpoints["llama"]
    single = tmp_path / "single"
    model.save_pretrained(single, max_shard_size="1GB")
    (single / "tokenizer.model").write_bytes((d / "tokenizer.model").read_bytes())
    assert not (single / "model.safetensors.index.json").exists()
    out = conv.convert(single, tmp_path / "single.gguf", "f16", progress=False)
    a = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(out).tensors}
    b = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(converted("llama", "f16")).tensors}
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_gemma3_conditional_generation_text_part(checkpoints, converted, tmp_path):
    """A Gemma3ForConditionalGeneration layout (text_config, model.language_model.*, vision tensors) converts
    to the same text model as Gemma3ForCausalLM."""
    from safetensors.numpy import load_file, save_file

    src, model = checkpoints["gemma3"]
    d = tmp_path / "gemma3-mm"
    d.mkdir()
    text_cfg = json.loads((src / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "text_config": text_cfg, "vision_config": {"hidden_size": 16}}))
    tensors = {k.replace("model.", "model.language_model.", 1): v
               for k, v in load_file(src / "model.safetensors").items()}
    tensors["model.vision_tower.vision_model.post_layernorm.weight"] = np.ones(16, np.float32)
    tensors["model.multi_modal_projector.mm_input_projection_weight"] = np.ones((16, HIDDEN), np.float32)
    save_file(tensors, d / "model.safetensors")
    (d / "tokenizer.model").write_bytes((src / "tokenizer.model").read_bytes())
    out = conv.convert(d, tmp_path / "mm.gguf", "f32", progress=False)
    a = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(out).tensors}
    b = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(converted("gemma3", "f32")).tensors}
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


@pytest.mark.parametrize("outtype", ["q4_k", "q6_k"])
def test_k_quant_types(converted, checkpoints, outtype):
    reader = gguf.GGUFReader(converted("llama", outtype))
    by_name = {t.name: t for t in reader.tensors}
    types = {n: t.tensor_type.name for n, t in by_name.items()}
    assert types["blk.0.attn_q.weight"] == _QTYPE[outtype]
    assert types["output.weight"] == "Q6_K"
    assert types["blk.0.attn_norm.weight"] == "F32"
    # gguf-py's dequantizer reads the native quantizer's blocks back. Relative RMS error of Gaussian weights
    # (measured: Q4_K 0.071, Q6_K 0.017, in line with llama.cpp's quantize-stats for these formats).
    limit = {"q4_k": 0.10, "q6_k": 0.03}[outtype]
    sd = checkpoints["llama"][1].state_dict()
    down = by_name["blk.1.ffn_down.weight"]
    got = gguf.quants.dequantize(np.asarray(down.data), down.tensor_type)
    want = sd["model.layers.1.mlp.down_proj.weight"].numpy()
    rel = float(np.sqrt(np.mean((got - want) ** 2)) / np.sqrt(np.mean(want ** 2)))
    assert rel < limit, rel


def test_k_quant_without_native_quantizer_is_a_clear_error(checkpoints, tmp_path, monkeypatch):
    def missing():
        raise ModelLoadError("K-quant output needs specgen._core.quantize_row")
    monkeypatch.setattr(conv, "_native_quantize_row", missing)
    with pytest.raises(ModelLoadError, match="quantize_row"):
        conv.convert(checkpoints["llama"][0], tmp_path / "x.gguf", "q4_k", progress=False)
    assert not list(tmp_path.iterdir())  # nothing half-written


@pytest.mark.parametrize("shape,outtype,expected", [
    ((512, 256), "q4_k", conv._GGML_Q4_K),
    ((512, 256), "q6_k", conv._GGML_Q6_K),
    ((512, 96), "q4_k", conv._GGML_Q8_0),     # 96 % 256 != 0, 96 % 32 == 0
    ((512, 100), "q6_k", conv._GGML_F16),     # not even a multiple of 32
    ((512, 100), "q8_0", conv._GGML_F16),
    ((256,), "q4_k", conv._GGML_F32),         # 1-D: always F32
    ((512, 100), "bf16", conv._GGML_BF16),
])
def test_tensor_type_fallbacks(shape, outtype, expected):
    assert conv._tensor_type("blk.0.ffn_up.weight", shape, outtype, tied=False) == expected


def test_q4_k_output_projection_is_q6_k():
    assert conv._tensor_type("output.weight", (320, 256), "q4_k", tied=False) == conv._GGML_Q6_K
    assert conv._tensor_type("token_embd.weight", (320, 256), "q4_k", tied=True) == conv._GGML_Q6_K
    assert conv._tensor_type("token_embd.weight", (320, 256), "q4_k", tied=False) == conv._GGML_Q4_K


# --------------------------------------------------------------------------------------------------------------
# Logits: transformers reading our GGUF back, and specgen's runtime
# --------------------------------------------------------------------------------------------------------------

def _assert_logits_close(got: np.ndarray, want: np.ndarray, outtype: str) -> None:
    """f32: elementwise (float32 rounding only). q8_0: RMS error within 6% of the logits' RMS (measured on
    these random models: transformers reading the Q8_0 files back 1.2-2.8%, specgen's runtime with its Q8
    activations 3.4-3.8%; bf16 0.4-0.9%) and the same top token at >= 90% of positions."""
    assert got.shape == want.shape
    if outtype == "f32":
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
        return
    rel = float(np.sqrt(np.mean((got - want) ** 2)) / np.sqrt(np.mean(want ** 2)))
    assert rel < 0.06, f"relative RMS error {rel:.4f}"
    # Random models have close logits, so the top token may flip at a few positions.
    assert (got.argmax(-1) == want.argmax(-1)).mean() >= 0.75


@pytest.mark.parametrize("outtype", ["f32", "q8_0"])
@pytest.mark.parametrize("arch", ARCHS)
def test_transformers_reads_our_gguf_back(converted, checkpoints, arch, outtype):
    """transformers' GGUF loader undoes the llama permutation and the Gemma +1 itself, so matching logits
    check our names, shapes, metadata and conventions independently of specgen's runtime."""
    path = converted(arch, outtype)
    model = checkpoints[arch][1]
    # A load error is a failure, not a skip: it may be our names or metadata that it rejects.
    back = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                             dtype=torch.float32).eval()
    if arch == "gemma3":
        # transformers' GGUF config for gemma3 knows no sliding_window_pattern / local rope base keys: both
        # models use Gemma3TextConfig's defaults there, and this sequence is shorter than the window anyway.
        assert back.config.sliding_window == model.config.sliding_window
    _assert_logits_close(_hf_logits(back), _hf_logits(model), outtype)


def _runtime_logits(path: Path, tokens: list[int]) -> np.ndarray:
    """All-position logits of a fresh context from specgen's runtime: `_core.Model(path, n_threads)` as
    specified, or the `_core.Generator(GeneratorParams).logits` that the integrator landed first."""
    from specgen import _core

    if hasattr(_core, "Model"):
        return np.asarray(_core.Model(str(path), n_threads=1).logits(tokens))
    params = _core.GeneratorParams()
    params.model_path, params.n_threads, params.n_ctx = str(path), 1, 64
    return np.asarray(_core.Generator(params).logits(tokens))


@pytest.mark.parametrize("outtype", ["f32", "q8_0"])
@pytest.mark.parametrize("arch", ARCHS)
def test_specgen_logits_match_transformers(converted, checkpoints, arch, outtype):
    """specgen._core.Model(path).logits(tokens) -> [n_tokens, n_vocab] for all positions of a fresh context.
    The sequence (12 tokens) is longer than gemma3's sliding window (8), so SWA masking is exercised, and
    gemma3's query_pre_attn_scalar (256) differs from head_dim (64), so gemma3.attention.scale must be read."""
    got = _runtime_logits(converted(arch, outtype), TOKENS)
    want = _hf_logits(checkpoints[arch][1])
    assert got.shape == want.shape == (len(TOKENS), N_VOCAB)
    _assert_logits_close(got, want, outtype)


# --------------------------------------------------------------------------------------------------------------
# Errors and the command line
# --------------------------------------------------------------------------------------------------------------

def _unknown_arch_dir(checkpoints, tmp_path) -> Path:
    d = tmp_path / "falcon"
    d.mkdir()
    src = checkpoints["qwen2"][0]
    cfg = json.loads((src / "config.json").read_text())
    cfg["architectures"] = ["FalconForCausalLM"]
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "model.safetensors").write_bytes((src / "model.safetensors").read_bytes())
    return d


def test_unknown_architecture_is_refused(checkpoints, tmp_path):
    d = _unknown_arch_dir(checkpoints, tmp_path)
    with pytest.raises(conv.UnsupportedArchitectureError) as info:
        conv.convert(d, tmp_path / "x.gguf", "f16", progress=False)
    assert isinstance(info.value, ModelLoadError) and isinstance(info.value, ValueError)
    msg = str(info.value)
    assert "FalconForCausalLM" in msg
    for name in conv.SUPPORTED_ARCHITECTURES:
        assert name in msg
    assert not (tmp_path / "x.gguf").exists()


def test_cli_unknown_architecture_prints_one_line_and_fails(checkpoints, tmp_path, capsys):
    d = _unknown_arch_dir(checkpoints, tmp_path)
    assert conv.main([str(d), "--outfile", str(tmp_path / "x.gguf")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "FalconForCausalLM" in err[0]


def test_bad_outtype_is_a_value_error(checkpoints, tmp_path):
    with pytest.raises(ValueError, match="q3_k"):
        conv.convert(checkpoints["llama"][0], tmp_path / "x.gguf", "q3_k")


def test_module_entry_point_and_tools_wrapper(checkpoints, tmp_path):
    root = Path(__file__).resolve().parent.parent
    # the specgen under test (the checkout's python/ in a dev build, site-packages when installed)
    env = {"PYTHONPATH": str(Path(specgen.__file__).resolve().parent.parent), "PATH": "/usr/bin:/bin"}
    d = checkpoints["qwen2"][0]
    for cmd in ([sys.executable, "-m", "specgen.convert"], [sys.executable, str(root / "tools/convert_hf_to_gguf.py")]):
        out = tmp_path / f"{len(cmd)}.gguf"
        r = subprocess.run([*cmd, str(d), "--outfile", str(out), "--outtype", "q8_0"], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert gguf.GGUFReader(out).fields["general.architecture"].contents() == "qwen2"


# --------------------------------------------------------------------------------------------------------------
# The tokenizer metadata, read by specgen's own tokenizer
# --------------------------------------------------------------------------------------------------------------

_TEXTS = ["The quick brown fox", "Hello world! 123 456", "  spaces\nand new lines", "unseen wörds ünïcode"]


@pytest.mark.parametrize("arch", ARCHS)
def test_specgen_tokenizer_matches_the_source_tokenizer(converted, checkpoints, arch):
    from specgen._core import Tokenizer

    tok = Tokenizer(str(converted(arch, "f16")))
    d = checkpoints[arch][0]
    if arch == "qwen2":
        ref = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
        encode = lambda s: ref.encode(s, add_special_tokens=False).ids  # noqa: E731
    else:
        sp = spm.SentencePieceProcessor(model_file=str(d / "tokenizer.model"))
        encode = sp.encode
    for text in _TEXTS:
        assert list(tok.encode(text, add_special=False)) == encode(text), text


def test_bpe_with_empty_merges_converts_to_a_loadable_gguf(checkpoints, tmp_path):
    """A byte-level BPE tokenizer.json whose merges list is empty (a character-level vocabulary) converts to
    a GGUF that specgen loads and that tokenizes as the source tokenizer does (every text splits into its
    byte-level symbols)."""
    import shutil

    from specgen._core import Tokenizer

    d = tmp_path / "qwen2-no-merges"
    shutil.copytree(checkpoints["qwen2"][0], d)
    tj = json.loads((d / "tokenizer.json").read_text())
    tj["model"]["merges"] = []
    (d / "tokenizer.json").write_text(json.dumps(tj))
    out = conv.convert(d, tmp_path / "m.gguf", "f16", progress=False)
    ref = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    tok = Tokenizer(str(out))
    for text in _TEXTS:
        ids = ref.encode(text, add_special_tokens=False).ids
        assert len(ids) == len(text.encode("utf-8")) or len(ids) >= len(text)  # no merges: one symbol per byte/char
        assert list(tok.encode(text, add_special=False)) == ids, text
    with specgen.Generator(str(out), n_ctx=64, n_threads=1) as g:
        assert len(g.generate("The quick", max_tokens=2, temperature=0).tokens) == 2
