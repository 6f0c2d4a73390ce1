"""`specgen serve` flags map onto Generator arguments as the CLI's do: without -md or --draft the server
decodes with draft="auto"; --draft none is plain decoding; -md and --draft together are refused."""
import pytest

pytest.importorskip("fastapi")

from specgen.server import cli  # noqa: E402


def kwargs(*argv):
    return cli.generator_kwargs(cli.build_parser().parse_args(["-m", "model.gguf", *argv]))


def test_default_is_auto():
    assert kwargs()["draft"] == "auto"


@pytest.mark.parametrize("flag,draft", [("none", None), ("ngram", "ngram"), ("self", "self"), ("auto", "auto")])
def test_draft_words(flag, draft):
    assert kwargs("--draft", flag)["draft"] == draft


def test_draft_model_path():
    assert kwargs("-md", "small.gguf")["draft"] == "small.gguf"


def test_draft_model_and_word_refused():
    with pytest.raises(SystemExit, match="either -md/--model-draft or --draft"):
        kwargs("-md", "small.gguf", "--draft", "ngram")


def test_flag_defaults_are_the_engine_defaults():
    # One meaning per knob: a flag left out gives the Generator what the engine's parameter table says
    # (the server once seeded NanoSpec with top-3 while every other front-end used 16).
    from specgen import _core

    specs = {s["name"]: s for s in _core.param_specs()}
    checked = 0
    for name, value in kwargs().items():
        spec = specs.get(name)
        if value is None or spec is None or spec["type"] not in ("integer", "number", "flag") or name == "seed":
            continue  # None: the Generator's own default
        default = spec["default"] == "true" if spec["type"] == "flag" else float(spec["default"])
        assert value == default, f"{name}: serve passes {value!r}, the engine's default is {spec['default']}"
        checked += 1
    assert checked >= 15
