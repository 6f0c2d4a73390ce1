"""Named studies of specgen bench: each preset is a set of option defaults in the one grammar
(grammar.py), so a study is a command line, not a script of its own. Flags given on the command
line override the preset's values.

    specgen bench --preset ssd          # SSD / Saguaro against sequential drafting, same threads
    specgen bench --preset nanospec     # full head vs FR-Spec vs NanoSpec heads of the self drafter
    specgen bench --preset auto         # draft="auto" against the fixed configurations, predicted vs measured
    specgen bench --preset report       # regenerates docs/bench/ (REPORT.md, bench.*, core.md)
    specgen bench --preset pair         # a target + its draft model against llama-server (bench/pair.py)
"""
from __future__ import annotations

from typing import Any, Dict

from specgen.bench.pair import DEFAULT_PROMPTS as PAIR_PROMPTS

__all__ = ["PRESETS", "describe"]

# Option values keyed by the argparse destination of specgen bench's flags (cli.py).
PRESETS: Dict[str, Dict[str, Any]] = {
    # SSD against the sequential drafters at the same total thread count (-t 2: the SSD drafter gets
    # one thread, the target the other). Greedy, where the hit-rate goal is stated. The SSD
    # statistics table (hit rate, branches per round, target wait, overlap) comes with it.
    "ssd": dict(
        configs=("ar,ngram:g4,self6:g2,self9:g2,self:g4,ssd6:g2:f4,ssd9:g2:f4:fast,ssd:g2:f1,ssd:g3:f1,"
                 "ssd:g3:f1:noreuse,ssd:g3:f1:fast,ssd:g4:f2,ssd6:g1:f8,ssd:ns:k16:g3:f1:fast"),
        prompts="text,edit", n_prompts=1, max_tokens=48, repeats=3, threads="2", temp="0", peer=False,
    ),
    # The self drafter's LM head: the full 262k-row head, FR-Spec's static top-32768 head and
    # NanoSpec's in-context head (with larger top-k sets and draft_p_min variants), greedy.
    "nanospec": dict(
        configs=("ar,self:g4,self:noreuse:g4,frspec32768:g4,nanospec:g4,nanospec:noreuse:g4,nanospec:k8:g4,"
                 "nanospec:k16:g4,frspec32768:p0.4:g4,nanospec:k16:p0.4:g4"),
        prompts="text", max_tokens=128, repeats=1, threads="2", temp="0", peer=False,
    ),
    # draft="auto" against the fixed configurations on every prompt set at T=0 and T=1, with the
    # policy's predicted decode tok/s next to the measured one (docs/ALGORITHMS.md section 8). At T=1
    # each configuration samples its own texts, whose speeds spread 46-206 tok/s within one cell: 15
    # seeds per prompt (45 draws per set) resolve ~5% where 5 did not (cells moved 10-25% between
    # runs). Greedy cells repeat the same text, so 4 timings each suffice. About 13 minutes here.
    "auto": dict(
        configs="ar,auto,ngram:block,self:block,nanospec:block",
        prompts="text,edit,code,chat", n_prompts=3, max_tokens=64, draft_max="8", threads="2", temp="0,1",
        repeats=4, repeats_sampled=15, peer=False,
    ),
    # The committed sample report docs/bench/ (run from the repository root): every configuration of
    # the README's table at temperatures 0 and 1, then `core` appended to REPORT.md.
    "report": dict(
        configs=("ar,ngram:token,ngram:block,self:token,self:block,nanospec:block,nanospec:k16:block,"
                 "frspec32768:block,ssd:block,ssd:ns:k16:block,ssd:ns:k16:f1:fast:g3"),
        prompts="text,edit,code,chat", n_prompts=2, max_tokens=48, draft_max="4", threads="2", temp="0,1",
        json="docs/bench/bench.json", csv="docs/bench/bench.csv", plot="docs/bench/bench.png",
        markdown="docs/bench/REPORT.md", then_core=True,
    ),
    # Issue 33: the Qwen2.5-Coder 1.5B + 0.5B pair (python -m specgen.bench.models fetch qwen2.5-coder-pair),
    # the code chat prompts, 128 tokens, greedy and T=1, 2 threads, 2 rounds, against llama-server
    # (--peer-server PATH or $SPECGEN_LLAMA_SERVER) plain and with the draft at its default and best
    # n-max (swept first). n-gram and the best n-max only at T=0; RSS and prefill after the rounds. auto and
    # auto:nanospec: draft="auto" with the draft model as a candidate (its full / NanoSpec head).
    "pair": dict(
        study="pair",
        configs="plain,draft,draft:token,draft:nanospec,ngram@0,auto,auto:nanospec,llama,llama:draft,llama:draft:best@0",
        prompts=PAIR_PROMPTS, max_tokens=128, repeats=2, threads="2", temp="0,1", peer_sweep="2,3,4,6,8",
        peer=False,
    ),
}


def describe() -> str:
    """One line per preset: its name and configurations."""
    return "\n".join(f"{name}: {p['configs']}" for name, p in PRESETS.items())
