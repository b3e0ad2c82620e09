"""scripts/code_sizes.py (``make sizes``): functions over 60 lines and modules over 500, tests left out."""
from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "code_sizes.py"


def load_script():
    spec = importlib.util.spec_from_file_location("code_sizes", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def function(name: str, body_lines: int) -> str:
    return f"def {name}():\n" + "    x = 1\n" * body_lines + "\n"


def test_lists_long_functions_and_modules_and_skips_tests_and_build(tmp_path: Path) -> None:
    sizes = load_script()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text(function("too_long", 60) + function("just_fits", 59))
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * 501)
    for skipped in ("tests", "build", ".venv", "pkg.egg-info"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "long.py").write_text(function("ignored", 80) + "x = 1\n" * 600)
    functions, modules = sizes.oversized(tmp_path)
    assert functions == [(61, "pkg/long.py:1 too_long")]
    assert modules == [(501, "pkg/big.py")]
    assert sizes.main(["code_sizes.py", str(tmp_path)]) == 1
    assert sizes.main(["code_sizes.py", str(tmp_path / "pkg" / "missing")]) == 0


def test_the_repository_meets_the_size_targets() -> None:
    functions, modules = load_script().oversized(SCRIPT.parents[1])
    assert (functions, modules) == ([], [])
