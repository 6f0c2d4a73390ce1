"""The documents the code cites are in the repository: every "docs/ALGORITHMS.md section N(.M)" and
"docs/DESIGN.md section N" (or a quoted section title) in cpp/, python/, tests/, tools/, cuda/ and the
README names a section that exists; citations point into docs/ and nothing points outside the
repository; the README's links resolve inside it; DESIGN.md section 7 lists every stats field."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = {"ALGORITHMS.md": ROOT / "docs" / "ALGORITHMS.md", "DESIGN.md": ROOT / "docs" / "DESIGN.md"}
TREES = ("cpp", "python", "tests", "tools", "cuda")
SUFFIXES = {".py", ".cpp", ".h", ".c", ".cu", ".cuh", ".sh", ".txt", ".toml"}

CITATION = re.compile(
    r"(?P<prefix>docs/)?(?P<doc>ALGORITHMS\.md|DESIGN\.md)"
    r"(?:\s+(?:section|sections)\s+(?P<nums>\d+(?:\.\d+)?(?:\s*(?:-|,|and)\s*\d+(?:\.\d+)?)*)"
    r"|\s+\"(?P<title>[^\"]+)\")?")


def sources():
    for tree in TREES:
        for f in sorted((ROOT / tree).rglob("*")):
            if f.is_file() and f.suffix in SUFFIXES and "__pycache__" not in f.parts and f.name != "test_docs.py":
                yield f
    yield ROOT / "README.md"


def sections(doc: str):
    """{"4": title, "4.5": title, ...} of one document's numbered headings."""
    out = {}
    for m in re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)\.? (.+)$", DOCS[doc].read_text(), re.M):
        out[m.group(1)] = m.group(2).strip()
    return out


def citations():
    for f in sources():
        rel = str(f.relative_to(ROOT))
        for lineno, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            for m in CITATION.finditer(line):
                yield rel, lineno, m


def cited_numbers(nums: str):
    parts = re.split(r"\s*(?:,|and)\s*", nums)
    for p in parts:
        if "-" in p:  # "2-3" or "4.5-4.6": a range over the last component
            a, b = (x.strip() for x in p.split("-"))
            head, _, lo = a.rpartition(".")
            hi = b.rpartition(".")[2]
            yield from ((head + "." if head else "") + str(n) for n in range(int(lo), int(hi) + 1))
        else:
            yield p


def test_docs_exist_with_the_stable_section_numbers():
    algo = sections("ALGORITHMS.md")
    for n in range(1, 9):
        assert str(n) in algo, f"docs/ALGORITHMS.md lacks section {n}"
    for n in range(1, 8):
        assert f"4.{n}" in algo, f"docs/ALGORITHMS.md lacks section 4.{n}"
    design = sections("DESIGN.md")
    for n in range(1, 10):
        assert str(n) in design, f"docs/DESIGN.md lacks section {n}"


def test_every_cited_section_exists():
    found, missing = 0, []
    for rel, lineno, m in citations():
        have = sections(m.group("doc"))
        if m.group("nums"):
            for n in cited_numbers(m.group("nums")):
                found += 1
                if n not in have:
                    missing.append(f"{rel}:{lineno}: {m.group(0)} (no section {n})")
        elif m.group("title"):
            found += 1
            if not any(m.group("title").lower() in t.lower() for t in have.values()):
                missing.append(f"{rel}:{lineno}: {m.group(0)} (no section titled so)")
    assert found > 20  # the code does cite the documents
    assert missing == [], "\n".join(missing)


def test_citations_point_into_docs():
    bare = [f"{rel}:{lineno}: {m.group(0)}" for rel, lineno, m in citations()
            if not m.group("prefix")]
    assert bare == [], "\n".join(bare)
    # Any path to the two documents must be the repository's own docs/ (no folder above or beside it).
    path_to_doc = re.compile(r"(?P<path>[\w./-]*/)(?:DESIGN|ALGORITHMS)\.md")
    outside = []
    for f in sources():
        for m in path_to_doc.finditer(f.read_text(errors="replace")):
            if not m.group("path").endswith("docs/") or ".." in m.group("path"):
                outside.append(f"{f.relative_to(ROOT)}: {m.group(0)}")
    assert outside == [], outside


def test_readme_links_stay_in_the_repository():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme) + re.findall(r"`(\.\./[^`]+|docs/[^` ]+)`", readme)
    assert links
    for target in links:
        if target.startswith(("http://", "https://", "#")):
            continue
        path = (ROOT / target.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT), target
        assert path.exists(), target


def test_design_lists_every_stats_field():
    from specgen import GenerationStats

    text = DOCS["DESIGN.md"].read_text()
    section = text[text.index("## 7."):text.index("## 8.")]
    missing = [name for name, _ in GenerationStats.fields() if f"`{name}" not in section]
    assert missing == [], missing


PATH_IN_DOC = re.compile(r"\b((?:cpp|python|tests|tools|cuda|docs|cmake)/[A-Za-z0-9_./{},*-]*[A-Za-z0-9_/}*])")


def _expand(path: str):
    """engine/request.{h,cpp} -> both files; a trailing '/' is a directory."""
    m = re.search(r"\{([^}]*)\}", path)
    if not m:
        yield path
        return
    for alt in m.group(1).split(","):
        yield from _expand(path[:m.start()] + alt + path[m.end():])


@pytest.mark.parametrize("doc", ["DESIGN.md", "ALGORITHMS.md"])
def test_every_path_the_design_names_exists(doc):
    """docs/DESIGN.md is the map of the code: each file or directory it names is in the repository
    (paths relative to the root, or to cpp/src/ where the text names a cpp/src/ subdirectory)."""
    missing = []
    for m in PATH_IN_DOC.finditer(DOCS[doc].read_text()):
        for p in _expand(m.group(1).rstrip(".")):
            if "*" in p:
                if not list(ROOT.glob(p)):
                    missing.append(p)
            elif not (ROOT / p).exists() and not (ROOT / "cpp" / "src" / p).exists():
                missing.append(p)
    assert not missing, f"{doc} names paths that do not exist: {sorted(set(missing))}"


def test_design_names_engine_paths_relative_to_cpp_src():
    """Paths like engine/request.h in docs/DESIGN.md are relative to cpp/src/ and must exist there."""
    text = DOCS["DESIGN.md"].read_text()
    missing = []
    for m in re.finditer(r"(?<![\w/])((?:engine|speculative|model|backend|quant|sampling|tokenizer|gguf|api|python)/[A-Za-z0-9_./{},-]*[A-Za-z0-9_}])", text):
        for p in _expand(m.group(1)):
            if not (ROOT / "cpp" / "src" / p).exists() and not (ROOT / p).exists() and not (ROOT / "python" / "specgen" / p).exists():
                missing.append(p)
    assert not missing, f"DESIGN.md names paths that do not exist: {sorted(set(missing))}"
