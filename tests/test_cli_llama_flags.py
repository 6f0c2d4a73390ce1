"""llama.cpp's command-line habits on the `specgen` binary: every engine knob's flag comes from the
parameter table; llama.cpp flags that mean nothing here are accepted with a note; chat mode (-cnv /
-i) answers each stdin line with the model's chat template; -ngl falls back to the CPU with a
warning when no GPU is usable; llama.cpp's numeric --draft N is read as --draft-max N."""
from __future__ import annotations

import subprocess

import pytest

import specgen
from specgen import _core
from test_cli import (PROMPT, THREADS, _env, assert_ok, assert_one_line_error, greedy, model_path,  # noqa: F401
                      reference, run)


def test_help_lists_every_table_knob_and_auto(cli):
    r = run(cli, "--help")
    assert_ok(r)
    for spec in _core.param_specs():
        for flag in spec["flags"]:
            assert flag in r.stdout, f"{spec['name']}: {flag} missing from --help"
        assert spec["doc"].split()[0] in r.stdout
    assert "none|ngram|self|model|auto" in r.stdout
    for flag in ("-cnv", "-sys", "--chat-template", "--jinja", "-fa", "-ngl", "-hf", "--no-perf", "--log-disable"):
        assert flag in r.stdout


def test_ignored_llama_cpp_flags_and_gpu_fallback(cli, model_path, reference):
    r = greedy(cli, model_path, "-fa", "on", "--jinja", "-ngl", "99")
    assert_ok(r)
    assert r.stdout == reference
    assert "-fa is accepted and ignored" in r.stderr
    if _core.cuda_device_count() == 0:
        assert "-ngl 99: no usable CUDA device" in r.stderr and "running on the CPU" in r.stderr
    r = greedy(cli, model_path, "--flash-attn")  # the older switch spelling
    assert_ok(r)


def test_draft_none_and_numeric_draft(cli, model_path, reference):
    r = greedy(cli, model_path, "--draft", "none")
    assert_ok(r)
    assert r.stdout == reference and "speculation: none" in r.stderr
    r = greedy(cli, model_path, "--draft", "3")
    assert_ok(r)
    assert r.stdout == reference and "read as --draft-max 3" in r.stderr


def test_table_flags_reach_the_engine(cli, model_path, reference):
    # A flag-type knob's --no- form, llama.cpp's -dev and --draft-n spellings, and -r as a stop string.
    r = greedy(cli, model_path, "--draft", "ngram", "--no-draft-adaptive", "--draft-n", "4", "-dev", "cpu")
    assert_ok(r)
    assert r.stdout == reference and "draft_max 4" in r.stderr
    stop = reference.strip().split()[1]
    r = greedy(cli, model_path, "-r", stop)
    assert_ok(r)
    assert stop not in r.stdout and "finish reason = stop" in r.stderr


def test_no_perf_and_log_disable(cli, model_path, reference):
    r = greedy(cli, model_path, "--no-perf")
    assert_ok(r)
    assert r.stdout == reference and "eval time" not in r.stderr and "speculation:" in r.stderr
    r = greedy(cli, model_path, "--log-disable", "-fa")
    assert_ok(r)
    assert r.stdout == reference and r.stderr == ""


def test_usage_errors_name_the_flag(cli):
    assert_one_line_error(run(cli, "-ngl", "many"), 2, "-ngl expects a layer count")
    assert_one_line_error(run(cli, "--no-draft-adaptive=1"), 2, "takes no value")
    assert_one_line_error(run(cli, "-m", "a.gguf", "-hf", "org/repo:Q4_K_M"), 2, "either -m/--model or -hf")
    assert_one_line_error(run(cli, "--draft", "model"), 2, "draft_kind model needs a draft_model path")


def test_hub_reference_failure_is_one_line(cli, tmp_path):
    env = _env(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path))
    r = run(cli, "-hf", "nobody/nothing-GGUF:Q4_K_M", "-p", "x", env=env)
    assert_one_line_error(r, 1, "-hf: ")


def test_conversation_mode_answers_each_line(cli, model_path):
    """Two user turns on stdin: each answer is what create_chat_completion gives for the same history."""
    g = specgen.Generator(model_path, n_threads=2)
    try:
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]
        first = g.create_chat_completion(messages=messages, chat_template="gemma3", temperature=0,
                                         max_tokens=8)["choices"][0]["message"]["content"]
        messages += [{"role": "assistant", "content": first}, {"role": "user", "content": "And a fruit?"}]
        second = g.create_chat_completion(messages=messages, chat_template="gemma3", temperature=0,
                                          max_tokens=8)["choices"][0]["message"]["content"]
    finally:
        g.close()
    r = subprocess.run([cli, "-m", model_path, "-cnv", "-sys", "Be brief.", "--chat-template", "gemma3", "--temp", "0",
                        "-n", "8", "-t", THREADS], input="Name a colour.\nAnd a fruit?\n", capture_output=True,
                       text=True, env=_env(), timeout=300)
    assert_ok(r)
    assert r.stdout == first + "\n" + second + "\n"
    assert r.stderr.count("tokens per second") == 2


def test_conversation_mode_errors_are_one_line(cli, model_path, tmp_path):
    r = subprocess.run([cli, "-m", model_path, "-i", "--chat-template", str(tmp_path / "none.jinja")], input="",
                       capture_output=True, text=True, env=_env(), timeout=300)
    assert_one_line_error(r, 1)
