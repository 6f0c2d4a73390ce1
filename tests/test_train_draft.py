"""specgen-train-draft (python/specgen/train, docs/DESIGN.md section 4.1) on test_eagle3's tiny random Llama
target: Generator.hidden_states against the PyTorch reference and the speculator's own capture; the
training-time-test unrolling against the engine's head drafting row by row; the reduced vocabulary; a
head trained for a few dozen steps (loss down, loads in specgen, greedy output == plain output with
accepted drafts); resume; the command line's errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import specgen  # noqa: E402
from specgen import _testing  # noqa: E402
from specgen.errors import ContextOverflowError, InvalidParameterError  # noqa: E402
from specgen.train import cli  # noqa: E402
from specgen.train.checkpoint import load_state  # noqa: E402
from specgen.train.compose import compose_prompts, corpus_size  # noqa: E402
from specgen.train.unroll import unrolled_logits  # noqa: E402
from specgen.train.vocab import d2t_offsets, reduced_vocabulary, target_to_draft  # noqa: E402

from test_eagle3 import LAYERS, PROMPTS, _target_weights, reference_target_features, write_target  # noqa: E402

TRAIN_PROMPTS = PROMPTS + ["the cat", "a bird over the water", "when the stone is", "the sea is on"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("train")
    tw = _target_weights()
    (d / "prompts.txt").write_text("# test prompts\n" + "\n".join(TRAIN_PROMPTS) + "\n")
    return {"dir": d, "tw": tw, "target": write_target(d / "target.gguf", tw), "prompts": str(d / "prompts.txt")}


@pytest.fixture(scope="module")
def plain(tiny):
    g = specgen.Generator(tiny["target"], n_ctx=256, n_threads=1)
    yield g
    g.close()


def _train_args(tiny, out, steps, *extra):
    return ["--model", tiny["target"], "--out", str(out), "--prompts", tiny["prompts"], "--steps", str(steps),
            "--vocab", "48", "--max-tokens", "40", "--temperature", "0.7", "--n-parallel", "2", "-t", "1",
            "--seq-len", "40", "--n-ctx", "128", "--save-every", "10", "--quiet", *extra]


@pytest.fixture(scope="module")
def trained(tiny):
    out = tiny["dir"] / "head.gguf"
    assert cli.main(_train_args(tiny, out, 40, "--plot", str(tiny["dir"] / "loss.png"))) == 0
    return out


# --- Generator.hidden_states -----------------------------------------------------------------------
def test_hidden_states_match_the_reference_and_the_speculators_capture(tiny, plain):
    tokens = plain.tokenize(PROMPTS[0] + " " + PROMPTS[1])
    features, final = plain.hidden_states(tokens, LAYERS, final=True)
    assert features.shape == (len(tokens), 3, plain_n_embd(tiny)) and features.dtype == np.float32
    want = reference_target_features(tiny["tw"], tokens).numpy().reshape(len(tokens), 3, -1)
    assert np.abs(features - want).max() < 2e-4 * np.abs(want).max()
    # The speculator's capture (what the engine hands an EAGLE-3 head), bit for bit, whatever the batch size.
    head = tiny["dir"] / "capture-head.gguf"
    if not head.exists():
        from test_eagle3 import _head_weights, write_head
        write_head(head, _head_weights(11, True, tiny["tw"]["output.weight"]))
    captured = _testing.Eagle3Head(plain._core, str(head)).target_features(np.array(tokens, dtype=np.int32))
    assert np.array_equal(features.reshape(len(tokens), -1), captured)
    assert np.array_equal(plain.hidden_states(tokens, LAYERS, batch_size=5), features)
    # The final rows are what the LM head reads.
    logits = final @ tiny["tw"]["output.weight"].T
    assert np.abs(logits - plain.logits(tokens)).max() < 1e-4
    # Any layers, in any order (layer 0: the embedding).
    assert np.array_equal(plain.hidden_states(tokens, [LAYERS[2], 0])[:, 0], features[:, 2])


def test_hidden_states_leave_the_speculators_capture_alone(tiny, plain, trained):
    """On a Generator drafting with a head, other layers' hidden states between requests do not change the
    layers the engine captures for it: drafts are still accepted and greedy output is still plain output."""
    with specgen.Generator(tiny["target"], n_ctx=256, n_threads=1, draft_head=str(trained), draft_max=4) as g:
        for prompt in PROMPTS[:2]:
            assert g.hidden_states(g.tokenize(prompt), [0, 1]).shape[1] == 2
            with pytest.raises(InvalidParameterError):
                g.hidden_states(g.tokenize(prompt), [99])
            got = g.generate(prompt, max_tokens=32, temperature=0, ignore_eos=True)
            assert got.tokens == plain.generate(prompt, max_tokens=32, temperature=0, ignore_eos=True).tokens
            assert got.stats.n_accepted > 0


@pytest.mark.parametrize("tokens,layers,error,message", [
    ([5, 6], [8], InvalidParameterError, r"layer 8 is outside the target's layers \[0, 8\)"),
    ([5, 6], [-1], InvalidParameterError, "layer -1 is outside"),
    ([5, 6], [], InvalidParameterError, "at least one layer"),
    ([5, 6], ["2"], InvalidParameterError, "layers must be integers"),
    ([5, 6], 2, InvalidParameterError, "layers must be a sequence"),
    ([], [2], InvalidParameterError, "at least one token"),
    ([5, 100000], [2], InvalidParameterError, "token id 100000 is outside the vocabulary"),
    ([5] * 300, [2], ContextOverflowError, "exceed n_ctx"),
])
def test_hidden_states_bad_input(plain, tokens, layers, error, message):
    with pytest.raises(error, match=message):
        plain.hidden_states(tokens, layers)


def plain_n_embd(tiny):
    return tiny["tw"]["token_embd.weight"].shape[1]


# --- the training forward ---------------------------------------------------------------------------
def test_unrolled_steps_are_the_engines_drafted_rows(tiny, plain, trained):
    """Step j of row P in training == the engine's head drafting j rows after the context rows 0..P-j:
    same tokens, each drafted row fed the previous row's pre-norm output (speculative/eagle3.h)."""
    state = load_state(f"{trained}.ckpt", lambda h: torch.optim.AdamW(h.parameters()))
    head = state.head.double()
    tokens = plain.tokenize(PROMPTS[0] + " " + PROMPTS[2])
    n, ids = len(tokens), np.array(tokens, dtype=np.int32)
    features = plain.hidden_states(tokens, LAYERS).reshape(n, -1)
    embd = torch.from_numpy(tiny["tw"]["token_embd.weight"]).double()
    rows = n - 1
    embeds = embd[torch.from_numpy(ids[1:].astype(np.int64))][None]
    with torch.no_grad():
        g0 = head.fuse(torch.from_numpy(features[:rows]).double())[None]
        steps = unrolled_logits(head, embeds, g0, 3)
        # Step 0 is the plain causal forward.
        _, logits0 = head(embeds[0], g0[0])
        assert torch.allclose(steps[0][0], logits0, atol=1e-9)
    engine = _testing.Eagle3Head(plain._core, str(trained))
    g = engine.fuse(np.ascontiguousarray(features[:rows]))
    for j in (1, 2):
        for P in (j, rows // 2, rows - 1):
            S = P - j   # last context row
            pre, _ = engine.forward(ids[1:S + 2].copy(), np.ascontiguousarray(g[:S + 1]), 0)
            h = pre[-1:]
            for pos in range(S + 1, P + 1):
                pre, logits = engine.forward(ids[pos + 1:pos + 2].copy(), np.ascontiguousarray(h), pos)
                h = pre
            err = np.abs(logits[0] - steps[j][0, P].numpy()).max()
            assert err < 1e-3 * (1 + np.abs(logits[0]).max()), (j, P, err)


def test_reduced_vocabulary():
    ids = np.array([7, 3, 3, 9, 9, 9, 1, 7, 5])
    assert reduced_vocabulary(ids, 3, 12).tolist() == [3, 7, 9]       # counts 3:2, 7:2, 9:3 beat 1 and 5
    assert reduced_vocabulary(ids, 4, 12).tolist() == [1, 3, 7, 9]    # ties (1 and 5): the lower id
    assert reduced_vocabulary(ids, 100, 12).tolist() == [1, 3, 5, 7, 9]
    d2t = np.array([1, 3, 7, 9])
    assert d2t_offsets(d2t).tolist() == [1, 2, 5, 6]
    t2d = target_to_draft(d2t, 12)
    assert t2d[7] == 2 and t2d[0] == -1 and (t2d[d2t] == np.arange(4)).all()


def test_composed_corpus_is_reproducible_distinct_and_unlike_the_bench_prompts():
    n = corpus_size()
    everything = compose_prompts(n)
    assert len(everything) == n and len(set(everything)) == n
    assert compose_prompts(50) == everything[:50] == compose_prompts(50, seed=0)
    assert compose_prompts(50, seed=1) != everything[:50]
    assert any(p.startswith("def ") for p in everything) and any("?" in p for p in everything)
    prompts_dir = os.path.join(os.path.dirname(specgen.__file__), "prompts")
    bench = set()
    for name in os.listdir(prompts_dir):
        if name.endswith(".jsonl"):
            with open(os.path.join(prompts_dir, name), encoding="utf-8") as f:
                for line in f:
                    row = json.loads(line)
                    bench.add(row.get("prompt") or json.dumps(row.get("messages")))
    assert bench and not bench & set(everything)


# --- the trainer end to end ---------------------------------------------------------------------------
def test_trained_head_learns_and_drafts_losslessly(tiny, plain, trained):
    state = load_state(f"{trained}.ckpt", lambda h: torch.optim.AdamW(h.parameters()))
    assert state.step == 40 and len(state.losses) == 40
    assert np.mean(state.losses[-5:]) < 0.7 * np.mean(state.losses[:5]), state.losses
    assert (tiny["dir"] / "loss.png").stat().st_size > 0
    accepted = drafted = 0
    with specgen.Generator(tiny["target"], n_ctx=256, n_threads=1, draft_head=str(trained), draft_max=4) as g:
        for prompt in PROMPTS + ["a bird over the water"]:
            want = plain.generate(prompt, max_tokens=40, temperature=0, ignore_eos=True)
            got = g.generate(prompt, max_tokens=40, temperature=0, ignore_eos=True)
            assert got.tokens == want.tokens, prompt
            accepted += got.stats.n_accepted
            drafted += got.stats.n_drafted
    assert drafted > 0 and accepted > 0.3 * drafted, (accepted, drafted)


def test_exported_head_carries_the_targets_tokenizer(tiny, trained):
    """llama.cpp loads a draft GGUF's vocabulary and refuses one without tokenizer.ggml.model (its eagle3
    graph sizes the draft's logits by it): the head holds the target's tokenizer keys, value for value."""
    import gguf

    head, target = gguf.GGUFReader(str(trained)).fields, gguf.GGUFReader(tiny["target"]).fields
    want = {k: f.contents() for k, f in target.items() if k.startswith("tokenizer.")}
    got = {k: f.contents() for k, f in head.items() if k.startswith("tokenizer.")}
    assert "tokenizer.ggml.model" in want and "tokenizer.ggml.tokens" in want, sorted(want)
    assert got == want
    assert head["general.architecture"].contents() == "eagle3"


def test_resume_continues_from_the_checkpoint(tiny, trained):
    """10 steps, then --resume to 14: the step and the losses of an unbroken 14-step run."""
    data = f"{trained}.data.npz"
    resumed, unbroken = tiny["dir"] / "resumed.gguf", tiny["dir"] / "unbroken.gguf"
    assert cli.main(_train_args(tiny, resumed, 10, "--data", data)) == 0
    first = load_state(f"{resumed}.ckpt", lambda h: torch.optim.AdamW(h.parameters()))
    assert first.step == 10
    assert cli.main(_train_args(tiny, resumed, 14, "--resume", "--data", data)) == 0
    after = load_state(f"{resumed}.ckpt", lambda h: torch.optim.AdamW(h.parameters()))
    assert after.step == 14 and after.losses[:10] == first.losses and len(after.losses) == 14
    assert cli.main(_train_args(tiny, unbroken, 14, "--data", data, "--outtype", "f32")) == 0
    straight = load_state(f"{unbroken}.ckpt", lambda h: torch.optim.AdamW(h.parameters()))
    assert np.allclose(after.losses, straight.losses, rtol=1e-5), (after.losses[10:], straight.losses[10:])
    # The F16 default writes the matrices as F16, --outtype f32 as F32; 1-D norms and d2t keep their types.
    import gguf

    for path, matrix_type in ((resumed, gguf.GGMLQuantizationType.F16), (unbroken, gguf.GGMLQuantizationType.F32)):
        types = {t.name: (t.tensor_type, len(t.shape)) for t in gguf.GGUFReader(str(path)).tensors}
        assert types["d2t"][0] == gguf.GGMLQuantizationType.I64 and types["fc.weight"] == (matrix_type, 2), types
        assert all(ty == (matrix_type if dims == 2 else gguf.GGMLQuantizationType.F32)
                   for name, (ty, dims) in types.items() if name != "d2t"), types


def _specgen_path(*first):
    """PYTHONPATH for a child that imports the specgen this test imported (a checkout's or the installed one)."""
    parts = [str(p) for p in first] + [os.path.dirname(os.path.dirname(os.path.abspath(specgen.__file__)))]
    return os.pathsep.join(parts + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))


