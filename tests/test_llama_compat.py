"""``specgen.Llama``: llama-cpp-python's README examples and documented calls with only the import changed
(``from specgen import Llama``), run against the reference model. They return llama-cpp-python's dict
shapes, greedy text equals the Generator's, and what specgen cannot do is a clear typed error.

Where a README call is unbounded (a chat without max_tokens), max_tokens is added to keep CI fast; each
such change is commented. When llama-cpp-python itself is installed (the bench-peers extra), the last
test runs the same calls on both and compares the keys of every response and chunk dict.
"""
from __future__ import annotations

import warnings

import pytest

from specgen import Llama  # the one line a port changes: `from llama_cpp import Llama`
from specgen.errors import InvalidParameterError, SpecgenNotImplementedError
from specgen.llama_speculative import LlamaPromptLookupDecoding

COMPLETION_KEYS = {"id", "object", "created", "model", "choices", "usage"}
COMPLETION_CHOICE_KEYS = {"text", "index", "logprobs", "finish_reason"}
USAGE_KEYS = {"prompt_tokens", "completion_tokens", "total_tokens"}
CHAT_CHOICE_KEYS = {"index", "message", "logprobs", "finish_reason"}


@pytest.fixture(scope="module")
def llm(model_path):
    with Llama(model_path=model_path, n_ctx=512, n_threads=2, verbose=False) as llm:
        yield llm


# -- README: "High-level API" -----------------------------------------------------------------------------
def test_readme_high_level_completion(llm):
    output = llm(
        "Q: Name the planets in the solar system? A: ",  # Prompt
        max_tokens=32,  # Generate up to 32 tokens, set to `None` to generate up to the end of the context window
        stop=["Q:", "\n"],  # Stop generating just before the model would generate a new question
        echo=True,  # Echo the prompt back in the output
    )  # Generate a completion, can also call create_completion
    assert set(output) == COMPLETION_KEYS and output["object"] == "text_completion"
    assert output["id"].startswith("cmpl-") and isinstance(output["created"], int)
    choice = output["choices"][0]
    assert set(choice) == COMPLETION_CHOICE_KEYS and choice["index"] == 0 and choice["logprobs"] is None
    assert choice["text"].startswith("Q: Name the planets in the solar system? A: ")
    generated = choice["text"][len("Q: Name the planets in the solar system? A: "):]
    assert "\n" not in generated and "Q:" not in generated
    assert choice["finish_reason"] in ("stop", "length")
    assert set(output["usage"]) == USAGE_KEYS
    assert output["usage"]["total_tokens"] == output["usage"]["prompt_tokens"] + output["usage"]["completion_tokens"]
    assert 0 < output["usage"]["completion_tokens"] <= 32
    assert output["model"] == llm.model_path  # llama-cpp-python names the model by its path


