"""Byte-level BPE pre-tokenizers against Hugging Face tokenizers on multilingual text.

For each tokenizer.ggml.pre name a BPE vocabulary is trained here with the `tokenizers` library, whose
pre-tokenizer is built from that name's regexes (the Split sequence llama.cpp and the models' tokenizer.json
use; starcoder's as its tokenizer.json has it: Digits then ByteLevel), written to a GGUF with the gguf
package, and specgen's ids are compared with the library's on Vietnamese (composed and decomposed), Hindi,
Arabic, CJK, emoji, code and random text. No hub downloads."""
from __future__ import annotations

import json
import random
import unicodedata

import pytest

tokenizers = pytest.importorskip("tokenizers")
gguf = pytest.importorskip("gguf")

from specgen._core import Tokenizer  # noqa: E402

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_CJK = "[一-龥ࠀ-一가-퟿]+"
# deepseek-llm's letter class as its regex spells it (the cased letters of its Unicode version), as code point ranges.
_DS_RANGES = [
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA), (0x1BC, 0x1BF),
    (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377), (0x37B, 0x37D), (0x37F, 0x37F), (0x386,
    0x386), (0x388, 0x38A), (0x38C, 0x38C), (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F),
    (0x531, 0x556), (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF),
    (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D), (0x1F20, 0x1F45),
    (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B), (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D),
    (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3),
    (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107),
    (0x210A, 0x2113), (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128),
    (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149), (0x214E, 0x214E),
    (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE), (0x2CF2, 0x2CF3), (0xA640, 0xA66D),
    (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E), (0xAB70, 0xABBF), (0xFB00, 0xFB06),
    (0xFB13, 0xFB17), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3), (0x104D8,
    0x104FB), (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943)
]
_DS_LETTERS = "".join(chr(a) if a == b else chr(a) + "-" + chr(b) for a, b in _DS_RANGES)
DEEPSEEK_LLM = ["[\r\n]", "\\s?[" + _DS_LETTERS + "]+", "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", _CJK, "\\p{N}+"]
DEEPSEEK_CODER = ["[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", _CJK, "\\p{N}"]

TEXTS = [
    "Cửa Việt", "Cửa Việt là một cửa biển ở Quảng Trị, Việt Nam.",
    unicodedata.normalize("NFD", "Cửa Việt là một cửa biển"),       # combining marks after their letters
    "Tiếng Việt có dấu: ắ ằ ẳ ẵ ặ ế ề ể ễ ệ ố ồ ổ ỗ ộ ớ ờ ở ỡ ợ ứ ừ ử ữ ự",
    "हिन्दी भाषा में लिखा गया वाक्य। नमस्ते दुनिया",
    unicodedata.normalize("NFD", "क़िला ड़ ढ़"),
    "العربية مرحبا بالعالم، كيف حالك؟ ١٢٣",
    "今天天气很好，我们去公园散步吧。日本語のテキスト、カタカナ。한국어 문장을 토큰화합니다.",
    "Emoji: 🙂👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇺🇸 keycap 1️⃣",
    "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)  # 12345\n",
    "for (let i = 0; i < arr.length; ++i) { sum += arr[i] ** 2; }\r\n\r\n\t// done   \n",
    "numbers 1234567890 12,345.67 ٤٥٦ ４５６ ½ Ⅻ",
    "It's, I'M, we'll — “quoted” ‘single’ … 「括弧」【注】！？",
    "trailing spaces   ", "   leading", "a\u00a0b\u3000c\u2028d", "e\u0301 a\u0308 n\u0303\u0323 \u0301start",
    "Ελληνικά ΐ ΰ Ω K Å ﬁ ß ẞ İstanbul ǅ", "",
]


def _random_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    pools = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x52F), (0x590, 0x6FF), (0x900, 0x97F),
             (0x1E00, 0x1EFF), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF)]
    spaces = [" ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000"]
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 40)):
            if rng.random() < 0.2:
                parts.append(rng.choice(spaces))
            else:
                lo, hi = rng.choice(pools)
                parts.append(chr(rng.randint(lo, hi)))
        out.append("".join(parts))
    return out


def _pre_tokenizer(pre: str):
    from tokenizers import Regex, pre_tokenizers as pt

    def splits(regexes):
        return [pt.Split(Regex(r), behavior="isolated") for r in regexes]
    if pre == "starcoder":
        return pt.Sequence([pt.Digits(individual_digits=True), pt.ByteLevel(add_prefix_space=False, use_regex=True)])
    regexes = {"llama-bpe": [LLAMA3], "qwen2": [QWEN2], "qwen35": [QWEN35], "deepseek-llm": DEEPSEEK_LLM,
               "deepseek-coder": DEEPSEEK_CODER}[pre]
    return pt.Sequence(splits(regexes) + [pt.ByteLevel(add_prefix_space=False, use_regex=False)])


def _train(pre: str):
    from tokenizers import Tokenizer as HfTokenizer, decoders, models, pre_tokenizers, trainers

    tok = HfTokenizer(models.BPE())
    tok.pre_tokenizer = _pre_tokenizer(pre)
    tok.decoder = decoders.ByteLevel()
    corpus = (TEXTS * 20) + _random_texts(1, 200)
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=1500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<s>", "</s>"]))
    return tok


