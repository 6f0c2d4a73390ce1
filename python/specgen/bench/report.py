"""Renders a specgen.bench result: terminal table, CSV, Markdown report and a PNG figure."""
from __future__ import annotations

import csv
import os
from typing import Any, Dict, List, Optional, Sequence

__all__ = ["table", "write_csv", "markdown", "plot", "core_table", "core_markdown"]


def fmt(x: Any, digits: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, float):
        if x != x:
            return "-"
        if abs(x) >= 1000:
            return f"{x:.0f}"
        return f"{x:.{digits}f}"
    return str(x)


def _num(x: Any) -> Optional[float]:
    """A number from the JSON form ("inf" strings included), None when missing."""
    if x is None:
        return None
    if x == "inf":
        return float("inf")
    return float(x)


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]], md: bool = False) -> str:
    if md:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


MAIN_HEADER = ["config", "prefill tok/s", "decode tok/s [p25-p75]", "speedup", "accept", "acc.len",
               "tok/call", "E[tok/call]", "1/(1-a)", "PA bound", "tok/call / PA", "draft%", "verify%", "NanoSpec S",
               "+RSS MB"]


def _main_rows(res: Dict[str, Any], s: str = "all") -> List[List[str]]:
    rows = []
    for c in res["cells"]:
        if c["status"] != "ok" or s not in c["sets"]:
            rows.append([c["label"], c["status"]] + [""] * (len(MAIN_HEADER) - 2))
            continue
        d = c["sets"][s]
        p, b, dec = d["pooled"], d["bounds"], d["decode_tps"]
        rows.append([
            c["label"],
            fmt(d["prefill_tps"]["median"], 1),
            f"{fmt(dec['median'])} [{fmt(dec['p25'])}-{fmt(dec['p75'])}]",
            fmt(d["speedup"]) + ("x" if d["speedup"] is not None else ""),
            fmt(p["acceptance_rate"]),
            fmt(p["mean_accepted_length"]),
            fmt(p["tokens_per_call"]),
            fmt(b["expected_tpc"]),
            fmt(b["classic_limit"]),
            fmt(b["pa_bound"]),
            # no finite bound (greedy with full acceptance possible): the ratio says nothing
            fmt(b["pa_bound_ratio"]) if _num(b["pa_bound"]) != float("inf") else "-",
            fmt(100 * p["draft_fraction"], 0) if p["draft_fraction"] is not None else "-",
            fmt(100 * p["verify_fraction"], 0) if p["verify_fraction"] is not None else "-",
            str(p["vocab_set_size"]) if p["vocab_set_size"] else "-",
            fmt(c.get("load_rss_mb"), 0),
        ])
    return rows


def _speedup_rows(res: Dict[str, Any]):
    sets = res["meta"]["prompt_sets"] + ["all"]
    rows = []
    for c in res["cells"]:
        if c["status"] != "ok":
            continue
        rows.append([c["label"]] + [fmt(c["sets"].get(s, {}).get("speedup")) for s in sets])
    return ["config"] + sets, rows


def _position_rows(res: Dict[str, Any]):
    n = 0
    for c in res["cells"]:
        if c["status"] == "ok" and "all" in c["sets"]:
            n = max(n, len(c["sets"]["all"]["pooled"]["drafted_at"]))
    rows = []
    for c in res["cells"]:
        if c["status"] != "ok" or c["drafter"] == "none" or "all" not in c["sets"]:
            continue
        cond = c["sets"]["all"]["pooled"]["position_acceptance"]["conditional"]
        rows.append([c["label"]] + [fmt(cond[i]) if i < len(cond) else "" for i in range(n)])
    return ["config"] + [f"pos {i + 1}" for i in range(n)], rows


