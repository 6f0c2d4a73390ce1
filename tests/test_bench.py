"""specgen.bench: statistics and bounds against hand-computed values, the configuration grammar,
reports on a synthetic result, and one tiny end-to-end run on the reference model."""
import csv
import json
import math

import pytest

from specgen import bench
from specgen.bench import report as bench_report
from specgen.bench.stats import pool_runs, position_acceptance, ratio, speed_of_light, spread

# Two runs of a speculative configuration, counters chosen by hand.
S1 = dict(n_prompt_tokens=5, n_generated=10, prefill_seconds=0.5, decode_seconds=2.0, n_rounds=4, n_drafted=12,
          n_accepted=6, drafted_at=[4, 4, 4], accepted_at=[3, 2, 1], draft_seconds=0.5, verify_seconds=1.5,
          n_target_rows=10, sum_entropy=5.0, sum_entropy2=15.0, sum_alpha=2.0, n_alpha=4, vocab_set_size=0,
          prefill_tokens_per_second=10.0, decode_tokens_per_second=5.0)
S2 = dict(n_prompt_tokens=5, n_generated=6, prefill_seconds=0.5, decode_seconds=2.0, n_rounds=2, n_drafted=4,
          n_accepted=4, drafted_at=[2, 2], accepted_at=[2, 2], draft_seconds=0.5, verify_seconds=1.5,
          n_target_rows=6, sum_entropy=3.0, sum_entropy2=9.0, sum_alpha=2.0, n_alpha=2, vocab_set_size=7,
          prefill_tokens_per_second=10.0, decode_tokens_per_second=3.0)


def test_spread_median_quartiles():
    s = spread([4.0, 1.0, 3.0, 2.0])
    assert s["median"] == 2.5 and s["p25"] == 1.75 and s["p75"] == 3.25
    assert s["min"] == 1.0 and s["max"] == 4.0 and s["n"] == 4
    assert s["rel_iqr"] == pytest.approx(1.5 / 2.5)
    assert spread([float("nan"), 2.0])["median"] == 2.0
    assert spread([])["n"] == 0 and math.isnan(spread([])["median"])


def test_ratio():
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(None, 2.0) is None and ratio(1.0, 0.0) is None and ratio(float("nan"), 1.0) is None


def test_position_acceptance():
    pa = position_acceptance([6, 6, 4], [5, 4, 1], 6)
    assert pa["conditional"] == pytest.approx([5 / 6, 4 / 6, 1 / 4])
    assert pa["reach"] == pytest.approx([5 / 6, 4 / 6, 1 / 6])
    assert math.isnan(position_acceptance([0], [0], 0)["conditional"][0])


def test_pool_runs_hand_computed():
    p = pool_runs([S1, S2])
    assert p["n_generated"] == 16 and p["n_rounds"] == 6 and p["n_drafted"] == 16 and p["n_accepted"] == 10
    assert p["drafted_at"] == [6, 6, 4] and p["accepted_at"] == [5, 4, 1]
    assert p["acceptance_rate"] == pytest.approx(0.625)
    assert p["mean_accepted_length"] == pytest.approx(1 + 10 / 6)
    assert p["tokens_per_call"] == pytest.approx(16 / 6)
    assert sum(p["position_acceptance"]["reach"]) + 1 == pytest.approx(p["mean_accepted_length"])
    assert p["alpha"] == pytest.approx(4 / 6)
    assert p["mu"] == pytest.approx(0.5) and p["mu2"] == pytest.approx(1.5)
    assert p["vocab_set_size"] == 7
    assert p["draft_fraction"] == pytest.approx(0.25) and p["ms_per_round"] == pytest.approx(1e3 * 4 / 6)


def test_pool_runs_plain_decoding():
    ar = dict(n_generated=8, decode_seconds=1.0, n_target_rows=8)
    p = pool_runs([ar, ar])
    assert p["tokens_per_call"] == 1.0 and p["mean_accepted_length"] == 1.0
    assert p["acceptance_rate"] is None and p["alpha"] is None