def _byte_spelling(text: str) -> str:
    """A text as byte-level BPE vocabularies spell it."""
    return "".join(_UNICODE_OF_BYTE[b] for b in text.encode("utf-8"))


def _gpt2_byte_table() -> dict[int, str]:
    """GPT-2's byte alphabet: printable Latin-1 bytes as themselves, the rest from U+0100 on."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


_UNICODE_OF_BYTE = _gpt2_byte_table()

# Whole-word tokens that no merge builds (Llama 3's vocabulary has many: " Việt" is one, so llama.cpp and
# transformers encode "Cửa Việt" as [34, 91163, 101798]): with ignore_merges (llama-bpe) a word that is a
# token is emitted whole. These words are not in the training corpus, so no merge reaches them.
WHOLE_WORDS = [" Nguyễn", " Đường", "Hưng"]


def _with_whole_words(tok, ignore_merges: bool):
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for w in WHOLE_WORDS:
        vocab.setdefault(_byte_spelling(w), max(vocab.values()) + 1)
    spec["model"]["ignore_merges"] = ignore_merges
    return tokenizers.Tokenizer.from_str(json.dumps(spec))


def _write_gguf(tok, pre: str, path: str) -> None:
    spec = json.loads(tok.to_str())
    id_to_token = {i: t for t, i in spec["model"]["vocab"].items()}
    for added in spec["added_tokens"]:
        id_to_token[added["id"]] = added["content"]
    tokens = [id_to_token[i] for i in range(len(id_to_token))]
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([int(gguf.TokenType.CONTROL) if t in ("<s>", "</s>") else int(gguf.TokenType.NORMAL)
                       for t in tokens])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


PRES = ["llama-bpe", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder", "starcoder"]


def _make_pair(pre: str, directory):
    ref = _train(pre)
    if pre == "llama-bpe":
        ref = _with_whole_words(ref, ignore_merges=True)
    path = str(directory / "tok.gguf")
    _write_gguf(ref, pre, path)
    return pre, Tokenizer(path), ref


@pytest.fixture(scope="module", params=PRES)
def pair(request, tmp_path_factory):
    return _make_pair(request.param, tmp_path_factory.mktemp(request.param))


def test_ids_match_tokenizers_library(pair):
    pre, ours, ref = pair
    assert ours.pre == pre
    for text in TEXTS + _random_texts(2, 300):
        assert ours.encode(text, False, False) == ref.encode(text, add_special_tokens=False).ids, (pre, ascii(text))


def test_round_trip(pair):
    _, ours, _ = pair
    for text in TEXTS + _random_texts(3, 100):
        assert ours.decode(ours.encode(text, False, False)) == text


def test_llama_bpe_emits_whole_word_tokens(tmp_path):
    """The Vietnamese case of Llama 3: a word that is a token comes out whole although no merge builds it."""
    _, ours, ref = _make_pair("llama-bpe", tmp_path)
    text = "Hưng Đạo, Cửa Việt Nguyễn Đường"
    whole = [ref.token_to_id(_byte_spelling(w)) for w in WHOLE_WORDS]
    ids = ours.encode(text, False, False)
    assert ids == ref.encode(text, add_special_tokens=False).ids
    assert all(w in ids for w in whole)
    # Without ignore_merges the same vocabulary splits those words: what specgen did before.
    plain = _with_whole_words(ref, ignore_merges=False).encode(text, add_special_tokens=False).ids
    assert not any(w in plain for w in whole)


def test_qwen35_joins_combining_marks_to_letters(tmp_path):
    """Decomposed Vietnamese on one vocabulary: read as qwen35 the marks stay with their letters (the library's
    ids); read as qwen2 the same file splits them off into words of their own (other ids)."""
    ref = _train("qwen35")
    text = unicodedata.normalize("NFD", " Việt Nam, tiếng Việt")
    ids = {}
    for pre in ("qwen35", "qwen2"):
        path = str(tmp_path / f"{pre}.gguf")
        _write_gguf(ref, pre, path)
        ids[pre] = Tokenizer(path).encode(text, False, False)
    assert ids["qwen35"] == ref.encode(text, add_special_tokens=False).ids
    assert ids["qwen2"] != ids["qwen35"]


def test_unknown_pre_tokenizer_is_refused(tmp_path):
    from specgen import ModelLoadError

    ref = _train("qwen2")
    path = str(tmp_path / "tok.gguf")
    _write_gguf(ref, "chameleon", path)
    with pytest.raises(ModelLoadError, match="chameleon"):
        Tokenizer(path)


@pytest.mark.parametrize("pre", PRES)
def test_converter_names_the_pre_tokenizer(pre):
    """specgen-convert reads the pre-tokenizer of a tokenizer.json and writes llama.cpp's name for it."""
    from specgen import convert as conv

    spec = json.loads(_train(pre).to_str())
    assert conv._pre_tokenizer_name(spec["pre_tokenizer"]) == pre
