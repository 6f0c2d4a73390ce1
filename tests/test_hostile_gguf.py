"""Hostile model files must fail cleanly: every variant of tests/hostile_gguf.py, loaded with
specgen.Generator in a child process (so a crash shows up as a signal instead of killing pytest) under
a timeout and an address-space limit, must raise a specgen.SpecgenError subclass whose message names
the file and the field or problem. Never a signal, a hang, MemoryError or a generic exception.

Variants are grouped per child process to keep the suite fast; see hostile_gguf.py for the list."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
import specgen  # noqa: E402

# Children import the same specgen as this process: the checkout's python/ in a dev build,
# site-packages when installed.
SPECGEN_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(specgen.__file__)))
MEM_LIMIT = 4 << 30  # RLIMIT_AS of the child: an over-allocation fails instead of swapping
TIMEOUT = 120

GROUPS = ["corpus", "tiny-structural", "tiny-semantic", "tiny-nan", "tiny-truncated", "special", "real-patches",
          "real-truncations"]


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))


def run_child(group: str):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SPECGEN_PARENT, HERE,
                                                       os.environ.get("PYTHONPATH", "")]))
    try:
        p = subprocess.run([sys.executable, os.path.join(HERE, "hostile_gguf.py"), group], env=env,
                           capture_output=True, text=True, timeout=TIMEOUT, preexec_fn=_limit)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        starts = [json.loads(l)["start"] for l in out.splitlines() if l.startswith('{"start"')]
        pytest.fail(f"group {group}: timed out after {TIMEOUT}s, last variant started: {starts[-1:]} (hang?)")
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0:
        starts = [l["start"] for l in lines if "start" in l]
        sig = f"signal {signal.Signals(-p.returncode).name}" if p.returncode < 0 else f"exit {p.returncode}"
        pytest.fail(f"group {group}: child died with {sig} while loading {starts[-1:]}\n{p.stderr[-3000:]}")
    return [l for l in lines if "start" not in l]


@pytest.mark.parametrize("group", GROUPS)
def test_hostile_group(group):
    records = run_child(group)
    assert len(records) >= 5, f"group {group} ran only {len(records)} variants"
    bad = []
    for r in records:
        if r["expect"] is None:
            if not r["ok"]:
                bad.append(f"{r['name']}: the unmodified file must load, got {r['exc']}: {r['msg']}")
            continue
        if r["expect"] == ["*"] and (r["ok"] or r["specgen_error"]):
            continue  # corpus files: loading or a typed error are both fine
        if r["ok"]:
            bad.append(f"{r['name']}: loaded without an error")
            continue
        msg = r["msg"]
        if not r["specgen_error"]:
            bad.append(f"{r['name']}: {r['exc']} is not a SpecgenError: {msg[:300]}")
        elif r["exc"] not in ("ModelLoadError",):
            bad.append(f"{r['name']}: expected ModelLoadError, got {r['exc']}: {msg[:300]}")
        elif r["path"] not in msg:
            bad.append(f"{r['name']}: message does not name the file: {msg[:300]}")
        elif not any(e in msg.lower() for e in r["expect"]):
            bad.append(f"{r['name']}: message names none of {r['expect']}: {msg[:300]}")
        if r["seconds"] > 10:
            bad.append(f"{r['name']}: took {r['seconds']} s")
    assert not bad, f"{len(bad)} of {len(records)} variants misbehaved:\n" + "\n".join(bad)