def test_speed_of_light_hand_computed():
    b = speed_of_light(pool_runs([S1, S2]), gamma=3)
    # (mu + mu2) ln(P) / mu^2 = (0.5 + 1.5) ln 4 / 0.25
    assert b["pa_bound"] == pytest.approx(8 * math.log(4))
    assert b["classic_limit"] == pytest.approx(3.0)  # 1 / (1 - 2/3)
    assert b["expected_tpc"] == pytest.approx(3 * (1 - (2 / 3) ** 4))  # (1 - a^4) / (1 - a)
    assert b["pa_bound_ratio"] == pytest.approx((16 / 6) / (8 * math.log(4)))
    assert b["classic_limit_ratio"] == pytest.approx((16 / 6) / 3)
    # Greedy: mu = 0, the entropy bound is vacuous.
    g = speed_of_light(dict(tokens_per_call=2.0, alpha=0.5, mu=0.0, mu2=0.0), gamma=4)
    assert g["pa_bound"] == math.inf and g["pa_bound_ratio"] == 0.0
    assert g["expected_tpc"] == pytest.approx((1 - 0.5 ** 5) / 0.5)
    assert speed_of_light(dict(tokens_per_call=1.0), gamma=None)["pa_bound"] is None


def test_bounds_module_formulas():
    from specgen import bounds

    assert bounds.pankratov_alistarh_bound(1.0, 2.0, 5) == pytest.approx(3 * math.log(5))
    assert bounds.expected_tokens_per_call(0.5, 3) == pytest.approx(1.875)
    assert bounds.tokens_per_call_limit(0.5) == pytest.approx(2.0)


def test_parse_config():
    c = bench.parse_config("self6:token")
    assert (c.draft, c.self_layers, c.verify, c.nanospec) == ("self", 6, "token", False)
    assert bench.parse_config("ngram").name == "ngram:block"
    assert bench.parse_config("nanospec4:g4").nanospec and bench.parse_config("nanospec4:g4").gamma == 4
    assert bench.parse_config("ssd6").ssd and bench.parse_config("frspec").frspec == 16384
    assert bench.parse_config("model=org/repo:Q4_K_M:token").draft == "org/repo:Q4_K_M"
    assert bench.parse_config("ar").is_ar
    c = bench.parse_config("ssd:ns:k16")
    assert c.ssd and c.nanospec and c.nanospec_topk == 16 and c.name == "ssd:ns:k16:block"
    c = bench.parse_config("ssd:ns:k16:f1:fast:g3")
    assert (c.ssd_fanout, c.ssd_backup, c.gamma, c.name) == (1, "fast", 3, "ssd:ns:k16:f1:fast:block:g3")
    c = bench.parse_config("nanospec:k8:g4")
    assert c.nanospec and not c.ssd and c.nanospec_topk == 8 and c.name == "nanospec:k8:block:g4"
    for bad in ("ngram:k16", "self6:k0", "frspec:ns", "nanospec:k65", "self:f2", "nanospec:fast", "ssd:f0"):
        with pytest.raises(ValueError):
            bench.parse_config(bad)
    c = bench.parse_config("head:ns:k8:token")
    assert (c.draft, c.draft_head, c.nanospec, c.nanospec_topk, c.verify) == (None, True, True, 8, "token")
    assert not c.is_ar and c.name == "head:ns:k8:token"
    c = bench.parse_config("auto:head:ns")
    assert (c.draft, c.draft_head, c.nanospec, c.name) == ("auto", True, True, "auto:head:ns:block")
    assert not bench.parse_config("auto").draft_head and bench.parse_config("head:p0.4").draft_p_min == 0.4
    for bad in ("auto:ns", "self:head", "ngram:head", "head:f2", "head:noreuse"):
        with pytest.raises(ValueError):
            bench.parse_config(bad)
    with pytest.raises(ValueError):
        bench.parse_config("medusa")
    with pytest.raises(ValueError):
        bench.parse_config("ar:token")


def test_expand_adds_ar_and_crosses_dimensions():
    cells = bench.expand([bench.parse_config("ngram:token"), bench.parse_config("self6:g2")], [4, 8], [1, 2], [0.0])
    labels = [c.label for c in cells]
    assert labels[:2] == ["ar t1 T0", "ar t2 T0"]
    assert "ngram:token g4 t2 T0" in labels and "ngram:token g8 t1 T0" in labels
    assert sum(1 for c in cells if c.config.self_layers == 6) == 2  # gamma fixed by :g2
    assert len(cells) == 2 + 4 + 2


def test_prompt_sets_ship_and_user_file(tmp_path):
    rows = bench.load_prompts()
    assert {r["set"] for r in rows} == set(bench.PROMPT_SETS)
    assert all(r["prompt"].strip() for r in rows)
    f = tmp_path / "mine.jsonl"
    f.write_text(json.dumps({"prompt": "hello"}) + "\n\n" + json.dumps({"prompt": "x", "id": "b"}) + "\n")
    mine = bench.load_prompts(str(f))
    assert [(r["set"], r["id"]) for r in mine] == [("mine", "mine0"), ("mine", "b")]
    with pytest.raises(FileNotFoundError):
        bench.load_prompts("nope")


