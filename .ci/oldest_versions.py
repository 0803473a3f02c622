"""The oldest declared versions of the runtime dependencies, and a check that they are installed.

``python .ci/oldest_versions.py`` prints a pip constraints file pinning every
runtime dependency of ``pyproject.toml`` to the release line of its declared
floor (``numpy>=1.24`` becomes ``numpy==1.24.*``: the oldest minor version, with
its bug fixes). torch is left out: its old releases are multi-GB CUDA downloads
from PyPI, so CI installs the CPU build it has (see the Makefile).

``python .ci/oldest_versions.py --verify`` exits non-zero unless every pinned
dependency is installed at its floor's release line, so that a resolver that
silently picked newer versions cannot pass the check.
"""

import re
import sys
from importlib.metadata import version
from pathlib import Path

NOT_PINNED = {"torch"}


def floors():
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, flags=re.S | re.M).group(1)
    for name, floor in re.findall(r'"([A-Za-z0-9_.-]+)>=([0-9][0-9.]*)', block):
        if name.lower() not in NOT_PINNED:
            yield name, floor


def main(argv):
    pins = dict(floors())
    if not pins:
        sys.exit("no dependency floors found in pyproject.toml")
    if "--verify" not in argv:
        print("\n".join(f"{name}=={floor}.*" for name, floor in pins.items()))
        return
    wrong = []
    for name, floor in pins.items():
        installed = version(name)
        if installed.split("+")[0].split(".")[: len(floor.split("."))] != floor.split("."):
            wrong.append(f"{name} {installed} (floor {floor})")
        print(f"{name:14s} {installed:12s} floor {floor}")
    if wrong:
        sys.exit("not at the declared floor: " + ", ".join(wrong))


if __name__ == "__main__":
    main(sys.argv[1:])
