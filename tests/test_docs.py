"""The README and docs/ stay true of the repository: links lead somewhere, the commands they
show exist, and the file paths and `anakin.*` names they cite are real. Cheap: nothing here
trains (tests/test_own_env.py runs the README's own-environment example)."""

import importlib
import re
from pathlib import Path

import pytest

from anakin.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
IDS = [str(p.relative_to(ROOT)) for p in PAGES]

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`[^`]+`")  # may wrap onto the next line, as Markdown allows
# `anakin SUBCOMMAND` where a shell line runs it: at the start, or after &&, ;, | or a prompt.
SHELL_ANAKIN = re.compile(r"(?:^|&&|;|\||\$|!)\s*anakin\s+([A-Za-z][\w-]*)", re.M)
# A repository path in inline code: a top-level folder, then plain names (no <placeholder>).
REPO_PATH = re.compile(r"^(?:anakin|envs|algorithms|scripts|tests|docs|\.ci)/(?:[\w.-]+/?)*$")
# A name under anakin in inline code, alone or called: `anakin.envs.register(name, factory)`.
DOTTED = re.compile(r"^(anakin(?:\.[A-Za-z_]\w*)+)(?:\(.*\))?$")


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block."""
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(text)]


def prose(text: str) -> str:
    """The text without fenced blocks and inline code."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_relative_link_points_at_a_file_that_exists(page):
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_anakin_command_shown_is_a_real_subcommand(page):
    shown = [
        sub
        for lang, body in code_blocks(page.read_text())
        if lang in ("", "bash", "sh", "console", "shell")
        for sub in SHELL_ANAKIN.findall(body)
    ]
    unknown = sorted(set(shown) - set(COMMANDS))
    assert not unknown, f"{page.name} shows `anakin {unknown[0]}`; commands: {', '.join(COMMANDS)}"


def test_the_readme_shows_commands():
    blocks = code_blocks((ROOT / "README.md").read_text())
    shown = {s for _, body in blocks for s in SHELL_ANAKIN.findall(body)}
    assert {"train", "evaluate", "envs"} <= shown


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_repository_path_cited_exists(page):
    cited = {
        code.strip("`")
        for code in INLINE_CODE.findall(FENCE.sub("", page.read_text()))
        if REPO_PATH.match(code.strip("`"))
    }
    missing = sorted(p for p in cited if not (ROOT / p).exists())
    assert not missing, f"{page.name} cites {missing}, which do not exist"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_anakin_name_cited_resolves(page):
    cited = {
        m.group(1)
        for code in INLINE_CODE.findall(FENCE.sub("", page.read_text()))
        if (m := DOTTED.match(code.strip("`")))
    }
    missing = [name for name in sorted(cited) if not _resolves(name)]
    assert not missing, f"{page.name} names {missing}, which anakin does not have"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_no_machine_paths(page):
    found = re.findall(r"(?<![\w.])/(?:work|tmp|home|root|Users)/\S*", page.read_text())
    assert not found, f"{page.name} names paths of one machine: {found}"


def test_the_ci_script_runs_the_readmes_test_command():
    readme = (ROOT / "README.md").read_text()
    first_block = code_blocks(readme)[0][1]
    commands = [line for line in first_block.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2, "the README opens with the two set-up commands"
    assert "anakin train" in commands[0] and "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci, ".ci/run must run the README's test command exactly"
