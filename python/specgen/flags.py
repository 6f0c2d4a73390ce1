"""The engine's knobs as argparse flags, generated from the parameter table (``_core.param_specs()``:
name, type, range, default, doc and the command-line spellings the native CLI also uses). One place
adds a knob to every front-end: ``specgen serve``, ``specgen -cnv`` (specgen.chat) and the native CLI
all read the same rows; a value is checked by the table as it is parsed, so a bad one is a usage
error naming the flag.

``add_engine_flags(parser, scopes)`` adds one argument per knob (dest = the knob's name, default None =
the engine's default); ``generator_kwargs(ns)`` turns the parsed generator-scope knobs into
``specgen.Generator`` keyword arguments; ``generate_kwargs(ns)`` the generate-scope ones into
``generate()`` keyword arguments.
"""
from __future__ import annotations

import argparse
from typing import Any, Callable, Dict, Iterable, List, Optional

__all__ = ["specs", "default", "add_engine_flags", "generator_kwargs", "generate_kwargs", "fold_llama_cpp_flags", "DRAFT_WORDS"]

# --draft's words; llama.cpp's other --draft (a number: tokens per draft) is read as --draft-max.
DRAFT_WORDS = ("none", "ngram", "self", "model", "auto")


def specs() -> List[Dict[str, Any]]:
    from specgen import _core

    return list(_core.param_specs())


def default(name: str) -> str:
    """The table's default of knob `name`, as text."""
    return next(s["default"] for s in specs() if s["name"] == name)


def _checked(spec: Dict[str, Any], flag: str) -> Callable[[str], Any]:
    """argparse type: the text as the knob's Python type, range-checked by the table."""
    from specgen import _core

    kind = spec["type"]

    def convert(text: str) -> Any:
        try:
            value: Any = int(text) if kind == "integer" else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} expects {'an integer' if kind == 'integer' else 'a number'} "
                                             f"in {spec['range']}, got {text!r}") from None
        try:
            _core.check_param(spec["name"], value)
        except Exception as e:  # the table's message, with the flag's name
            raise argparse.ArgumentTypeError(str(e).replace(spec["name"], flag, 1)) from None
        return value

    convert.__name__ = spec["type"]
    return convert


def _draft(text: str) -> str:
    if text in DRAFT_WORDS or text.isdigit():
        return text
    raise argparse.ArgumentTypeError(
        f"--draft must be one of {', '.join(DRAFT_WORDS)} (a draft model goes with -md), got {text!r}")


def _help(spec: Dict[str, Any]) -> str:
    text = spec["doc"]
    if spec["default"]:
        text += f" (default: {spec['default']})"
    return text.replace("%", "%%")


def add_engine_flags(parser: argparse.ArgumentParser, scopes: Iterable[str] = ("generator",),
                     skip: Iterable[str] = ()) -> None:
    """One argument per knob of `scopes` with command-line spellings, in argument groups by the
    table's help group; `skip` names knobs the front-end spells itself."""
    skip = set(skip)
    groups: Dict[str, Any] = {}
    titles = {"engine": "engine", "sampling": "sampling (per request)",
              "speculative": "speculative decoding (lossless)"}
    for spec in specs():
        if spec["scope"] not in scopes or spec["name"] in skip or not spec["flags"]:
            continue
        group = groups.get(spec["group"])
        if group is None:
            group = groups[spec["group"]] = parser.add_argument_group(titles[spec["group"]])
        name, kind, flags = spec["name"], spec["type"], list(spec["flags"])
        kw: Dict[str, Any] = dict(dest=name, default=None, help=_help(spec))
        if kind in ("flag", "toggle"):  # the table's last spelling is --no-<name>
            positive, negative = flags[:-1], flags[-1]
            if kind == "flag":
                group.add_argument(*positive, action="store_const", const=True, **kw)
            else:  # llama.cpp's -fa: a bare flag is on, or on|off|auto
                group.add_argument(*positive, nargs="?", const="on", choices=spec["choices"], metavar="on|off|auto", **kw)
            group.add_argument(negative, dest=name, action="store_const", const=False if kind == "flag" else "off",
                               help=argparse.SUPPRESS)
            continue
        if name == "draft_kind":
            kw.update(type=_draft, metavar="|".join(w for w in DRAFT_WORDS if w != "model"))
        elif kind == "choice":
            kw.update(choices=spec["choices"])
        elif kind in ("integer", "number"):
            label = next((f for f in flags if f.startswith("--")), flags[0])
            kw.update(type=_checked(spec, label), metavar="N" if kind == "integer" else "F")
        elif name == "stop":
            kw.update(action="append", metavar="STR")
        else:
            kw.update(metavar="DEV" if name == "device" else "PATH")
        group.add_argument(*flags, **kw)


