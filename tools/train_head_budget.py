"""Trains an EAGLE-3 head for a target GGUF within a wall-clock deadline, on a machine with many cores
and a GPU (tools/gpu_train_head.sh runs it on a lent one). It is specgen-train-draft's pipeline
(python/specgen/train/) cut into time-boxed phases:

  1. continuations: the sequences of --tokens (prompt + continuation ids made earlier, e.g. on a
     laptop), plus sampled continuations of the composed corpus that engine workers generate until
     --gen-seconds pass (a CUDA worker when the build and the machine have one, a CPU worker beside it);
  2. features: the target's hidden states at the head's layers for every sequence, by the same
     workers (Generator.hidden_states, the capture the speculator drafts on);
  3. training on the torch device for the time left (cosine schedule fitted to the measured step time);
  4. a held-out check (each unrolled step's top-1 agreement with the target's next token, teacher
     forced: the acceptance of drafted position j+1 given the ones before it, at T=0) and export.

    python tools/train_head_budget.py --model G.gguf --tokens tokens.npz --out DIR --deadline UNIX_TIME

Writes DIR/head.gguf, DIR/loss.png, DIR/summary.json. A worker that fails is reported and the others
carry on; sequences whose features were not computed are left out.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _engine_devices(cpu_threads: int):
    """(device, n_threads, n_parallel) of each worker: CUDA first when the build has it."""
    from specgen import _core

    devices = []
    info = _core.build_info()
    if info.get("cuda") and _core.cuda_device_count() > 0:
        devices.append(("cuda", 2, 128))
    devices.append(("cpu", cpu_threads, 16))
    return devices


def _generate_worker(device, threads, n_parallel, model, prompts, jobs, max_tokens, stop_at, counter, work_dir):
    """Takes blocks of jobs (prompt index, temperature) off the shared counter until the next block
    would pass stop_at; each block's sequences go to one .npz in work_dir (a crash loses one block)."""
    import specgen

    try:
        g = specgen.Generator(model, device=device, n_threads=threads, n_parallel=n_parallel, n_ctx=1024)
        last = 0.0
        while time.time() + last < stop_at:
            with counter.get_lock():
                k = counter.value
                counter.value += n_parallel
            t = time.time()
            block = [jobs[(k + i) % len(jobs)] for i in range(n_parallel)]
            seqs, n_prompt, n_new = [], [], 0
            for temperature in sorted({temp for _, temp in block}):
                ids = [(j, g.tokenize(prompts[p])) for j, (p, temp) in enumerate(block) if temp == temperature]
                results = g.generate([x for _, x in ids], max_tokens=max_tokens, temperature=temperature,
                                     seed=[1_000_003 + k + j for j, _ in ids])
                for (_, prompt_ids), r in zip(ids, results):
                    seqs.append(np.asarray(list(prompt_ids) + list(r.tokens), dtype=np.int32))
                    n_prompt.append(len(prompt_ids))
                    n_new += len(r.tokens)
            np.savez(os.path.join(work_dir, f"gen-{device}-{k}.npz"), tokens=np.concatenate(seqs),
                     lengths=np.asarray([len(s) for s in seqs]), n_prompt=np.asarray(n_prompt))
            last = time.time() - t
            log(f"generate {device}: block {k} ({n_new} new tokens) in {last:.1f} s")
        g.close()
    except Exception as e:  # noqa: BLE001 - reported; the other worker carries on
        log(f"generate {device}: failed: {type(e).__name__}: {e}")


def _feature_worker(device, threads, model, tokens_path, features_path, shape, layers, stop_at, counter, done,
                    block):
    """Takes blocks of sequences off the shared counter and writes their features into the memmap."""
    import specgen

    try:
        z = np.load(tokens_path)
        tokens, offsets = z["tokens"], z["offsets"]
        out = np.memmap(features_path, dtype=np.float32, mode="r+", shape=shape)
        g = specgen.Generator(model, device=device, n_threads=threads, n_ctx=1024)
        n_seq = len(offsets) - 1
        while time.time() < stop_at:
            with counter.get_lock():
                k = counter.value
                counter.value += 1
            if k * block >= n_seq:
                break
            for i in range(k * block, min(n_seq, (k + 1) * block)):
                a, b = int(offsets[i]), int(offsets[i + 1])
                out[a:b] = g.hidden_states(tokens[a:b].tolist(), layers, batch_size=512)
            done[k] = 1
        out.flush()
        g.close()
    except Exception as e:  # noqa: BLE001
        log(f"features {device}: failed: {type(e).__name__}: {e}")


