"""`make bench`: run every benchmarks/*.py module that defines ``main()``, one after another.

Each module prints its own figures; a failing benchmark is reported and the run
continues, and the exit code is non-zero if any failed.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback
from pathlib import Path


def discover() -> list[str]:
    """Module names under benchmarks/ that have a callable ``main``, sorted."""
    here = Path(__file__).resolve().parent
    names = []
    for info in pkgutil.iter_modules([str(here)]):
        if info.name in ("run", "__init__") or info.name.startswith("_"):
            continue
        names.append(f"benchmarks.{info.name}")
    return sorted(names)


def main(argv: list[str] | None = None) -> int:
    """Run the selected (default: all) benchmark modules.

    :param argv: optional module names (short, e.g. ``sim_metadata``) to run
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    failed = []
    for name in discover():
        short = name.split(".", 1)[1]
        if argv and short not in argv:
            continue
        module = importlib.import_module(name)
        fn = getattr(module, "main", None)
        if not callable(fn):
            continue
        print(f"== {short}", flush=True)
        t0 = time.monotonic()
        try:
            rc = fn()
        except SystemExit as e:
            rc = e.code
        except Exception:
            traceback.print_exc()
            rc = 1
        print(f"== {short} finished in {time.monotonic() - t0:.1f}s (rc={rc or 0})", flush=True)
        if rc:
            failed.append(short)
    if failed:
        print("failed benchmarks: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