def _synthetic_result():
    cells = bench.expand([bench.parse_config("ngram")], [3], [2], [0.0])
    ar, sd = cells
    runs = []
    for i, (a, s) in enumerate([(2.0, 5.0), (4.0, 3.0), (3.0, 4.0)]):
        st_ar = dict(S1, n_rounds=0, n_drafted=0, n_accepted=0, drafted_at=[], accepted_at=[], n_alpha=0,
                     decode_tokens_per_second=a)
        for cell, st in ((ar, st_ar), (sd, dict(S1, decode_tokens_per_second=s))):
            runs.append(dict(label=cell.label, set="code" if i < 2 else "chat", prompt_id=str(i), stats=st))
    status = {ar: "ok", sd: "ok"}
    na = bench.expand([bench.parse_config("nanospec6")], [3], [2], [0.0])[1]
    status[na] = bench.NOT_IMPLEMENTED
    out = bench.summarise([ar, sd, na], status, runs)
    meta = dict(model_path="m.gguf", n_prompts=3, repeats=1, max_tokens=8, cpu="cpu", affinity=2, n_cpus=2,
                peak_rss_mb=1.0, elapsed_seconds=1.0, prompt_sets=["chat", "code"], bytes_per_token=1e6,
                n_vocab=10, python="3", specgen_version="0", warmup=True, seed=0, started="now", command="x")
    return bench._finite({"meta": meta, "cells": out, "runs": runs, "peer": {"available": False, "reason": "r"}})


def test_summarise_speedup_is_ratio_of_medians(tmp_path):
    res = _synthetic_result()
    ar, sd, na = res["cells"]
    assert sd["sets"]["all"]["speedup"] == pytest.approx(4.0 / 3.0)  # median(5,3,4) / median(2,4,3)
    assert sd["sets"]["code"]["speedup"] == pytest.approx(4.0 / 3.0)  # median(5,3) / median(2,4)
    assert sd["sets"]["chat"]["speedup"] == pytest.approx(4.0 / 3.0)
    assert ar["sets"]["all"]["speedup"] == 1.0
    assert sd["sets"]["all"]["pooled"]["n_generated"] == 30
    assert na["status"] == bench.NOT_IMPLEMENTED and na["sets"] == {}
    text = bench_report.table(res)
    assert "n/a (not implemented)" in text and "ngram:block g3 t2 T0" in text
    md = bench_report.markdown(res)
    assert md.startswith("# specgen bench report") and "| ngram:block g3 t2 T0 |" in md
    bench_report.write_csv(res, tmp_path / "r.csv")
    rows = list(csv.DictReader(open(tmp_path / "r.csv")))
    assert {r["set"] for r in rows if r["status"] == "ok"} == {"code", "chat", "all"}
    json.dumps(res, allow_nan=False)  # strict JSON: no inf / NaN literals


