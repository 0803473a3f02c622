"""The import rules of docs/architecture.rst, checked on the source.

The package is the root's modules plus the subpackages ``assimilation``, ``attention``,
``datasets``, ``experiments`` and ``metrics``. Across those lines, a module
imports public names only: never a name that begins with an underscore, and
from a subpackage only what its ``__init__`` exports (not its private modules).
The root's private modules (``_validation.py``, ``_ot.py``, ...) are the
package's shared internals: their public names may be imported anywhere.
"""

import ast
from pathlib import Path

import pytest

import sklearn_measattn

PACKAGE = Path(sklearn_measattn.__file__).parent
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _subpackage(module):
    """``module`` (dotted, from sklearn_measattn) -> its subpackage name, or "" for the root's modules."""
    parts = module.split(".")[1:]
    return parts[0] if parts and parts[0] in SUBPACKAGES else ""


def _module_name(path):
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(module, source, is_package):
    """``(line, target module, imported name)`` for every ``from ... import`` of the package in ``source``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if target == "sklearn_measattn" or target.startswith("sklearn_measattn."):
            for alias in node.names:
                yield node.lineno, target, alias.name


def _violations(module, source, is_package=False):
    here = _subpackage(module)
    for line, target, name in _imports(module, source, is_package):
        there = _subpackage(target)
        if there == here:
            continue
        if name.startswith("_") and not name.startswith("__"):
            yield f"{module}:{line} imports private name {name} from {target}"
        below = target.split(".")[2:] if there else []
        if any(part.startswith("_") for part in below):
            yield f"{module}:{line} imports from {target}, a private module of {there}"


def test_the_package_has_the_subpackages_the_rules_name():
    assert SUBPACKAGES == ["assimilation", "attention", "datasets", "experiments", "metrics"]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_private_name_crosses_a_subpackage_line(path):
    assert list(_violations(_module_name(path), path.read_text(), path.name == "__init__.py")) == []


def test_the_check_catches_a_crossing():
    """The rule finds both kinds of crossing in a module written to break it, and allows the rest."""
    source = (
        "from ..metrics._diagnostics import attention_ess\n"
        "from ..attention import _private_helper\n"
        "from .._validation import check_measures\n"
        "from ._compare import _fit_and_score\n"
    )
    found = list(_violations("sklearn_measattn.experiments._offender", source))
    assert len(found) == 2
    assert "private module of metrics" in found[0] and "private name _private_helper" in found[1]