def _ssd_rows(res: Dict[str, Any]):
    """SSD and draft-head details, for the cells that have them (the ssd and nanospec presets' study)."""
    rows = []
    for c in res["cells"]:
        if c["status"] != "ok" or "all" not in c["sets"]:
            continue
        p = c["sets"]["all"]["pooled"]
        if p.get("ssd_hit_rate") is None and not p.get("draft_head_seconds"):
            continue
        pct = lambda x: fmt(100 * x, 1) + "%" if x is not None else "-"
        rows.append([c["label"], pct(p.get("ssd_hit_rate")), fmt(p.get("ssd_branches_per_round")),
                     pct(p.get("ssd_wait_fraction")), pct(p.get("ssd_overlap_fraction")),
                     fmt(p.get("head_ms_per_draft"), 3), str(p["vocab_set_size"]) if p.get("vocab_set_size") else "-"])
    return ["config", "ssd hit", "branches/round", "target wait", "overlap", "head ms/draft", "|S|"], rows


def _auto_rows(res: Dict[str, Any]):
    """draft auto: the policy's predicted decode tok/s next to the measured one, per prompt set."""
    sets = res["meta"]["prompt_sets"] + ["all"]
    rows = []
    for c in res["cells"]:
        if c["status"] != "ok":
            continue
        for s in sets:
            p = c["sets"].get(s, {}).get("pooled", {})
            pred, meas = p.get("auto_predicted_tps"), p.get("auto_measured_tps")
            if pred is None or not meas:
                continue
            rows.append([c["label"], s, fmt(pred), fmt(meas), fmt(pred / meas), fmt(c["sets"][s].get("speedup"))])
    return ["config", "set", "predicted tok/s", "measured tok/s", "predicted/measured", "speedup"], rows


def _auto_vs_best_rows(res: Dict[str, Any]):
    """draft auto against the best fixed configuration of its temperature and threads, per prompt set, by
    decode speed (the speedup table) and by prefill + decode time (NanoSpec's fixed configurations seed S
    in the prefill, auto after the first token)."""
    sets = res["meta"]["prompt_sets"] + ["all"]
    ok = [c for c in res["cells"] if c["status"] == "ok"]
    rows = []
    for a in ok:
        if a["drafter"] != "auto":
            continue
        fixed = [c for c in ok if c["drafter"] not in ("auto", "none") and c["temperature"] == a["temperature"]
                 and c["threads"] == a["threads"]]
        for s in sets:
            line = [a["label"], s]
            for key in ("speedup", "e2e_speedup"):
                scored = [(c["sets"][s][key], c["label"]) for c in fixed if c["sets"].get(s, {}).get(key)]
                mine = a["sets"].get(s, {}).get(key)
                if not scored or not mine:
                    line += ["-", "-"]
                    continue
                best, label = max(scored)
                line += [label, fmt(mine / best)]
            rows.append(line)
    return ["config", "set", "best fixed (decode)", "auto / best", "best fixed (prefill + decode)", "auto / best"], rows


def _peer_rows(res: Dict[str, Any]):
    peer = res.get("peer")
    if not peer or not peer.get("available"):
        return None
    rows = []
    for r in peer["rows"]:
        rows.append([r["label"], fmt(r["prefill_tps"]["median"], 1), fmt(r["decode_tps"]["median"]),
                     r.get("specgen_label") or "-", fmt(r.get("specgen_decode_tps")), fmt(r.get("ratio"))])
    return ["llama.cpp", "prefill tok/s", "decode tok/s", "specgen counterpart", "specgen decode tok/s",
            "specgen / llama.cpp"], rows


def _peer_line(res: Dict[str, Any]) -> str:
    peer = res.get("peer")
    if peer is None:
        return "llama.cpp peer: skipped (--no-peer)."
    if not peer.get("available"):
        return f"llama.cpp peer: not run ({peer.get('reason')})."
    return f"llama.cpp peer: llama-cpp-python {peer.get('version')}, same prompts, threads and max_tokens, greedy."


def _repeats(meta: Dict[str, Any]) -> str:
    sampled = meta.get("repeats_sampled", meta["repeats"])
    extra = f" ({sampled} at T > 0)" if sampled != meta["repeats"] and any(t > 0 for t in meta["temperatures"]) else ""
    return f"{meta['repeats']} repeats{extra}"


