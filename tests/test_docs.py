"""The documentation keeps up with the code, and the repository carries what it needs.

- docs/operations.md's settings reference is the one the settings model generates (`make docs`),
  and every setting says when to change it;
- every path docs/architecture.md names exists (and a `file.py: Name` is defined there);
- every link between documents resolves inside the repository;
- no tracked file reads or names a path outside the repository;
- docs/ says what is true now: no dated sections, and short enough to be read.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from pipeline.cli.config import BEGIN, END, reference
from pipeline.settings import GROUPS, Settings, own_fields

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
# The documents a reader is pointed at: every page of docs/ and the Markdown files beside code.
MARKDOWN = sorted({*DOCS.glob("*.md"), *REPO.glob("*.md"), *REPO.glob("*/README.md")})
# docs/search.md (the search request language, ~130 lines) is most of the growth past 1,900;
# docs/time.md (~110), supplied structure and the entity pages (~60) and conversations in the
# entity graph (~35) and two benchmark tables (~40) the growth past 2,060; docs/scaling.md
# (~115: per-instance limits, hosts, the 100M arithmetic), lexical replicas and standby reads
# and their benchmarks (~50) past 2,340, less what was history (the entity projection's record)
DOCS_MAX_LINES = 2500


def _tracked() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    return [REPO / name for name in names]


def test_the_settings_reference_is_generated_from_the_model() -> None:
    text = (DOCS / "operations.md").read_text()
    block = text.partition(BEGIN)[2].partition(END)[0].strip()
    assert block == reference(), "docs/operations.md's settings reference is stale: `make docs`"


def test_every_setting_is_in_one_group_and_says_when_to_change_it() -> None:
    grouped = [name for _, group in GROUPS for name in own_fields(group)]
    assert sorted(grouped) == sorted(Settings.model_fields)
    # 81-83: LEXICAL_REPLICA_MAX_LAG, POSTGRES_READ_DSN and POSTGRES_READ_MAX_LAG: where a read
    # host reads, and how stale its lexical replica and its standby may be and still serve
    assert len(grouped) <= 83, "a new setting needs an operator who would change it"
    vague = [name for name in grouped
             if len((Settings.model_fields[name].description or "").split()) < 6]
    assert not vague, f"settings without a description of when to change them: {vague}"


# `pipeline/x.py`, `api/routes/`, `pipeline/x.py: Name`, `Name.method` after a path
_PATH = re.compile(r"`((?:pipeline|api|consumers|workers|schemas|migrations|tests|bench|client|"
                   r"compose|examples|docs)/[\w./-]*)(?::\s*([\w.]+))?`")


def _defines(path: Path, dotted: str) -> bool:
    tree = ast.parse(path.read_text())
    names = {node.name for node in ast.walk(tree)
             if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    names |= {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
              for target in node.targets if isinstance(target, ast.Name)}
    return all(part in names for part in dotted.split("."))


def test_every_path_the_architecture_names_exists() -> None:
    text = (DOCS / "architecture.md").read_text()
    missing, undefined = [], []
    for match in _PATH.finditer(text):
        path, name = REPO / match.group(1).rstrip("."), match.group(2)
        if not path.exists():
            missing.append(match.group(1))
        elif name and path.suffix == ".py" and not _defines(path, name):
            undefined.append(f"{match.group(1)}: {name}")
    assert len(list(_PATH.finditer(text))) > 50, "the pattern no longer finds the paths"
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
    assert not undefined, f"docs/architecture.md names what those files do not define: {undefined}"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", MARKDOWN, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_resolves_inside_the_repository(doc: Path) -> None:
    broken = []
    for target in _LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL, or an anchor of the same page
        path = (doc.parent / target.split("#")[0]).resolve()
        if not path.is_relative_to(REPO) or not path.exists():
            broken.append(target)
    assert not broken, f"{doc.relative_to(REPO)} links to what the repository lacks: {broken}"


_OUTSIDE = re.compile(r"\.\./shared\b|\bREPO\.parent\b|/work/shared|\bshared/(?:examples|datasets)")
_PARENTS = re.compile(r"Path\(__file__\)\.resolve\(\)\.parents\[(\d+)\]((?:\.parent)*)")


def test_no_tracked_file_reaches_outside_the_repository() -> None:
    offenders = []
    for path in _tracked():
        if path.suffix in (".png", ".svg", ".gz", ".json") or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        rel = path.relative_to(REPO)
        offenders += [f"{rel}: {m.group(0)}" for m in _OUTSIDE.finditer(text)
                      if rel != Path("tests/test_docs.py")]
        for m in _PARENTS.finditer(text):
            root = path.resolve().parents[int(m.group(1))]
            for _ in range(m.group(2).count(".parent")):
                root = root.parent
            if not root.is_relative_to(REPO):
                offenders.append(f"{rel}: {m.group(0)} is {root}")
    assert not offenders, "files that read outside the repository:\n" + "\n".join(offenders)


def test_the_docs_say_what_is_true_now() -> None:
    dated = [f"{p.name}: {m.group(0)}" for p in DOCS.glob("*.md")
             for m in re.finditer(r"\b20\d\d-\d\d-\d\d\b", p.read_text())]
    assert not dated, f"dated sections belong in git history, not docs/: {dated}"
    lines = sum(len(p.read_text().splitlines()) for p in DOCS.glob("*.md"))
    assert lines <= DOCS_MAX_LINES, f"docs/ holds {lines} lines: what is true now, briefly"
