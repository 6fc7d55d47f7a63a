"""How the person at the terminal types ``atlas``: the hints a command prints name a command that works as typed."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def atlas_command() -> str:
    """``atlas`` when that is the one on the PATH, else the path of this one (``.venv/bin/atlas`` from the checkout)."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is None or script.name != "atlas":
        script = Path(sys.executable).parent / "atlas"
    on_path = shutil.which("atlas")
    if on_path and Path(on_path).resolve() == script.resolve():
        return "atlas"
    here, full = Path.cwd().resolve(), script.resolve()
    return os.path.relpath(full, here) if full.is_relative_to(here) else str(full)