def _run_cli(*args):
    env = dict(os.environ, PYTHONPATH=_specgen_path())
    return subprocess.run([sys.executable, "-m", "specgen.train.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("args,message", [
    (["--out", "h.gguf"], "the following arguments are required: --model"),
    (["--model", "{dir}/none.gguf", "--out", "{dir}/h.gguf"], "no such file"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--steps", "0"], "--steps must be >= 1"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--layers", "1,2"], "--layers must be three integers"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--layers", "1,x,3"], "--layers must be three integers"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--layers", "1,2,9", "--prompts", "{prompts}"],
     r"layer 9 is outside the target's layers [0, 8)"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--resume"], "--resume: no checkpoint"),
    (["--model", "{target}", "--out", "{dir}/nodir/h.gguf"], "does not exist"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--prompts", "{dir}/none.txt"], "--prompts"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--bogus"], "unrecognized arguments: --bogus"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--compose", "-1"], "--compose must be in [0, "),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--compose", "99999"], "--compose must be in [0, "),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--device", "tpu"], "--device must be cpu, cuda or cuda:N"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--device", "cpu:1"], "--device must be cpu, cuda or cuda:N"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--device", "cuda:99"], "torch sees no such CUDA device"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--warmup", "-1"], "--warmup must be >= 0"),
    (["--model", "{target}", "--out", "{dir}/h.gguf", "--lr-schedule", "linear"], "invalid choice: 'linear'"),
])
def test_cli_errors_are_one_line_and_exit_2(tiny, args, message):
    r = _run_cli(*[a.format(dir=tiny["dir"], target=tiny["target"], prompts=tiny["prompts"]) for a in args])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specgen-train-draft: error: "), r.stderr
    assert message in lines[0]


