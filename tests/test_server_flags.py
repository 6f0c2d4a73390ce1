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
