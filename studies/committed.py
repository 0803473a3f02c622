"""The date results were made, for pages rendered from results committed earlier."""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def committed_date(path):
    """The date of the last commit of ``path`` (a checkout resets file times), else today, as ``YYYY-MM-DD``."""
    try:
        date = subprocess.run(["git", "log", "-1", "--format=%cs", "--", str(path)], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        date = ""
    return date or datetime.date.today().isoformat()
