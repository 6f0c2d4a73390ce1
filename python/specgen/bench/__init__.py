"""specgen bench: measures configurations of the engine against each other in one run.

    specgen bench --configs ar,ngram:block,ngram:token,self6:block --prompts code,edit \\
        --draft-max 4,8 -t 1,2 --temp 0,1 --repeats 2 --json out.json --markdown out.md --plot out.png
    specgen bench --preset ssd        # a named study (presets.py)
    specgen bench core                # prefill/decode tokens/s, bytes/token, bandwidth fraction

One package, one configuration grammar:

- grammar.py   configuration specs (``ssd:ns:k16:f1:fast:g3``), the matrix of cells, the prompt sets
- runner.py    the interleaved run, pooling and the speedups against plain decoding
- stats.py     medians, spreads, pooled counters and the speed-of-light bounds (pure functions)
- report.py    text table, Markdown, CSV and the figure
- peer.py      the optional llama-cpp-python column
- runtime.py   core-runtime numbers (bandwidth fraction)
- presets.py   named studies (ssd, nanospec, report) as option sets of the grammar
- cli.py       the command line

From Python: ``specgen.bench.run(...)`` returns the same dict ``--json`` writes;
``specgen.bench.core(...)`` the core-runtime numbers.
"""
from specgen.bench.grammar import (DEFAULT_CONFIGS, NOT_IMPLEMENTED, PROMPT_SETS, Cell, Config, expand,
                                   load_prompts, parse_config, parse_list)
from specgen.bench.runner import _finite, run, summarise

__all__ = ["Config", "Cell", "parse_config", "parse_list", "expand", "load_prompts", "run", "summarise", "core",
           "main", "PROMPT_SETS", "DEFAULT_CONFIGS", "NOT_IMPLEMENTED"]


def core(*args, **kwargs):
    """Prefill/decode tokens/s per thread count, bytes per token and the fraction of measured memory
    bandwidth reached (specgen.bench.runtime.run_core)."""
    from specgen.bench.runtime import run_core

    return run_core(*args, **kwargs)


def main(argv=None) -> int:
    """The `specgen bench` command line; returns the exit code."""
    from specgen.bench.cli import main as cli_main

    return cli_main(argv)
