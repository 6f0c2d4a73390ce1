"""specgen-train-draft: trains an EAGLE-3 head for a target GGUF by self-distillation and exports it in
llama.cpp's eagle3 GGUF layout (docs/DESIGN.md section 4.1).

    specgen-train-draft --model target.gguf --out head.gguf [--prompts FILE] [--compose N] [--steps N] [--vocab N]
                        [--layers a,b,c] [--resume] [--plot loss.png] [--device cuda] ...

A bad command line is one line `specgen-train-draft: error: ...` and exit code 2; a failure while it
runs is the same line with exit code 1.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from typing import List, Optional

PROG = "specgen-train-draft"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Train an EAGLE-3 draft head for a target GGUF (self-distillation).")
    p.add_argument("--model", "-m", required=True, help="the target GGUF")
    p.add_argument("--out", "-o", required=True, help="the head GGUF to write (eagle3 layout)")
    p.add_argument("--prompts", help="prompt file, one per line ('#' comments); default: the shipped set")
    p.add_argument("--compose", type=int, default=0, help="add N prompts composed from topic x form lists "
                                                         "(train/compose.py; default 0)")
    p.add_argument("--data", help="self-distillation data (.npz): reused when it exists, else written "
                                  "(default: OUT.data.npz)")
    p.add_argument("--checkpoint", help="training checkpoint (default: OUT.ckpt)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint up to --steps")
    p.add_argument("--steps", type=int, default=300, help="total optimizer steps (default 300)")
    p.add_argument("--vocab", type=int, default=8192, help="draft vocabulary size: the N most frequent "
                                                          "next tokens of the data (default 8192)")
    p.add_argument("--layers", help="the target layers whose inputs feed the head, a,b,c "
                                    "(default: 2, n_layer/2, n_layer-3 as llama.cpp's converter)")
    p.add_argument("--max-tokens", type=int, default=128, help="tokens generated per prompt (default 128)")
    p.add_argument("--temperature", type=float, default=0.0, help="of the continuations (default 0: greedy)")
    p.add_argument("--n-parallel", type=int, default=4, help="sequences the engine decodes together (default 4)")
    p.add_argument("--threads", "-t", type=int, default=0, help="engine threads (default 0: automatic)")
    p.add_argument("--n-ctx", type=int, default=1024, help="context per sequence (default 1024)")
    p.add_argument("--batch-size", type=int, default=4, help="windows per step (default 4)")
    p.add_argument("--seq-len", type=int, default=128, help="tokens per window (default 128)")
    p.add_argument("--ttt-steps", type=int, default=3, help="steps the head is unrolled in training (default 3)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (default 1e-3)")
    p.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant",
                   help="constant (default) or cosine decay to a tenth of --lr at the last step")
    p.add_argument("--warmup", type=int, default=0, help="steps of linear learning-rate warm-up (default 0)")
    p.add_argument("--device", default="cpu",
                   help="where the engine generates the data and torch trains: cpu (default), cuda or cuda:N")
    p.add_argument("--ff", type=int, default=0, help="the head's FFN width (default 0: the target's)")
    p.add_argument("--no-norm-before-fc", action="store_true", help="feed fc the raw features (default: an "
                                                                    "RMSNorm first, eagle3.norm_before_fc)")
    p.add_argument("--save-every", type=int, default=50, help="checkpoint period in steps (default 50)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--outtype", choices=("f16", "f32"), default="f16",
                   help="the head's matrices as F16 (default; half the bytes per drafted token) or F32")
    p.add_argument("--plot", help="write the loss curve to this image (needs matplotlib)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    return p


def _parse_layers(text: str) -> List[int]:
    try:
        layers = [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--layers must be three integers a,b,c, got {text!r}") from None
    if len(layers) != 3:
        raise UsageError(f"--layers must be three integers a,b,c (an EAGLE-3 head fuses three), got {text!r}")
    return layers


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def _check(args) -> None:
    """Everything that can be checked before work starts."""
    if not os.path.isfile(args.model):
        raise UsageError(f"--model {args.model}: no such file")
    if args.prompts is not None and not os.path.isfile(args.prompts):
        raise UsageError(f"--prompts {args.prompts}: no such file")
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        raise UsageError(f"--out {args.out}: directory {out_dir} does not exist")
    for name, lo in (("steps", 1), ("vocab", 1), ("max_tokens", 1), ("n_parallel", 1), ("threads", 0),
                     ("n_ctx", 8), ("batch_size", 1), ("seq_len", 4), ("ttt_steps", 1), ("ff", 0), ("save_every", 1), ("warmup", 0)):
        if getattr(args, name) < lo:
            raise UsageError(f"--{name.replace('_', '-')} must be >= {lo}, got {getattr(args, name)}")
    if not args.lr > 0:
        raise UsageError(f"--lr must be > 0, got {args.lr}")
    from specgen.train.compose import corpus_size

    if not 0 <= args.compose <= corpus_size():
        raise UsageError(f"--compose must be in [0, {corpus_size()}], got {args.compose}")
    if args.temperature < 0:
        raise UsageError(f"--temperature must be >= 0, got {args.temperature}")
    if args.layers is not None:
        args.layers = _parse_layers(args.layers)
    if args.resume and not os.path.isfile(args.checkpoint):
        raise UsageError(f"--resume: no checkpoint at {args.checkpoint}")
    for module, why in (("torch", "training"), ("gguf", "reading the target and writing the head"), ("tqdm", "progress")):
        if not _installed(module):
            raise UsageError(f"{module} is needed for {why}: pip install 'specgen[train]'")
    _check_device(args.device)
    if args.plot and not _installed("matplotlib"):
        raise UsageError("--plot needs matplotlib: pip install 'specgen[train]'")


def _check_device(device: str) -> None:
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda") or (index and (kind == "cpu" or not index.isdigit())):
        raise UsageError(f"--device must be cpu, cuda or cuda:N, got {device!r}")
    if kind == "cuda":
        import torch

        if not torch.cuda.is_available() or int(index or 0) >= torch.cuda.device_count():
            raise UsageError(f"--device {device}: torch sees no such CUDA device")


def run(args) -> int:
    import specgen
    from specgen.train.checkpoint import load_state
    from specgen.train.compose import compose_prompts
    from specgen.train.data import DistillData, generate_data, read_prompts
    from specgen.train.export import write_head_gguf
    from specgen.train.target import TargetGGUF
    from specgen.train.trainer import Batches, TrainConfig, fresh_state, make_optimizer, plot_losses, train

    say = (lambda *a: None) if args.quiet else (lambda msg: print(f"{PROG}: {msg}", file=sys.stderr, flush=True))
    target = TargetGGUF(args.model)
    facts = target.facts
    layers = args.layers or [2, facts.n_layer // 2, facts.n_layer - 3]
    for layer in layers:
        if not 0 <= layer < facts.n_layer:
            raise UsageError(f"--layers: layer {layer} is outside the target's layers [0, {facts.n_layer})")
    cfg = TrainConfig(steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len, ttt_steps=args.ttt_steps,
                      lr=args.lr, seed=args.seed, save_every=args.save_every,
                      lr_schedule=args.lr_schedule, warmup=args.warmup, device=args.device)

    if os.path.isfile(args.data):
        data = DistillData.load(args.data)
        if list(data.layers) != list(layers):
            raise UsageError(f"--data {args.data} holds layers {list(data.layers)}, not {layers}")
        say(f"data: {data.n_sequences} sequences, {len(data.tokens)} tokens from {args.data}")
    else:
        prompts = read_prompts(args.prompts) + compose_prompts(args.compose, seed=args.seed)
        say(f"generating continuations of {len(prompts)} prompts ({args.max_tokens} tokens each)")
        from tqdm import tqdm

        bar = tqdm(total=len(prompts), unit="prompt", disable=args.quiet or not sys.stderr.isatty(), dynamic_ncols=True)
        with specgen.Generator(args.model, n_ctx=args.n_ctx, n_parallel=args.n_parallel,
                               n_threads=args.threads or None, device=args.device) as g:
            data = generate_data(g, prompts, layers, max_tokens=args.max_tokens, temperature=args.temperature,
                                 seed=args.seed, batch=4 * args.n_parallel, progress=bar.update)
        bar.close()
        data.save(args.data)
        say(f"data: {data.n_sequences} sequences, {len(data.tokens)} tokens -> {args.data}")

    def optimizer(head):
        return make_optimizer(head, cfg)

    if args.resume:
        state = load_state(args.checkpoint, optimizer, device=args.device)
        say(f"resuming at step {state.step} from {args.checkpoint}")
    else:
        try:
            state = fresh_state(target, data, layers, cfg, args.vocab, ff=args.ff,
                                norm_before_fc=not args.no_norm_before_fc, seed=args.seed)
        except ValueError as e:
            raise UsageError(str(e)) from None
    say(f"head: draft vocabulary {len(state.d2t)}, layers {layers}, {sum(p.numel() for p in state.head.parameters())} "
        f"parameters; training steps {state.step}..{cfg.steps}")
    batches = Batches(data, target.embedding_rows, state.d2t, facts.n_vocab, cfg)
    train(state, batches, cfg, checkpoint_path=args.checkpoint, show_progress=False if args.quiet else None)
    if state.losses:
        say(f"loss: first {state.losses[0]:.3f}, last {state.losses[-1]:.3f}")
    if args.plot:
        plot_losses(state.losses, args.plot)
    write_head_gguf(args.out, state.head, state.d2t, n_ctx=args.n_ctx, outtype=args.outtype, tokenizer_from=args.model)
    say(f"wrote {args.out}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        args.data = args.data or f"{args.out}.data.npz"
        args.checkpoint = args.checkpoint or f"{args.out}.ckpt"
        _check(args)
        return run(args)
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: error: interrupted", file=sys.stderr)
        return 1
    except Exception as e:  # a run-time failure: one line, never a traceback
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
