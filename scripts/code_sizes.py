"""List functions over 60 lines and modules over 500 lines (issue 21's size targets).

Usage: ``python scripts/code_sizes.py [ROOT]`` (``make sizes``). Tests, build/, .venv and
egg-info are left out. Exits 1 when anything is over, so CI can use it as a gate.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 500
SKIPPED_PARTS = {"tests", "build", ".venv", ".git"}


def source_files(root: Path) -> list[Path]:
    """The project's Python files under ``root``, without tests and build output."""
    return [p for p in sorted(root.rglob("*.py"))
            if not SKIPPED_PARTS & set(p.relative_to(root).parts)
            and not any(part.endswith(".egg-info") for part in p.parts)]


def oversized(root: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(functions, modules) over the limits, each as (lines, where)."""
    functions, modules = [], []
    for path in source_files(root):
        src = path.read_text()
        where = str(path.relative_to(root))
        if src.count("\n") > MAX_MODULE_LINES:
            modules.append((src.count("\n"), where))
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    functions.append((length, f"{where}:{node.lineno} {node.name}"))
    return sorted(functions, reverse=True), sorted(modules, reverse=True)


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else ".").resolve()
    functions, modules = oversized(root)
    for length, where in functions:
        print("F", length, where)
    for length, where in modules:
        print("M", length, where)
    print(f"{len(functions)} functions > {MAX_FUNCTION_LINES}; {len(modules)} modules > {MAX_MODULE_LINES}")
    return 1 if functions or modules else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