def _given(ns: argparse.Namespace, scope: str) -> Dict[str, Any]:
    return {s["name"]: getattr(ns, s["name"]) for s in specs()
            if s["scope"] == scope and getattr(ns, s["name"], None) is not None}


def generator_kwargs(ns: argparse.Namespace, default_draft: str = "none",
                     notes: Optional[List[str]] = None) -> Dict[str, Any]:
    """Generator keyword arguments of the parsed flags: the knobs given, and the drafter from --draft
    / -md (default_draft when neither). Raises ValueError for -md with another --draft kind. A note
    for the user (llama.cpp's --draft N read as --draft-max N) is appended to `notes`."""
    kw = _given(ns, "generator")
    kind, path = kw.pop("draft_kind", None), kw.pop("draft_model", None)
    if kind is not None and kind.isdigit():  # llama.cpp's --draft N
        kw.setdefault("draft_max", int(kind))
        if notes is not None:
            notes.append(f"--draft {kind} is llama.cpp's tokens per draft: read as --draft-max {kind} (--draft "
                         "takes a drafter kind here: none, ngram, self, auto; a draft model goes with -md)")
        kind = None
    if path is not None and kind not in (None, "model", "auto"):
        raise ValueError("give either -md/--model-draft or --draft, not both (or --draft auto -md PATH)")
    if path is not None and kind == "auto":  # the draft model is one of auto's candidates
        kw["draft_kind"], kw["draft_model"] = "auto", path
    elif path is not None:
        kw["draft_kind"], kw["draft_model"] = "model", path
    elif kind == "model":
        raise ValueError("--draft model needs the draft GGUF: -md PATH")
    else:
        # An EAGLE-3 head drafts by itself: no default drafter next to it.
        kw["draft_kind"] = kind or ("none" if kw.get("draft_head") else default_draft)
    return kw


def generate_kwargs(ns: argparse.Namespace) -> Dict[str, Any]:
    """generate() keyword arguments of the parsed generate-scope flags that were given."""
    return _given(ns, "generate")


def fold_llama_cpp_flags(ns: argparse.Namespace, gen_kwargs: Dict[str, Any], notes: List[str]) -> None:
    """Folds -hf and -ngl into the Generator keyword arguments (ValueError for -m with -hf); notes for
    the user go to ``notes``."""
    if ns.hf_repo is not None:
        if gen_kwargs.get("model") is not None:
            raise ValueError("give either -m/--model or -hf/--hf-repo, not both")
        gen_kwargs["model"] = ns.hf_repo
    if ns.flash_attn is not None:
        notes.append("-fa is accepted and ignored: attention is one fused pass here")
    if ns.n_gpu_layers and gen_kwargs.get("device") in (None, "cpu"):
        from specgen import _core

        if _core.cuda_device_count() > 0:
            gen_kwargs["device"] = "cuda"
        else:
            notes.append(f"-ngl {ns.n_gpu_layers}: no usable CUDA device (or a build without CUDA); running on the CPU")
