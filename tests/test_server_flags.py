"""`specgen serve` flags map onto Generator arguments as the CLI's do: without -md or --draft the server
decodes with draft="auto"; --draft none is plain decoding; -md and --draft together are refused."""
import pytest

pytest.importorskip("fastapi")

from specgen.server import cli  # noqa: E402


def kwargs(*argv):
    return cli.generator_kwargs(cli.build_parser().parse_args(["-m", "model.gguf", *argv]))


def test_default_is_auto():
    assert kwargs()["draft_kind"] == "auto"


@pytest.mark.parametrize("flag", ["none", "ngram", "self", "auto"])
def test_draft_words(flag):
    assert kwargs("--draft", flag)["draft_kind"] == flag


def test_draft_model_path():
    kw = kwargs("-md", "small.gguf")
    assert kw["draft_kind"] == "model" and kw["draft_model"] == "small.gguf"


def test_llama_cpp_draft_number_is_draft_max():
    notes = []
    kw = cli.generator_kwargs(cli.build_parser().parse_args(["--draft", "16"]), notes)
    assert kw["draft_max"] == 16 and kw["draft_kind"] == "auto" and "--draft-max 16" in notes[0]


def test_every_generator_knob_is_a_serve_flag():
    """One place adds a knob: every generator-scope knob of the engine's table is a serve flag with the
    table's spellings, and a flag left out passes nothing (the Generator then takes the table's default)."""
    from specgen import _core

    parser = cli.build_parser()
    spelled = {s for a in parser._actions for s in a.option_strings}
    for spec in _core.param_specs():
        if spec["scope"] == "generator":
            assert spec["flags"] and set(spec["flags"]) <= spelled, spec["name"]
    assert set(kwargs()) == {"model", "seed", "draft_kind"}


def test_bad_values_are_usage_errors_naming_the_flag(capsys):
    for argv, message in ((["--draft-max", "0"], "--draft-max must be in [1, 64]"),
                          (["-c", "x"], "-c"), (["--draft", "eagle"], "--draft must be one of")):
        with pytest.raises(SystemExit) as e:
            cli.build_parser().parse_args(argv)
        assert e.value.code == 2 and message in capsys.readouterr().err


def test_draft_model_and_word_refused():
    with pytest.raises(SystemExit, match="either -md/--model-draft or --draft"):
        kwargs("-md", "small.gguf", "--draft", "ngram")


def test_generator_keywords_are_the_table_knobs():
    """Every generator-scope knob is a Generator keyword whose default is None: the engine's table
    default, typed in one place only."""
    import inspect

    from specgen import Generator, _core

    sig = inspect.signature(Generator.__init__).parameters
    for spec in _core.param_specs():
        if spec["scope"] == "generator" and spec["name"] != "draft_kind":
            assert spec["name"] in sig and sig[spec["name"]].default is None, spec["name"]
