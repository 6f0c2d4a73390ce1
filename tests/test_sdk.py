"""The Python SDK surface: parameters, streaming, stop strings, finish reasons, seeds, metadata."""
import importlib.resources

import numpy as np
import pytest

import specgen

CHAT = "<start_of_turn>user\nSay hello in one word.<end_of_turn>\n<start_of_turn>model\n"


def test_typed_package_ships_stubs():
    root = importlib.resources.files("specgen")
    assert (root / "py.typed").is_file()
    assert (root / "_core.pyi").is_file()


def test_model_facts(gen):
    assert gen.n_vocab == 262144
    assert gen.n_ctx == 2048
    md = gen.metadata
    assert md["general.architecture"] == "gemma3"
    assert md["gemma3.block_count"] == "18"


def test_tokenize_detokenize_round_trip(gen):
    text = "Hello, world! 你好 🌍\n\tdef f(x): return x"
    ids = gen.tokenize(text)
    assert ids[0] == 2  # BOS, as the file asks
    assert gen.detokenize(ids[1:]) == text
    assert gen.tokenize(text, add_bos=False) == ids[1:]


def test_logits_shape_and_consistency(gen):
    ids = gen.tokenize("A B C")
    lg = gen.logits(ids)
    assert lg.shape == (len(ids), gen.n_vocab) and lg.dtype == np.float32
    assert np.array_equal(gen.logits(ids[:2]), lg[:2])  # causal: later tokens do not change earlier rows


def test_greedy_is_deterministic_and_matches_logits(gen):
    prompt = "The capital of Italy is"
    a = gen.generate(prompt, max_tokens=8, temperature=0)
    b = gen.generate(prompt, max_tokens=8, temperature=0)
    assert a.tokens == b.tokens and a.finish_reason == "length" and len(a.tokens) == 8
    ids = gen.tokenize(prompt)
    assert a.tokens[0] == int(np.argmax(gen.logits(ids)[-1]))
    assert a.text == gen.detokenize(a.tokens)


def test_seed_reproducibility(gen):
    kw = dict(max_tokens=12, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    a = gen.generate("Once upon a time", seed=7, **kw)
    b = gen.generate("Once upon a time", seed=7, **kw)
    assert a.tokens == b.tokens and a.stats["seed"] == 7
    others = {tuple(gen.generate("Once upon a time", seed=s, **kw).tokens) for s in range(8, 14)}
    assert len(others) > 1


def test_sampling_parameters_shape_the_output(gen):
    # top_k=1 is greedy whatever the temperature; repeat_penalty changes a repetitive continuation
    greedy = gen.generate("1, 2, 3, 4,", max_tokens=10, temperature=0).tokens
    assert gen.generate("1, 2, 3, 4,", max_tokens=10, temperature=1.5, top_k=1, seed=3).tokens == greedy
    assert gen.generate("1, 2, 3, 4,", max_tokens=10, temperature=1.0, top_p=1e-6, seed=4).tokens == greedy
    assert gen.generate("1, 2, 3, 4,", max_tokens=10, temperature=1.0, min_p=1.0, seed=5).tokens == greedy
    penalised = gen.generate("1, 2, 3, 4,", max_tokens=10, temperature=0, repeat_penalty=5.0).tokens
    assert penalised != greedy


def test_stream_pieces_concatenate_to_the_text(gen):
    prompt = "Write the word 'naïve' and the Chinese for 'thank you' (谢谢) three times:"
    full = gen.generate(prompt, max_tokens=40, temperature=0)
    pieces = list(gen.generate(prompt, max_tokens=40, temperature=0, stream=True))
    assert "".join(pieces) == full.text
    assert all(isinstance(p, str) and p for p in pieces)
    assert "\ufffd" not in full.text


def test_stop_string_spanning_tokens(gen):
    prompt = "Count: one, two, three, four, five, six,"
    full = gen.generate(prompt, max_tokens=24, temperature=0).text
    # a stop string made of the end of one piece and the start of the next
    cut = full.index(",", 3) if "," in full[3:] else len(full) // 2
    stop = full[cut - 2: cut + 3]
    r = gen.generate(prompt, max_tokens=24, temperature=0, stop=[stop, "never-appears"])
    assert r.finish_reason == "stop"
    assert r.text == full[: full.index(stop)]
    streamed = "".join(gen.generate(prompt, max_tokens=24, temperature=0, stop=stop, stream=True))
    assert streamed == r.text


def test_control_tokens_in_prompt_are_parsed(gen):
    r = gen.generate(CHAT, max_tokens=1, temperature=0)
    assert r.stats["n_prompt_tokens"] == len(gen.tokenize(CHAT, special=True)) < len(gen.tokenize(CHAT))


def test_max_tokens_zero_and_context_limit(model_path):
    g = specgen.Generator(model_path, n_threads=2, n_ctx=16)
    try:
        r = g.generate("Hello", max_tokens=0, temperature=0)
        assert r.tokens == [] and r.finish_reason == "length"
        r = g.generate("Hello there", max_tokens=100, temperature=0)
        assert r.finish_reason in ("length", "eos")
        assert len(g.tokenize("Hello there")) + len(r.tokens) <= 16 + 1
        with pytest.raises(specgen.ContextOverflowError):
            g.generate("word " * 40, max_tokens=4)
    finally:
        g.close()


def test_stats_fields(gen):
    s = gen.generate("Hi", max_tokens=4, temperature=0).stats
    for k in ("n_prompt_tokens", "n_generated", "prefill_tokens_per_second", "decode_tokens_per_second",
              "n_rounds", "n_drafted", "n_accepted", "acceptance_rate", "mean_accepted_length"):
        assert k in s
    assert s["n_generated"] == 4 and s["n_prompt_tokens"] == 2


def test_default_model_and_aliases(model_path):
    with specgen.Generator(n_threads=1, n_ctx=64) as g:  # model=None: the packaged Gemma 3 270M
        assert g.model_path == str(model_path)
    with specgen.Generator(model_path=model_path, n_threads=1, n_ctx=64) as g:
        assert g.n_vocab == 262144
    with pytest.raises(specgen.InvalidParameterError):
        g.generate("x")  # closed


@pytest.mark.parametrize("kwargs", [dict(verify="tree"), dict(draft_max=0), dict(draft_min=9, draft_max=8),
                                    dict(n_ctx=0), dict(n_threads=-1), dict(nanospec="yes")])
def test_bad_constructor_parameters(model_path, kwargs):
    with pytest.raises(specgen.InvalidParameterError):
        specgen.Generator(model_path, **kwargs)


@pytest.mark.parametrize("kwargs", [dict(temperature=-1), dict(temperature=float("nan")), dict(top_p=0),
                                    dict(top_p=1.5), dict(min_p=-0.1), dict(top_k=-1), dict(repeat_penalty=0),
                                    dict(max_tokens=-2), dict(seed=-2), dict(stop=[1])])
def test_bad_generate_parameters(gen, kwargs):
    with pytest.raises(ValueError):
        gen.generate("x", **kwargs)