def table(res: Dict[str, Any]) -> str:
    m = res["meta"]
    out = [
        f"specgen bench: {m['model_path']}  ({m['n_prompts']} prompts x {_repeats(m)}, "
        f"max_tokens {m['max_tokens']}, {m['cpu']}, {m['affinity'] or m['n_cpus']} CPUs)",
        "",
        _grid(MAIN_HEADER, _main_rows(res)),
        "",
        "speedup (median decode tok/s over plain decoding's, same threads and temperature) per prompt set:",
        _grid(*_speedup_rows(res)),
    ]
    h, rows = _position_rows(res)
    if rows:
        out += ["", "acceptance by draft position (accepted / drafted):", _grid(h, rows)]
    h, rows = _ssd_rows(res)
    if rows:
        out += ["", "SSD and draft head (hit = rounds drafted from the speculation cache; wait = share of decode time "
                    "the target waited for the drafter; overlap = drafter busy / verify time):", _grid(h, rows)]
    h, rows = _auto_rows(res)
    if rows:
        out += ["", "draft auto: the cost model's prediction against the measurement (pooled over the set's runs):",
                _grid(h, rows)]
    h, rows = _auto_vs_best_rows(res)
    if rows:
        out += ["", "draft auto against the best fixed configuration (median speedups over plain decoding's; "
                    "by decode tok/s and by generated tokens over prefill + decode time):", _grid(h, rows)]
    pr = _peer_rows(res)
    out += ["", _peer_line(res)]
    if pr:
        out.append(_grid(*pr))
    out += ["", f"peak RSS {m['peak_rss_mb']:.0f} MiB; elapsed {m['elapsed_seconds']:.0f} s"]
    return "\n".join(out)


CSV_FIELDS = ["label", "config", "drafter", "verify", "gamma", "threads", "temperature", "status", "set", "n_runs",
              "prefill_tps_median", "prefill_tps_p25", "prefill_tps_p75", "decode_tps_median", "decode_tps_p25",
              "decode_tps_p75", "speedup", "acceptance_rate", "mean_accepted_length", "tokens_per_call",
              "alpha", "mu", "mu2", "expected_tpc", "classic_limit", "pa_bound", "pa_bound_ratio",
              "classic_limit_ratio", "expected_tpc_ratio", "draft_seconds", "verify_seconds", "decode_seconds",
              "n_generated", "n_rounds", "n_drafted", "n_accepted", "vocab_set_size", "load_rss_mb",
              "position_acceptance"]


def csv_rows(res: Dict[str, Any]) -> List[Dict[str, Any]]:
    rows = []
    for c in res["cells"]:
        base = {k: c[k] for k in ("label", "config", "drafter", "verify", "gamma", "threads", "temperature",
                                  "status", "load_rss_mb")}
        if c["status"] != "ok":
            rows.append(base)
            continue
        for s, d in c["sets"].items():
            p, b = d["pooled"], d["bounds"]
            row = dict(base, set=s, n_runs=d["n_runs"], speedup=d["speedup"])
            for k in ("prefill_tps", "decode_tps"):
                for q in ("median", "p25", "p75"):
                    row[f"{k}_{q}"] = d[k][q]
            for k in ("acceptance_rate", "mean_accepted_length", "tokens_per_call", "alpha", "mu", "mu2",
                      "draft_seconds", "verify_seconds", "decode_seconds", "n_generated", "n_rounds",
                      "n_drafted", "n_accepted", "vocab_set_size"):
                row[k] = p[k]
            for k in ("expected_tpc", "classic_limit", "pa_bound", "pa_bound_ratio", "classic_limit_ratio",
                      "expected_tpc_ratio"):
                row[k] = b[k]
            row["position_acceptance"] = " ".join(fmt(x, 3) for x in p["position_acceptance"]["conditional"])
            rows.append(row)
    return rows


def write_csv(res: Dict[str, Any], path: str) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in csv_rows(res):
            w.writerow(r)


