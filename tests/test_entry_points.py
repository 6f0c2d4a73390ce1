"""Every entry point as a new user meets it: specgen-convert without its extra or with a folder that
does not exist, `specgen -f DIRECTORY`, the CLI's output on a terminal, the README's install lines.
A failure is one line `<prog>: error: ...` and a non-zero exit, never a traceback."""
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _env(*extra_paths):
    import specgen

    env = dict(os.environ)
    parts = [str(p) for p in extra_paths] + [str(Path(specgen.__file__).resolve().parent.parent)]
    env["PYTHONPATH"] = os.pathsep.join(parts + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def blocker(tmp_path, *modules):
    """A PYTHONPATH entry whose sitecustomize makes importing `modules` fail, as without their extra."""
    d = tmp_path / "block"
    d.mkdir(exist_ok=True)
    (d / "sitecustomize.py").write_text(
        "import sys\n"
        f"_BLOCKED = {modules!r}\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in _BLOCKED:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Block())\n")
    return d


def assert_one_line_error(r, prog, contains, code=1):
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"{prog}: error: ") and contains in lines[0], lines[0]
    assert "Traceback" not in r.stderr


def convert(*args, env):
    return subprocess.run([sys.executable, "-m", "specgen.convert", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_convert_without_its_extra_names_it(tmp_path):
    (tmp_path / "ckpt").mkdir()
    r = convert(str(tmp_path / "ckpt"), "--outfile", str(tmp_path / "x.gguf"), env=_env(blocker(tmp_path, "gguf")))
    assert_one_line_error(r, "specgen-convert", 'pip install "specgen[convert]"')


def test_convert_missing_folder_is_one_line(tmp_path):
    for env in (_env(), _env(blocker(tmp_path, "gguf", "safetensors"))):
        r = convert(str(tmp_path / "nope"), "--outfile", str(tmp_path / "x.gguf"), env=env)
        assert_one_line_error(r, "specgen-convert", "no such directory")
    f = tmp_path / "file.txt"
    f.write_text("x")
    assert_one_line_error(convert(str(f), "--outfile", str(tmp_path / "x.gguf"), env=_env()), "specgen-convert",
                          "not a directory")
    r = convert(str(tmp_path), env=_env())  # --outfile missing: argparse's error, one line too
    assert_one_line_error(r, "specgen-convert", "--outfile", code=2)


def test_readme_convert_line_names_the_extra():
    lines = (ROOT / "README.md").read_text().splitlines()
    uses = [i for i, ln in enumerate(lines) if "specgen-convert " in ln]
    assert uses
    for i in uses:
        assert any(re.search(r'pip install "(specgen|\.)\[convert\]"', ln) for ln in lines[max(0, i - 1):i + 1]), lines[i]


def test_cli_prompt_file_that_is_a_directory(cli, model_path, tmp_path):
    r = subprocess.run([cli, "-m", str(model_path), "-f", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip() == f"specgen: error: cannot read prompt file '{tmp_path}': it is a directory"


def test_cli_output_on_a_terminal_ends_with_a_newline(cli, model_path):
    """On a terminal the continuation ends with a newline (the shell prompt starts on its own line);
    into a pipe stdout stays exactly the continuation."""
    args = [cli, "-m", str(model_path), "-p", "The capital of France is", "-n", "3", "--temp", "0", "-t", "1"]
    piped = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stdout and not piped.stdout.endswith("\n")
    master, slave = pty.openpty()
    p = subprocess.Popen(args, stdout=slave, stderr=subprocess.DEVNULL, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(timeout=120) == 0
    text = out.decode("utf-8", "replace").replace("\r\n", "\n")
    assert text == piped.stdout + "\n"