@pytest.mark.parametrize("blocked,flags,message", [
    ("torch", [], "torch is needed for training: pip install 'specgen[train]'"),
    ("matplotlib", ["--plot", "loss.png"], "--plot needs matplotlib"),
])
def test_cli_without_its_extra(tiny, tmp_path, blocked, flags, message):
    from test_entry_points import blocker

    env = dict(os.environ, PYTHONPATH=_specgen_path(blocker(tmp_path, blocked)))
    r = subprocess.run([sys.executable, "-m", "specgen.train.cli", "--model", tiny["target"], "--out",
                        str(tmp_path / "h.gguf"), *flags], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specgen-train-draft: error: ") and message in lines[0], r.stderr


def test_learning_rate_schedules():
    """Warm-up rises linearly to lr; constant stays there; cosine falls to min_lr_ratio * lr at the last step."""
    from specgen.train.trainer import TrainConfig, learning_rate

    const = TrainConfig(steps=100, lr=1e-3, warmup=10)
    assert learning_rate(const, 0) == pytest.approx(1e-4) and learning_rate(const, 9) == pytest.approx(1e-3)
    assert learning_rate(const, 50) == learning_rate(const, 99) == 1e-3
    cos = TrainConfig(steps=110, lr=1e-3, warmup=10, lr_schedule="cosine", min_lr_ratio=0.1)
    rates = [learning_rate(cos, i) for i in range(110)]
    assert rates[10] == pytest.approx(1e-3)
    assert rates[60] == pytest.approx(0.55e-3)       # half way: the mean of lr and its floor
    assert rates[110 - 1] == pytest.approx(1e-4, rel=1e-2)  # the floor itself comes one step after the last
    assert all(a >= b for a, b in zip(rates[10:], rates[11:]))


def test_training_stops_at_its_deadline(tiny, trained):
    """train(deadline=...) starts no step after the deadline and checkpoints the step it reached; a fresh
    state's draft vocabulary covers the data's continuations, most frequent ids first."""
    import time

    from specgen.train.data import DistillData
    from specgen.train.target import TargetGGUF
    from specgen.train.trainer import Batches, TrainConfig, fresh_state, train

    data = DistillData.load(f"{trained}.data.npz")
    target = TargetGGUF(tiny["target"])
    cfg = TrainConfig(steps=50, batch_size=2, seq_len=16)
    state = fresh_state(target, data, list(data.layers), cfg, vocab=8)
    assert len(state.d2t) == 8 and set(state.d2t) <= set(data.generated().tolist())
    batches = Batches(data, target.embedding_rows, state.d2t, target.facts.n_vocab, cfg)
    ckpt = tiny["dir"] / "deadline.ckpt"
    train(state, batches, cfg, checkpoint_path=ckpt, show_progress=False, deadline=time.time() - 1)
    assert state.step == 0 and not ckpt.exists()
    train(state, batches, TrainConfig(steps=3, batch_size=2, seq_len=16), checkpoint_path=ckpt, show_progress=False,
          deadline=time.time() + 600)
    assert state.step == 3 and ckpt.exists()
