"""Config fields whose default changed after they were added, read through the git history.

A run saves its whole config, so a field it lacks was added after it was saved. When it
resumes, `config.from_dict` gives that field its class's `ADDED_LATER` value, else today's
default. Today's default is right only where it is still the value the field was added with
(the old behaviour). This lists every field added after its class whose default has changed
since, with whether `ADDED_LATER` covers it:

    python scripts/config_history.py [--rev HEAD]

It reads each commit's `*Config` classes outside `tests/` with `ast` (no imports, so old
commits need no old packages) and exits 1 if a field is not covered. It cannot see a field
added with a default that changed behaviour at once (`arch.desync_steps` and `arch.layout`,
found by reading, are in `ArchConfig.ADDED_LATER`), nor a change of meaning under an unchanged
name and default.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def _bare(value: ast.expr | None) -> str:
    """A default's source without the `sweepable(...)`/`resumable(...)` marks, which tag a
    field without changing its value."""
    if value is None:
        return ""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("sweepable", "resumable")
        and len(value.args) == 1
    ):
        value = value.args[0]
    return ast.unparse(value)


def config_classes(source: str) -> dict[str, tuple[dict[str, str], set[str]]]:
    """{class name: ({field: default's source}, ADDED_LATER's keys)} of a module's top-level
    classes whose names end in "Config" (ClassVars are not fields)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    out = {}
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name.endswith("Config")):
            continue
        fields, added_later = {}, set()
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            if "ClassVar" in ast.unparse(stmt.annotation):
                if stmt.target.id == "ADDED_LATER" and isinstance(stmt.value, ast.Dict):
                    added_later = {ast.literal_eval(k) for k in stmt.value.keys if k is not None}
                continue
            fields[stmt.target.id] = _bare(stmt.value)
        out[node.name] = (fields, added_later)
    return out


def classes_at(rev: str, cache: dict[str, dict]) -> dict[str, tuple[dict[str, str], set[str]]]:
    """Every config class at `rev` (the first definition of a name wins)."""
    found: dict[str, tuple[dict[str, str], set[str]]] = {}
    for line in _git("ls-tree", "-r", rev).splitlines():
        meta, path = line.split("\t", 1)
        if not path.endswith(".py") or path.startswith("tests/"):
            continue
        blob = meta.split()[2]
        if blob not in cache:
            cache[blob] = config_classes(_git("cat-file", "-p", blob))
        for name, value in cache[blob].items():
            found.setdefault(name, value)
    return found


def uncovered_changes(rev: str = "HEAD") -> list[tuple[str, str, str, str, str, bool]]:
    """(class, field, commit that added it, its default then, its default now, covered by
    ADDED_LATER) for every field that exists at `rev`, was added after its class, and whose
    default differs now from when it was added."""
    revs = _git("rev-list", "--reverse", rev).split()
    cache: dict[str, dict] = {}
    created: dict[str, int] = {}
    added: dict[tuple[str, str], tuple[int, str]] = {}
    for i, commit in enumerate(revs):
        for cls, (fields, _) in classes_at(commit, cache).items():
            created.setdefault(cls, i)
            for field, default in fields.items():
                added.setdefault((cls, field), (i, default))
    now = classes_at(revs[-1], cache)
    rows = []
    for (cls, field), (i, then) in sorted(added.items()):
        if cls not in now or field not in now[cls][0] or i == created[cls]:
            continue
        if now[cls][0][field] != then:
            rows.append((cls, field, revs[i][:8], then, now[cls][0][field], field in now[cls][1]))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="HEAD", help="the commit to check (default HEAD)")
    args = parser.parse_args()
    rows = uncovered_changes(args.rev)
    print("| class | field | added in | default then | default now | ADDED_LATER |")
    print("|---|---|---|---|---|---|")
    for cls, field, commit, then, now, covered in rows:
        print(f"| {cls} | {field} | {commit} | `{then}` | `{now}` | {'yes' if covered else 'NO'} |")
    missing = [f"{cls}.{field}" for cls, field, *_, covered in rows if not covered]
    if missing:
        print(
            f"not in ADDED_LATER: {', '.join(missing)}; add each with the value runs saved "
            "before it trained with",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
