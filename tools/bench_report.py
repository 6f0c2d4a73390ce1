"""Regenerates the committed sample report docs/bench/ (REPORT.md, bench.png, bench.json, bench.csv and
core.md) on the default model, Gemma 3 270M. Thin wrapper over `python -m specgen.bench`.

    PYTHONPATH=python python tools/bench_report.py [--quick] [extra specgen.bench arguments]

--quick: 1 prompt per set and 16 tokens (a smoke run); the default keeps to ~10 minutes
on 2 cores of a shared machine at the engine speed of the time this was written.
"""
import sys
from pathlib import Path

from specgen import bench

OUT = Path(__file__).resolve().parent.parent / "docs" / "bench"


def main(argv):
    quick = "--quick" in argv
    argv = [a for a in argv if a != "--quick"]
    OUT.mkdir(parents=True, exist_ok=True)
    rel = lambda name: str((OUT / name).relative_to(Path.cwd())) if (OUT / name).is_relative_to(Path.cwd()) else str(OUT / name)
    args = [
        "--configs", "ar,ngram:token,ngram:block,self:token,self:block,nanospec:block,nanospec:k16:block,frspec32768:block,ssd:block,ssd:ns:k16:block,ssd:ns:k16:f1:fast:g3",
        "--prompts", "text,edit,code,chat", "--n-prompts", "1" if quick else "2",
        "--max-tokens", "16" if quick else "48", "--draft-max", "4", "-t", "2", "--temp", "0,1",
        "--json", rel("bench.json"), "--csv", rel("bench.csv"), "--plot", rel("bench.png"),
        "--markdown", rel("REPORT.md"),
    ] + argv
    rc = bench.main(args)
    bench.main(["core", "-t", "1,2", "--max-tokens", "16", "--bandwidth-mb", "512",
                "--markdown", rel("core.md"), "--json", rel("core.json")])
    core_md = (OUT / "core.md").read_text().split("\n", 1)[1]  # drop its title
    with open(OUT / "REPORT.md", "a") as f:
        f.write("\n## Core runtime (`specgen bench core`)\n" + core_md)
        f.write("\nRegenerate everything here with `PYTHONPATH=python python tools/bench_report.py`.\n")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