def test_readme_from_pretrained(model_path, tmp_path, monkeypatch):
    """`Llama.from_pretrained(repo_id=..., filename="*q8_0.gguf")` against a fake Hub at the HTTP layer
    (tests/fake_hub.py) that serves the reference GGUF under the README's repo and file names."""
    pytest.importorskip("huggingface_hub")
    import fake_hub

    repo = "Qwen/Qwen2-0.5B-Instruct-GGUF"
    files = {"qwen2-0_5b-instruct-q4_k_m.gguf": model_path, "qwen2-0_5b-instruct-q8_0.gguf": model_path,
             "README.md": b"# card\n"}
    fake_hub.online_mode(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    with fake_hub.serving(fake_hub.FakeHub({repo: files})) as hub:
        llm = Llama.from_pretrained(
            repo_id="Qwen/Qwen2-0.5B-Instruct-GGUF",
            filename="*q8_0.gguf",
            verbose=False,
        )
    try:
        assert llm.model_path.endswith("qwen2-0_5b-instruct-q8_0.gguf")
        assert f"GET /{repo}/resolve/main/qwen2-0_5b-instruct-q8_0.gguf" in hub.requests
        assert llm.n_ctx() == 512  # llama-cpp-python's default context
        assert llm("The capital of France is", max_tokens=2, temperature=0)["usage"]["completion_tokens"] == 2
    finally:
        llm.close()


def test_readme_chat_completion(model_path):
    llm = Llama(model_path=model_path, chat_format="llama-2", verbose=False, n_threads=2)
    try:
        r = llm.create_chat_completion(
            messages=[
                {"role": "system", "content": "You are an assistant who perfectly describes images."},
                {"role": "user", "content": "Describe this image in detail please."},
            ],
            max_tokens=8,  # added: the README leaves it unlimited (to the end of the context)
        )
        assert set(r) == COMPLETION_KEYS and r["object"] == "chat.completion" and r["id"].startswith("chatcmpl-")
        choice = r["choices"][0]
        assert set(choice) == CHAT_CHOICE_KEYS and choice["message"]["role"] == "assistant"
        assert isinstance(choice["message"]["content"], str) and choice["finish_reason"] in ("stop", "length")
        assert llm.chat_template.origin == "builtin:llama2"  # chat_format names llama-cpp-python's formats
        # The system message went into the prompt in Llama 2's <<SYS>> block.
        prompt = llm.chat_template.render([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
        assert "[INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST]" in prompt
    finally:
        llm.close()


def test_readme_json_mode_and_functions_are_refused_not_ignored(llm):
    msgs = [{"role": "system", "content": "You are a helpful assistant that outputs in JSON."},
            {"role": "user", "content": "Who won the world series in 2020"}]
    with pytest.raises(InvalidParameterError, match="json_object"):
        llm.create_chat_completion(messages=msgs, response_format={"type": "json_object"}, temperature=0.7)
    with pytest.raises(InvalidParameterError, match="tools"):
        llm.create_chat_completion(messages=msgs, tools=[{"type": "function", "function": {"name": "f"}}])


def test_readme_speculative_decoding(model_path, gen):
    llama = Llama(
        model_path=model_path,
        draft_model=LlamaPromptLookupDecoding(num_pred_tokens=10),  # 10 is the default and generally good for gpu
        verbose=False, n_threads=2,
    )
    try:
        assert llama.generator.draft_kind == "ngram"
        prompt = "def add(a, b):\n    return a + b\n\ndef add(a, b):"
        text = llama(prompt, max_tokens=12, temperature=0)["choices"][0]["text"]
        assert text == gen.generate(prompt, max_tokens=12, temperature=0).text  # lossless
        # The drafter object also works on its own, as llama-cpp-python's does.
        import numpy as np

        ids = np.array([5, 6, 7, 8, 5, 6], dtype=np.intc)
        assert LlamaPromptLookupDecoding(max_ngram_size=2, num_pred_tokens=2)(ids).tolist() == [7, 8]
    finally:
        llama.close()


def test_readme_embeddings_are_a_clear_error(model_path):
    with pytest.raises(SpecgenNotImplementedError, match="embedding"):
        Llama(model_path=model_path, embedding=True, verbose=False)


def test_readme_context_window(model_path):
    llm = Llama(model_path=model_path, n_ctx=2048, verbose=False, n_threads=2)
    try:
        assert llm.n_ctx() == 2048
    finally:
        llm.close()


# -- documented calls ------------------------------------------------------------------------------------
def test_greedy_text_equals_the_generator(llm, gen):
    prompt = "The three primary colors are"
    ref = gen.generate(prompt, max_tokens=12, temperature=0)
    out = llm.create_completion(prompt, max_tokens=12, temperature=0)
    assert out["choices"][0]["text"] == ref.text and out["usage"]["completion_tokens"] == len(ref.tokens)
    chunks = list(llm(prompt, max_tokens=12, temperature=0, stream=True))
    assert all(set(c) == {"id", "object", "created", "model", "choices"} for c in chunks)
    assert all(set(c["choices"][0]) == COMPLETION_CHOICE_KEYS for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == ref.text
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "length"
    assert len({c["id"] for c in chunks}) == 1


def test_chat_stream_and_greedy_chat_equal_the_generator(llm, gen):
    msgs = [{"role": "user", "content": "Name three colours."}]
    ref = gen.create_chat_completion(msgs, max_tokens=8, temperature=0)  # the same built-in template
    r = llm.create_chat_completion(messages=msgs, max_tokens=8, temperature=0)
    assert r["choices"][0]["message"] == ref["choices"][0]["message"]
    chunks = list(llm.create_chat_completion(messages=msgs, max_tokens=8, temperature=0, stream=True))
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == ref["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length") and chunks[-1]["choices"][0]["delta"] == {}
    assert llm.chat_template.origin == "builtin:gemma3"  # the reference GGUF has no template of its own


def test_tokenize_and_detokenize_bytes(llm, gen):
    tokens = llm.tokenize(b"Hello, world!")
    assert tokens == gen.tokenize("Hello, world!") and tokens[0] == llm.token_bos()
    assert llm.tokenize(b"Hello, world!", add_bos=False) == tokens[1:]
    text = llm.detokenize(tokens)
    assert isinstance(text, bytes) and text == b"Hello, world!"  # no "<bos>"
    assert b"<bos>" in llm.detokenize(tokens, special=True)
    assert llm.detokenize(tokens[3:], prev_tokens=tokens[:3]) == b"Hello, world!"[len(llm.detokenize(tokens[:3])):]
    # special=True parses control tokens written as text
    assert llm.tokenize(b"<start_of_turn>", add_bos=False, special=True) == [gen.tokenize("<start_of_turn>", add_bos=False, special=True)[0]]
    assert len(llm.tokenize(b"<start_of_turn>", add_bos=False)) > 1


def test_model_facts(llm, gen, model_path):
    assert llm.n_ctx() == 512 and llm.n_vocab() == gen.n_vocab and llm.n_embd() == 640
    assert llm.token_eos() >= 0 and llm.detokenize([llm.token_nl()]) == b"\n"
    assert llm.metadata["general.architecture"] == "gemma3"
    assert Llama._training_context(model_path, {}) == int(llm.metadata["gemma3.context_length"])  # n_ctx=0


def test_reset_seed_and_low_level_generate(llm, gen):
    llm.reset()
    assert llm.n_tokens == 0
    a = llm("Once upon a time", max_tokens=6, temperature=1.0, seed=42)["choices"][0]["text"]
    b = llm("Once upon a time", max_tokens=6, temperature=1.0, seed=42)["choices"][0]["text"]
    assert a == b
    llm.set_seed(42)  # the seed of calls that pass none
    assert llm("Once upon a time", max_tokens=6, temperature=1.0)["choices"][0]["text"] == a
    llm.set_seed(-1)
    tokens = llm.tokenize(b"The capital of France is")
    ids = []
    for token in llm.generate(tokens, top_k=40, top_p=0.95, temp=0, repeat_penalty=1.0):
        ids.append(token)
        if len(ids) == 5:
            break
    assert ids == gen.generate("The capital of France is", max_tokens=5, temperature=0, ignore_eos=True).tokens


def test_logprobs_need_no_logits_all(llm, gen):
    ref = gen.generate("The capital of France is", max_tokens=4, temperature=0, logprobs=2)
    lp = llm("The capital of France is", max_tokens=4, temperature=0, logprobs=2)["choices"][0]["logprobs"]
    assert set(lp) == {"tokens", "text_offset", "token_logprobs", "top_logprobs"}
    assert lp["token_logprobs"] == [e.logprob for e in ref.logprobs]


# -- constructor keywords ----------------------------------------------------------------------------------
def test_unknown_keywords_are_named(model_path):
    with pytest.raises(TypeError, match="'n_gpu_layerz'"):
        Llama(model_path=model_path, n_gpu_layerz=99, verbose=False)
    with pytest.raises(TypeError, match=r"'bogus', 'other'"):
        Llama(model_path=model_path, other=1, bogus=2, verbose=False)


@pytest.mark.parametrize("kwargs,name", [
    (dict(vocab_only=True), "vocab_only"), (dict(lora_path="x.gguf"), "lora_path"),
    (dict(rope_freq_base=10000.0), "rope_freq_base"), (dict(kv_overrides={"a": 1}), "kv_overrides"),
    (dict(chat_handler=object()), "chat_handler"),
])
def test_keywords_that_would_change_the_output_are_refused(model_path, kwargs, name):
    with pytest.raises(SpecgenNotImplementedError, match=name):
        Llama(model_path=model_path, verbose=False, **kwargs)


def test_tuning_keywords_are_accepted_and_gpu_layers_fall_back(model_path):
    from specgen import _core

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        llm = Llama(model_path=model_path, n_gpu_layers=-1, n_batch=64, n_ubatch=64, n_threads=2, n_threads_batch=2,
                    use_mmap=True, use_mlock=False, flash_attn=True, offload_kqv=True, logits_all=True, f16_kv=True,
                    type_k=8, type_v=8, seed=1337, verbose=False)
    try:
        if _core.cuda_device_count() == 0:
            assert llm.generator.device == "cpu"
            assert any("n_gpu_layers=-1" in str(w.message) and "CPU" in str(w.message) for w in caught)
        else:
            assert llm.generator.device == "cuda:0"
        assert llm("Hi", max_tokens=2, temperature=0)["usage"]["completion_tokens"] == 2
    finally:
        llm.close()


@pytest.mark.parametrize("kwargs,match", [
    (dict(chat_format="functionary-v2"), "functionary-v2"), (dict(type_k=2), "type_k"),
    (dict(n_ctx=-5), "n_ctx"),
])
def test_bad_values_are_typed_errors(model_path, kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        Llama(model_path=model_path, verbose=False, **kwargs)


@pytest.mark.parametrize("kwargs,match", [
    (dict(typical_p=0.5), "typical_p"), (dict(mirostat_mode=2), "mirostat"), (dict(grammar=object()), "grammar"),
    (dict(suffix="x"), "suffix"), (dict(logprobs=2, echo=True), "echo"), (dict(frequency_penalty=0.5), "frequency"),
])
def test_sampling_specgen_does_not_have_is_refused(llm, kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        llm("Hello", max_tokens=2, **kwargs)


def test_custom_draft_model_is_refused(model_path):
    from specgen.llama_speculative import LlamaDraftModel

    class Mine(LlamaDraftModel):
        def __call__(self, input_ids, /, **kwargs):
            return input_ids[-2:]

    with pytest.raises(SpecgenNotImplementedError, match="LlamaDraftModel subclass"):
        Llama(model_path=model_path, draft_model=Mine(), verbose=False)


def test_verbose_prints_a_load_line_and_timings(model_path, capsys):
    llm = Llama(model_path=model_path, n_ctx=128, n_threads=2)  # verbose=True is llama-cpp-python's default
    try:
        llm("Hi", max_tokens=2, temperature=0)
        err = capsys.readouterr().err
        assert "n_ctx 128" in err and "generated 2 tokens" in err
    finally:
        llm.close()


# -- the same script on llama-cpp-python (developer-only: the bench-peers extra) ---------------------------
def test_same_keys_as_llama_cpp_python(model_path, llm):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the bench-peers extra)")
    peer = llama_cpp.Llama(model_path=model_path, n_ctx=512, n_threads=2, verbose=False, chat_format="gemma")
    try:
        for call in (lambda m: m("Q: Name the planets? A: ", max_tokens=4, stop=["Q:"], echo=True),
                     lambda m: m.create_chat_completion(messages=[{"role": "user", "content": "Hi"}], max_tokens=4)):
            ours, theirs = call(llm), call(peer)
            assert set(ours) == set(theirs)
            assert set(ours["choices"][0]) == set(theirs["choices"][0]) and set(ours["usage"]) == set(theirs["usage"])
        ours = list(llm("Hello", max_tokens=3, stream=True))
        theirs = list(peer("Hello", max_tokens=3, stream=True))
        assert set(ours[-1]) == set(theirs[-1]) and set(ours[-1]["choices"][0]) == set(theirs[-1]["choices"][0])
        assert llm.tokenize(b"Hello, world!") == peer.tokenize(b"Hello, world!")
        assert llm.detokenize(llm.tokenize(b"Hello, world!")) == peer.detokenize(peer.tokenize(b"Hello, world!"))
    finally:
        peer.close()