def plot(res: Dict[str, Any], path: str) -> None:
    """Three panels: conditional acceptance by draft position; median decode tok/s (p25-p75 bars);
    measured tokens per target call against E[tok/call], 1/(1-alpha) and the Pankratov-Alistarh bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [c for c in res["cells"] if c["status"] == "ok" and "all" in c["sets"]]
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))
    ax = axes[0]
    for c in ok:
        if c["drafter"] == "none":
            continue
        cond = c["sets"]["all"]["pooled"]["position_acceptance"]["conditional"]
        xs = [i + 1 for i, v in enumerate(cond) if v is not None]
        ax.plot(xs, [v for v in cond if v is not None], marker="o", label=c["label"])
    ax.set_title("acceptance by draft position")
    ax.set_xlabel("draft position")
    ax.set_ylabel("accepted / drafted")
    ax.set_ylim(-0.02, 1.02)
    if ax.lines:
        ax.legend(fontsize=7)

    ax = axes[1]
    labels = [c["label"] for c in ok]
    med = [c["sets"]["all"]["decode_tps"]["median"] or 0 for c in ok]
    lo = [max(0.0, m - (c["sets"]["all"]["decode_tps"]["p25"] or m)) for m, c in zip(med, ok)]
    hi = [max(0.0, (c["sets"]["all"]["decode_tps"]["p75"] or m) - m) for m, c in zip(med, ok)]
    ax.barh(range(len(ok)), med, xerr=[lo, hi], color=["#888" if c["drafter"] == "none" else "#3a7" for c in ok])
    ax.set_yticks(range(len(ok)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("decode tokens/s (median, p25-p75)")
    ax.set_title("decode speed")

    ax = axes[2]
    sd = [c for c in ok if c["drafter"] != "none"]
    xs = range(len(sd))
    meas = [c["sets"]["all"]["pooled"]["tokens_per_call"] or 0 for c in sd]
    ax.bar(xs, meas, color="#3a7", label="measured tok/call")
    for key, mk, name in (("expected_tpc", "D", "E[tok/call] at gamma"), ("classic_limit", "v", "1/(1-alpha)"),
                          ("pa_bound", "^", "Pankratov-Alistarh (P=gamma+1)")):
        vals = [_num(c["sets"]["all"]["bounds"][key]) for c in sd]
        pts = [(x, v) for x, v in zip(xs, vals) if v is not None and v != float("inf")]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=mk, s=90, zorder=3, label=name)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([c["label"] for c in sd], rotation=30, ha="right", fontsize=7)
    top = max(meas + [v for c in sd for v in (_num(c["sets"]["all"]["bounds"][k]) for k in ("expected_tpc", "classic_limit", "pa_bound")) if v is not None and v != float("inf")] + [1.0])
    ax.set_ylim(0, top * 1.15)
    ax.set_ylabel("tokens per target call")
    ax.set_title("tokens per call vs bounds (inf bounds not drawn)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(res: Dict[str, Any], plot_path: Optional[str] = None, md_path: Optional[str] = None) -> str:
    m = res["meta"]
    out = [
        "# specgen bench report",
        "",
        f"- command: `{m.get('command') or 'specgen.bench.run(...)'}`",
        f"- model: `{m['model_path']}` ({m['bytes_per_token'] / 1e6:.1f} MB read per decode token, vocab {m['n_vocab']})",
        f"- machine: {m['cpu']}, {m['affinity'] or m['n_cpus']} usable CPUs; Python {m['python']}; "
        f"specgen {m['specgen_version']} (git {m.get('git_commit') or '?'})",
        f"- prompts: {m['n_prompts']} from sets {', '.join(m['prompt_sets'])}; max_tokens {m['max_tokens']}; "
        f"{_repeats(m)}; warm-up {'on' if m['warmup'] else 'off'}; seed {m['seed']}",
        f"- started {m['started']}, took {m['elapsed_seconds']:.0f} s; peak RSS {m['peak_rss_mb']:.0f} MiB",
        "",
        "Runs are interleaved round-robin over configurations (per prompt and repeat) so drift in machine speed "
        "hits all of them alike; speedups are ratios of median decode tokens/s against plain decoding measured in "
        "the same run at the same threads and temperature. Counters are pooled over all runs of a configuration.",
        "",
        "## Results (all prompt sets)",
        "",
        _grid(MAIN_HEADER, _main_rows(res), md=True),
        "",
        "Columns: *accept* = accepted / drafted tokens; *acc.len* = 1 + accepted / rounds; *tok/call* = generated "
        "tokens per target (verification) call; *E[tok/call]* = (1 - a^(g+1)) / (1 - a) and *1/(1-a)* its "
        "gamma -> infinity limit, for the measured alpha a = mean sum min(p, q); *PA bound* = Pankratov-Alistarh "
        "leading term (mu + mu2) ln(g + 1) / mu^2 from the entropies of the target rows (`inf` when mu = 0, as at "
        "temperature 0 where the processed target distribution is a point mass); *draft% / verify%* = share of "
        "decode time; *NanoSpec S* = NanoSpec vocabulary size |S|; *+RSS MB* = resident memory added by loading that "
        "configuration's Generator.",
        "",
        "## Speedup per prompt set",
        "",
        _grid(*_speedup_rows(res), md=True),
    ]
    h, rows = _position_rows(res)
    if rows:
        out += ["", "## Acceptance by draft position (accepted / drafted)", "", _grid(h, rows, md=True)]
    h, rows = _ssd_rows(res)
    if rows:
        out += ["", "## SSD and draft head", "", _grid(h, rows, md=True), "",
                "*ssd hit* = rounds whose draft came from the speculation cache; *target wait* = share of decode "
                "time the target waited for the drafter; *overlap* = drafter busy time / verify time; *head ms/draft* "
                "= time in the drafter's LM head per drafted token."]
    out += ["", "## Peer: llama.cpp", "", _peer_line(res)]
    pr = _peer_rows(res)
    if pr:
        out += ["", _grid(*pr, md=True)]
    if plot_path:
        rel = os.path.relpath(plot_path, os.path.dirname(os.path.abspath(md_path))) if md_path else plot_path
        out += ["", "## Figure", "", f"![bench]({rel})"]
    na = [c["label"] for c in res["cells"] if c["status"] != "ok"]
    if na:
        out += ["", "## Not measured", ""] + [f"- {c['label']}: {c['status']}" for c in res["cells"] if c["status"] != "ok"]
    return "\n".join(out) + "\n"


# -- core runtime -------------------------------------------------------------------------------
def _core_rows(res: Dict[str, Any]):
    rows = []
    for r in res["rows"]:
        rows.append([str(r["threads"]), fmt(r["prefill_tps"], 1), fmt(r["decode_tps"]),
                     fmt(r["bandwidth_gbs"], 1), fmt(r["achieved_gbs"], 2),
                     fmt(100 * r["bandwidth_fraction"], 1) if r["bandwidth_fraction"] is not None else "-",
                     fmt(r["bandwidth_limit_tps"], 1)])
    return ["threads", "prefill tok/s", "decode tok/s", "read BW GB/s", "decode GB/s", "% of BW",
            "BW-limit tok/s"], rows


def core_table(res: Dict[str, Any]) -> str:
    return "\n".join([
        f"specgen core: {res['model_path']}",
        f"bytes read per decode token: {res['bytes_per_token'] / 1e6:.1f} MB; prompt {res['n_prompt_tokens']} "
        f"tokens, decode {res['max_tokens']} tokens, median of {res['repeats']}",
        _grid(*_core_rows(res)),
        res["bandwidth_note"],
    ])


def core_markdown(res: Dict[str, Any]) -> str:
    return "\n".join([
        "# specgen core runtime",
        "",
        f"- command: `{res.get('command') or 'specgen.bench.core(...)'}`",
        f"- model: `{res['model_path']}`; {res['bytes_per_token'] / 1e6:.1f} MB read per decode token",
        f"- machine: {res['cpu']}",
        "",
        _grid(*_core_rows(res), md=True),
        "",
        res["bandwidth_note"],
    ]) + "\n"
