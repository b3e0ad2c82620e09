"""The repository stands alone: no file points readers at documents outside it."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".git", ".venv", ".pytest_cache", "build", "__pycache__", "node_modules"}
# Built from pieces so this file does not match itself.
OUTSIDE = re.compile("|".join([r"DESIGN" + r"\.md", r"\.\./" + "shared", "/work/" + "shared"]))


def _repo_text_files():
    for path in ROOT.rglob("*"):
        if path.is_file() and not SKIP_DIRS & set(path.relative_to(ROOT).parts) \
                and path.suffix in {".py", ".md", ".txt", ".toml", ".cfg", ".yml", ".yaml", ".sh", ".json", ""}:
            yield path


def test_no_reference_to_documents_outside_the_repository():
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in _repo_text_files()
            for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            if OUTSIDE.search(line)]
    assert hits == []
