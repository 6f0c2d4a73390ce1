"""The one configuration grammar of specgen bench, and the prompt sets.

A configuration spec is ``NAME[:OPTION]...``:

- NAME: ``ar`` (plain decoding), ``auto`` (draft="auto": the cost-model policy), ``ngram`` (prompt lookup), ``self`` / ``selfL`` (the target's own
  first L layers; ``self`` = all of them), ``nanospecL`` (self-drafting with the NanoSpec head),
  ``ssdL`` (self-drafting under SSD/Saguaro), ``frspecK`` (FR-Spec head of K frequent tokens, self
  drafting), ``model=PATH`` (a draft GGUF or Hub reference) or ``head`` (the EAGLE-3 head given as
  ``--draft-head FILE``).
- OPTION: ``block`` or ``token`` (verifier; default block), ``gN`` (gamma = draft_max, overriding
  ``--draft-max``), ``ns`` (the NanoSpec head for a ``self``/``ssd`` drafter; for ``head`` and
  ``auto:head``, NanoSpec over the head's vocabulary), ``head`` (``auto`` only: the EAGLE-3 head as one
  more candidate), ``kN``
  (``nanospec_topk = N``; NanoSpec configurations only), ``fN`` (``ssd_fanout = N``) and ``fast``
  (``ssd_backup="fast"``), SSD configurations only; ``noreuse`` (``reuse_draft_hidden=False``: the
  full verification forward, self drafters only) and ``pX`` (``draft_p_min = X``, e.g. ``p0.4``).

A spec's canonical name (Config.name) lists its options in that order; labels of the matrix cells
add gamma, threads and temperature (``ngram:block g8 t2 T0``).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__all__ = ["Config", "Cell", "parse_config", "check_draft_head", "parse_list", "expand", "load_prompts", "PROMPT_SETS",
           "DEFAULT_CONFIGS", "NOT_IMPLEMENTED"]

PROMPT_DIR = Path(__file__).resolve().parent.parent / "prompts"
PROMPT_SETS = ("text", "edit", "code", "chat")
# What works on the reference model (docs/bench/REPORT.md); partial self drafters (selfL) are slower here.
DEFAULT_CONFIGS = "ar,ngram:token,ngram:block,self:block,nanospec:block,nanospec:k16:block,ssd:ns:k16:f1:fast:g3"
NOT_IMPLEMENTED = "n/a (not implemented)"


@dataclass(frozen=True)
class Config:
    """One engine configuration (before the threads / temperature / gamma matrix is applied)."""

    name: str                 # canonical spec, e.g. "self6:block"
    draft: Optional[str]      # Generator(draft=...)
    verify: str = "block"
    self_layers: int = 0
    nanospec: bool = False
    ssd: bool = False
    frspec: int = 0
    nanospec_topk: int = 16  # the engine default (measured faster than 3 on free text: README)
    ssd_fanout: int = 4
    ssd_backup: str = "neural"
    reuse_draft_hidden: bool = True
    draft_p_min: float = -1.0  # automatic: the engine default (0.5 with NanoSpec, else off)
    gamma: Optional[int] = None  # fixed by a gN option; else from --draft-max
    draft_head: bool = False  # draft with (or, under auto, consider) the --draft-head EAGLE-3 head

    @property
    def is_ar(self) -> bool:
        return self.draft is None and not self.draft_head


_OPTION = re.compile(r"^(block|token|g\d+|k\d+|f\d+|ns|fast|noreuse|head|p\d*\.?\d+)$")


def parse_config(spec: str) -> Config:
    """Parses one spec (see the module docstring). Raises ValueError on an unknown name."""
    parts = spec.strip().split(":")
    opts: List[str] = []
    while len(parts) > 1 and _OPTION.match(parts[-1]):
        opts.insert(0, parts.pop())
    name = ":".join(parts)
    verify, gamma, topk, ns, fanout, fast = "block", None, None, False, None, False
    noreuse, p_min, head = False, None, False
    for o in opts:
        if o == "head":
            head = True
        elif o in ("block", "token"):
            verify = o
        elif o == "noreuse":
            noreuse = True
        elif o.startswith("p"):
            p_min = float(o[1:])
            if not 0.0 <= p_min <= 1.0:
                raise ValueError(f"config {spec!r}: p (draft_p_min) must be in [0, 1]")
        elif o == "ns":
            ns = True
        elif o == "fast":
            fast = True
        elif o.startswith("k"):
            topk = int(o[1:])
        elif o.startswith("f"):
            fanout = int(o[1:])
        else:
            gamma = int(o[1:])
            if gamma < 1:
                raise ValueError(f"config {spec!r}: gamma must be >= 1")
    kw: Dict[str, Any]
    m = re.fullmatch(r"(self|nanospec|ssd|frspec)(\d*)", name)
    if name == "ar":
        if opts:
            raise ValueError(f"config {spec!r}: plain decoding takes no options")
        return Config(name="ar", draft=None)
    elif name == "auto":
        if opts and any(not re.fullmatch(r"g\d+|block|head|ns", o) for o in opts) or (ns and not head):
            raise ValueError(f"config {spec!r}: auto takes only gN (its largest gamma), head and head:ns")
        kw = dict(draft="auto", draft_head=head, nanospec=ns)
    elif name == "head":
        kw = dict(draft=None, draft_head=True, nanospec=ns)
    elif name == "ngram":
        kw = dict(draft="ngram")
    elif m:
        n = int(m.group(2)) if m.group(2) else 0
        kw = dict(draft="self")
        if m.group(1) == "frspec":
            kw["frspec"] = n or 16384
        else:
            kw["self_layers"] = n
            kw["nanospec"] = m.group(1) == "nanospec" or (ns and m.group(1) in ("self", "ssd"))
            kw["ssd"] = m.group(1) == "ssd"
    elif name.startswith("model="):
        kw = dict(draft=name[len("model="):])
    else:
        raise ValueError(
            f"unknown configuration {spec!r}: expected ar, ngram, self[L], nanospec[L], ssd[L], "
            "frspec[K], model=PATH or head, then options (:block/:token, :gN, :ns, :kN, :fN, :fast, :noreuse, :pX)"
        )
    if head and name != "auto":
        raise ValueError(f"config {spec!r}: the head option is auto's (for the head alone, use the name head)")
    if (ns or topk is not None) and not kw.get("nanospec"):
        raise ValueError(f"config {spec!r}: ns/kN apply to self, ssd, nanospec and head drafters only")
    if (fanout is not None or fast) and not kw.get("ssd"):
        raise ValueError(f"config {spec!r}: fN/fast apply to ssd drafters only")
    for letter, value, key in (("k", topk, "nanospec_topk"), ("f", fanout, "ssd_fanout")):
        if value is not None:
            if not 1 <= value <= 64:
                raise ValueError(f"config {spec!r}: {letter} must be in [1, 64]")
            kw[key] = value
    if fast:
        kw["ssd_backup"] = "fast"
    if noreuse and kw.get("draft") != "self":
        raise ValueError(f"config {spec!r}: noreuse applies to self drafters only")
    if noreuse:
        kw["reuse_draft_hidden"] = False
    if p_min is not None:
        if kw.get("draft") is None and not kw.get("draft_head"):
            raise ValueError(f"config {spec!r}: pX needs a drafter")
        kw["draft_p_min"] = p_min
    canon = (name + (":head" if head else "") + (":ns" if ns and not (m and m.group(1) == "nanospec") else "") + (f":k{topk}" if topk is not None else "")
             + (f":f{fanout}" if fanout is not None else "") + (":fast" if fast else "")
             + (":noreuse" if noreuse else "") + (f":p{p_min:g}" if p_min is not None else "")
             + ":" + verify + (f":g{gamma}" if gamma else ""))
    return Config(name=canon, verify=verify, gamma=gamma, **kw)


def check_draft_head(configs: Sequence[Config], draft_head: Optional[str]) -> None:
    """Raises ValueError when a configuration drafts with (or considers) an EAGLE-3 head and none is given."""
    needs_head = [c.name for c in configs if c.draft_head]
    if needs_head and not draft_head:
        raise ValueError(f"configuration {needs_head[0]} drafts with an EAGLE-3 head: give --draft-head FILE")


def parse_list(text: Union[str, Sequence, None], conv) -> List:
    """'1,2' -> [1, 2]; a list passes through converted."""
    if text is None:
        return []
    items = text.split(",") if isinstance(text, str) else list(text)
    return [conv(x) for x in items if str(x).strip() != ""]


@dataclass(frozen=True)
class Cell:
    """A configuration at one gamma, thread count and temperature: one column of the matrix."""

    config: Config
    gamma: Optional[int]
    threads: int
    temperature: float

    @property
    def label(self) -> str:
        g = f" g{self.gamma}" if self.gamma else ""
        return f"{self.config.name.replace(':g' + str(self.gamma), '')}{g} t{self.threads} T{self.temperature:g}"

    @property
    def generator_key(self) -> Tuple:
        c = self.config
        return (c.draft, c.verify, c.self_layers, c.nanospec, c.nanospec_topk, c.ssd, c.ssd_fanout, c.ssd_backup,
                c.frspec, c.reuse_draft_hidden, c.draft_p_min, c.draft_head, self.gamma, self.threads)

    @property
    def baseline_key(self) -> Tuple:
        return (self.threads, self.temperature)


def expand(configs: Sequence[Config], gammas: Sequence[int], threads: Sequence[int],
           temps: Sequence[float]) -> List[Cell]:
    """The matrix, AR first. AR is added when missing: every speedup needs its baseline."""
    if not any(c.is_ar for c in configs):
        configs = [parse_config("ar")] + list(configs)
    cells = []
    for c in configs:
        for g in ([None] if c.is_ar else ([c.gamma] if c.gamma else gammas)):
            for t in threads:
                for temp in temps:
                    cells.append(Cell(c, g, t, temp))
    seen, out = set(), []
    for cell in cells:
        if (cell.config.name, cell.gamma, cell.threads, cell.temperature) not in seen:
            seen.add((cell.config.name, cell.gamma, cell.threads, cell.temperature))
            out.append(cell)
    return out


def load_prompts(sets: Union[str, Sequence[str], None] = None, n_per_set: Optional[int] = None) -> List[Dict[str, str]]:
    """Prompts as dicts {set, id, prompt}. ``sets``: names of the shipped sets (text, edit, code,
    chat) and/or paths of JSONL files with one {"prompt": ...} (optional "id") per line; None = all
    shipped sets. A file's set name is its stem."""
    names = PROMPT_SETS if sets is None else parse_list(sets, str)
    out = []
    for name in names:
        path = Path(name)
        if name in PROMPT_SETS and not path.exists():
            path, set_name = PROMPT_DIR / f"{name}.jsonl", name
        else:
            set_name = path.stem
        if not path.exists():
            raise FileNotFoundError(f"prompt set {name!r}: no such shipped set ({', '.join(PROMPT_SETS)}) or file")
        rows = []
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if not line.strip():
                    continue
                obj = json.loads(line)
                if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str):
                    raise ValueError(f"{path}:{i + 1}: expected an object with a string \"prompt\"")
                rows.append({"set": set_name, "id": str(obj.get("id", f"{set_name}{i}")), "prompt": obj["prompt"]})
        out.extend(rows[:n_per_set] if n_per_set else rows)
    if not out:
        raise ValueError("no prompts")
    return out