def _run_workers(target, per_device_args, devices):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=target, args=(dev, thr, *per_device_args(dev, par))) for dev, thr, par in devices]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return [p.exitcode for p in procs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", help=".npz of tokens / offsets / n_prompt made earlier")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, required=True, help="unix time by which the head is written")
    ap.add_argument("--gen-seconds", type=float, default=120)
    ap.add_argument("--feature-seconds", type=float, default=150)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--sampled-only", action="store_true", help="generate sampled continuations only")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--cpu-threads", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--device", default="cuda", help="torch device for training")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--ff", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--ttt-steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--holdout", type=float, default=0.03)
    ap.add_argument("--work", default="/tmp/head-work")
    args = ap.parse_args()

    import torch

    from specgen.train.compose import compose_prompts, corpus_size
    from specgen.train.data import DistillData, read_prompts
    from specgen.train.target import TargetGGUF

    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    t_start = time.time()
    summary = {"started": t_start}
    facts = TargetGGUF(args.model).facts
    layers = [2, facts.n_layer // 2, facts.n_layer - 3]
    devices = _engine_devices(args.cpu_threads)
    log(f"engine workers: {devices}; torch device {args.device}; layers {layers}")

    # 1. continuations
    seqs, n_prompt = [], []
    if args.tokens:
        z = np.load(args.tokens)
        for i in range(len(z["offsets"]) - 1):
            seqs.append(z["tokens"][z["offsets"][i]:z["offsets"][i + 1]].astype(np.int32))
            n_prompt.append(int(z["n_prompt"][i]))
        log(f"carried: {len(seqs)} sequences, {sum(map(len, seqs))} tokens")
    summary["carried_sequences"], summary["carried_tokens"] = len(seqs), int(sum(map(len, seqs)))
    if args.gen_seconds > 0:
        # Greedy continuations of the prompts --tokens does not cover (it holds the first ones, in this
        # order), then sampled ones of every prompt, round after round.
        prompts = read_prompts() + compose_prompts(corpus_size(), seed=0)
        covered = min(len(seqs), len(prompts))
        jobs = [(i, 0.0) for i in range(covered, len(prompts)) if not args.sampled_only] + [(i, args.temperature) for i in range(len(prompts))] * 4
        counter = mp.get_context("spawn").Value("l", 0)
        stop_at = time.time() + args.gen_seconds
        _run_workers(_generate_worker, lambda dev, par: (par, args.model, prompts, jobs, args.max_tokens,
                                                         stop_at, counter, args.work), devices)
        n0 = len(seqs)
        for name in sorted(f for f in os.listdir(args.work) if f.startswith("gen-")):
            z = np.load(os.path.join(args.work, name))
            off = np.concatenate([[0], np.cumsum(z["lengths"])])
            for i in range(len(z["lengths"])):
                seqs.append(z["tokens"][off[i]:off[i + 1]])
                n_prompt.append(int(z["n_prompt"][i]))
        summary["generated_sequences"] = len(seqs) - n0
        summary["generated_tokens"] = int(sum(len(s) - p for s, p in zip(seqs[n0:], n_prompt[n0:])))
        log(f"generated: {summary['generated_sequences']} sequences, {summary['generated_tokens']} new tokens "
            f"in {time.time() - stop_at + args.gen_seconds:.0f} s")

    # 2. features
    lengths = np.asarray([len(s) for s in seqs])
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens_path = os.path.join(args.work, "all-tokens.npz")
    np.savez(tokens_path, tokens=np.concatenate(seqs), offsets=offsets)
    shape = (int(offsets[-1]), len(layers), facts.n_embd)
    features_path = os.path.join(args.work, "features.f32")
    np.memmap(features_path, dtype=np.float32, mode="w+", shape=shape).flush()
    block = 8
    n_blocks = (len(seqs) + block - 1) // block
    ctx = mp.get_context("spawn")
    counter, done = ctx.Value("l", 0), ctx.Array("b", n_blocks)
    t = time.time()
    _run_workers(_feature_worker, lambda dev, par: (args.model, tokens_path, features_path, shape, layers,
                                                    t + args.feature_seconds, counter, done, block), devices)
    keep = [i for i in range(len(seqs)) if done[i // block]]
    summary["feature_seconds"] = time.time() - t
    log(f"features: {len(keep)} of {len(seqs)} sequences in {summary['feature_seconds']:.0f} s")
    features = np.memmap(features_path, dtype=np.float32, mode="r", shape=shape)
    rng = np.random.default_rng(0)
    rng.shuffle(keep)
    n_hold = max(1, int(len(keep) * args.holdout))

    def subset(ids):
        ids = sorted(ids)
        rows = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in ids])
        lens = lengths[ids]
        return DistillData(tokens=np.concatenate([seqs[i] for i in ids]).astype(np.int32),
                           features=np.ascontiguousarray(features[rows]),
                           offsets=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
                           n_prompt=np.asarray([n_prompt[i] for i in ids], dtype=np.int64),
                           layers=np.asarray(layers, dtype=np.int64))

    held, data = subset(keep[:n_hold]), subset(keep[n_hold:])
    summary["train_sequences"], summary["train_tokens"] = data.n_sequences, int(len(data.tokens))
    summary["generated_train_tokens"] = len(data.generated())
    log(f"train: {data.n_sequences} sequences, {len(data.tokens)} tokens "
        f"({summary['generated_train_tokens']} generated); held out {held.n_sequences}")

    # 3. training
    train_head(args, facts, layers, data, held, summary, torch)
    summary["total_seconds"] = time.time() - t_start
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    log(json.dumps(summary))
    return 0


def train_head(args, facts, layers, data, held, summary, torch) -> None:
    from specgen.train.export import write_head_gguf
    from specgen.train.target import TargetGGUF
    from specgen.train.trainer import Batches, TrainConfig, fresh_state, plot_losses, train
    from specgen.train.unroll import unrolled_logits

    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    target = TargetGGUF(args.model)
    cfg = TrainConfig(steps=30, batch_size=args.batch_size, seq_len=args.seq_len, ttt_steps=args.ttt_steps,
                      lr=args.lr, lr_schedule="cosine", warmup=100, device=args.device)
    state = fresh_state(target, data, layers, cfg, args.vocab, ff=args.ff)
    head, d2t = state.head, state.d2t
    summary["vocab_coverage"] = float(np.isin(data.generated(), d2t).mean())
    batches = Batches(data, target.embedding_rows, d2t, facts.n_vocab, cfg)
    held_batches = Batches(held, target.embedding_rows, d2t, facts.n_vocab,
                           TrainConfig(batch_size=16, seq_len=args.seq_len, device=args.device))
    summary["head_parameters"] = sum(p.numel() for p in head.parameters())
    summary["draft_vocab"] = len(d2t)

    # Time the first steps, then fit the cosine schedule's length to the time left.
    margin = 40.0  # held-out check, export, plot
    t = time.time()
    train(state, batches, cfg, show_progress=False)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    per_step = (time.time() - t) / cfg.steps
    cfg.steps = max(state.step + 1, state.step + int((args.deadline - time.time() - margin) / per_step))
    log(f"training: {per_step * 1000:.0f} ms a step, {cfg.steps} steps")
    summary["seconds_per_step"], summary["steps"] = per_step, cfg.steps
    t = time.time()
    train(state, batches, cfg, show_progress=False, deadline=args.deadline - margin)
    summary["steps_done"], summary["train_seconds"] = state.step, time.time() - t
    summary["final_loss"] = float(np.mean(state.losses[-100:]))

    # 4. held-out agreement per unrolled step, then export
    correct = np.zeros(args.ttt_steps)
    total = np.zeros(args.ttt_steps)
    with torch.no_grad():
        for k in range(20):
            embeds, feats, labels = held_batches.sample(np.random.default_rng([7, k]))
            logits = unrolled_logits(head, embeds, head.fuse(feats), args.ttt_steps)
            for j, lj in enumerate(logits):
                lab = labels.clone()
                lab[:, :j] = -100
                ok = lab >= 0
                correct[j] += float(((lj.argmax(-1) == lab) & ok).sum())
                total[j] += float(ok.sum())
    summary["heldout_top1_by_step"] = (correct / np.maximum(total, 1)).round(4).tolist()
    log(f"held-out top-1 agreement by step: {summary['heldout_top1_by_step']}")
    path = os.path.join(args.out, "head.gguf")
    write_head_gguf(path, head, d2t, n_ctx=4096, outtype="f16", tokenizer_from=args.model)
    summary["head_bytes"] = os.path.getsize(path)
    plot_losses(state.losses, os.path.join(args.out, "loss.png"))
    log(f"wrote {path} ({summary['head_bytes']} bytes)")


if __name__ == "__main__":
    sys.exit(main())