def test_auto_against_the_best_fixed_configuration_by_decode_and_end_to_end():
    """auto's row compares it with the best fixed configuration of its temperature, once by decode speed
    and once by tokens over prefill + decode (a fixed NanoSpec configuration seeds S in the prefill)."""
    cells = bench.expand([bench.parse_config(c) for c in ("ngram", "nanospec", "auto")], [8], [2], [0.0])
    ar, ngram, nano, auto = cells
    # (prefill s, decode s) of 10 tokens: nanospec decodes fastest but pays 2 s of prefill
    times = {ar: (0.5, 5.0), ngram: (0.5, 2.5), nano: (2.5, 1.0), auto: (0.5, 1.25)}
    runs = [dict(label=c.label, set="code", prompt_id="p", stats=dict(S1, prefill_seconds=p, decode_seconds=d,
                                                                       decode_tokens_per_second=10 / d))
            for c, (p, d) in times.items()]
    res = bench._finite({"meta": dict(prompt_sets=["code"]), "cells": bench.summarise(cells, {c: "ok" for c in cells}, runs)})
    header, rows = bench_report._auto_vs_best_rows(res)
    by_set = {r[1]: r for r in rows}
    assert by_set["code"] == [auto.label, "code", nano.label, "0.80", ngram.label, "1.71"]  # 1.0 / 1.25, 3.0 / 1.75
    assert res["cells"][3]["sets"]["code"]["e2e_speedup"] == pytest.approx(5.5 / 1.75)


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    bench_report.plot(_synthetic_result(), str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_end_to_end_tiny(tmp_path, model_path):
    model = str(model_path)
    f = tmp_path / "one.jsonl"
    f.write_text(json.dumps({"id": "rep", "prompt": "one two three one two three one two"}) + "\n")
    res = bench.run(model, "ar,ngram", str(f), max_tokens=8, threads=[2], warmup=False, peer=False,
                    progress=False)
    res = json.loads(json.dumps(res, allow_nan=False))
    assert set(res) == {"meta", "cells", "runs", "peer"}
    assert res["meta"]["bytes_per_token"] > 0 and res["meta"]["peak_rss_mb"] > 0
    labels = [c["label"] for c in res["cells"]]
    assert labels == ["ar t2 T0", "ngram:block g8 t2 T0"]
    assert len(res["runs"]) == 2
    for c in res["cells"]:
        assert c["status"] == "ok"
        d = c["sets"]["all"]
        assert d["decode_tps"]["median"] > 0 and d["prefill_tps"]["median"] > 0
        assert 1 <= d["pooled"]["n_generated"] <= 8
        assert d["speedup"] > 0
    ar, sd = res["cells"]
    assert ar["sets"]["all"]["speedup"] == 1.0 and ar["sets"]["all"]["pooled"]["tokens_per_call"] == 1.0
    p = sd["sets"]["all"]["pooled"]
    assert p["n_rounds"] >= 1 and 1.0 <= p["tokens_per_call"] <= 9.0
    assert p["n_accepted"] <= p["n_drafted"]
    # Greedy is lossless: both configurations produce the same continuation length.
    assert ar["sets"]["all"]["pooled"]["n_generated"] == p["n_generated"]


def test_sampled_cells_get_their_own_repeats(tmp_path, model_path):
    """--repeats-sampled: the cells at T > 0 run that many seeds, the greedy ones --repeats; every
    sampled repeat is a new seed (a new text), and the header says both counts."""
    f = tmp_path / "one.jsonl"
    f.write_text(json.dumps({"id": "rep", "prompt": "one two three one two three one two"}) + "\n")
    res = bench.run(str(model_path), "ar", str(f), max_tokens=6, threads=[2], temperatures="0,1", repeats=1,
                    repeats_sampled=3, warmup=False, peer=False, progress=False)
    by_temp = {t: [r for r in res["runs"] if r["temperature"] == t] for t in (0.0, 1.0)}
    assert len(by_temp[0.0]) == 1 and len(by_temp[1.0]) == 3
    assert len({r["stats"]["seed"] for r in by_temp[1.0]}) == 3
    assert res["meta"]["repeats_sampled"] == 3
    assert "1 prompts x 1 repeats (3 at T > 0)" in bench_report.table(res)


def test_prefill_figures_come_only_from_computed_prompts(tmp_path, model_path):
    """The warm-up runs a prompt of its own, so a measured prompt is never in the slot's KV cache at its
    first run; a repeat of the same prompt, whose rows the cache held, gives no prefill figure (it computed
    one row in no time: millions of tokens/s)."""
    f = tmp_path / "one.jsonl"
    f.write_text(json.dumps({"id": "rep", "prompt": "one two three one two three one two"}) + "\n")
    res = bench.run(str(model_path), "ar", str(f), max_tokens=4, threads=[2], repeats=2, warmup=True, peer=False,
                    progress=False)
    first, second = res["runs"]
    assert first["stats"]["n_prompt_tokens_cached"] <= 1  # BOS at most: the warm-up did not pre-fill it
    assert second["stats"]["n_prompt_tokens_cached"] >= second["stats"]["n_prompt_tokens"] - 1  # the repeat: cached
    prefill = res["cells"][0]["sets"]["all"]["prefill_tps"]
    assert prefill["n"] == 1 and prefill["median"] == pytest.approx(first["stats"]["prefill_tokens_per_second"])
    # The same rule on hand-made runs: a cached prompt's figure is left out, a computed one counts.
    cells = bench.expand([bench.parse_config("ar")], [8], [2], [0.0])
    runs = [dict(label=cells[0].label, set="s", prompt_id="p", stats=dict(S1, n_prompt_tokens_cached=c,
                                                                           prefill_tokens_per_second=v))
            for c, v in ((0, 10.0), (1, 20.0), (4, 2_777_779.0))]
    out = bench.summarise(cells, {cells[0]: "ok"}, runs)
    assert out[0]["sets"]["all"]["prefill_tps"]["n"] == 2 and out[0]["sets"]["all"]["prefill_tps"]["max"] == 20.0
