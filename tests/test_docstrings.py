"""Every public class and function passes numpydoc's validation of the sections
the documentation relies on: a summary, Parameters, Returns (functions) and a
runnable Examples section (the examples themselves run as doctests).

Walks ``__all__`` of each public module; scorer objects, constants and other
non-callables are out of scope (they are documented by their module).
"""

import importlib
import inspect

import pytest
from numpydoc.validate import validate

PUBLIC_MODULES = [
    "sklearn_measattn",
    "sklearn_measattn.kernels",
    "sklearn_measattn.attention",
    "sklearn_measattn.transformer",
    "sklearn_measattn.estimator",
    "sklearn_measattn.preprocessing",
    "sklearn_measattn.losses",
    "sklearn_measattn.datasets",
    "sklearn_measattn.metrics",
    "sklearn_measattn.experiments",
    "sklearn_measattn.assimilation",
]


def _public_objects():
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            # Only classes and plain functions: scorers (callable instances),
            # tuples, dicts and submodules are documented elsewhere.
            if inspect.isclass(obj) or inspect.isfunction(obj):
                yield pytest.param(obj, id=f"{module_name.rsplit('.', 1)[-1]}.{name}")


# numpydoc's own checks (``numpydoc.validate``): every public class and function
# has a one-line summary, documents each parameter it takes and nothing else,
# says what it returns and has an Examples section; public methods document
# their parameters. "See Also" and "Extended Summary" are not required.
OBJECT_CHECKS = {
    "GL02", "GL03", "GL08",  # docstring layout; a docstring exists
    "SS01", "SS02", "SS03", "SS05",  # a one-line summary, capitalised, ending with a period
    "PR01", "PR02", "PR03", "PR07",  # parameters: all documented, none unknown, in order, described
    "RT01",  # a Returns section
    "EX01",  # an Examples section
}
METHOD_CHECKS = {"GL08", "PR01", "PR02", "PR03", "PR07"}


def _errors(qualified_name, checks, *, is_class=False):
    errors = [(code, message) for code, message in validate(qualified_name)["errors"] if code in checks]
    if is_class:  # numpydoc asks classes for a Returns section; a class returns nothing
        errors = [(code, message) for code, message in errors if code != "RT01"]
    return errors


@pytest.mark.parametrize("obj", list(_public_objects()))
def test_numpydoc_validate(obj):
    name = f"{obj.__module__}.{obj.__qualname__}"
    errors = _errors(name, OBJECT_CHECKS, is_class=inspect.isclass(obj))
    assert not errors, f"{name}: " + "; ".join(f"{code} {message}" for code, message in errors)


def _public_methods():
    for param in _public_objects():
        cls = param.values[0]
        if not inspect.isclass(cls):
            continue
        for attr, value in vars(cls).items():
            if attr.startswith("_") or not inspect.isfunction(value):
                continue
            # an override of a base-class method (forward, extra_repr, fit of a mixin, an analysis step's analyse)
            # is documented there, and the API pages show that docstring for it
            if any(attr in vars(base) for base in cls.__mro__[1:]):
                continue
            yield pytest.param(f"{cls.__module__}.{cls.__qualname__}.{attr}", id=f"{cls.__name__}.{attr}")


@pytest.mark.parametrize("name", list(_public_methods()))
def test_numpydoc_validate_methods(name):
    errors = _errors(name, METHOD_CHECKS)
    assert not errors, f"{name}: " + "; ".join(f"{code} {message}" for code, message in errors)


def test_walk_found_something():
    # Guards against the walk silently testing nothing.
    assert len(list(_public_objects())) >= 20
    assert len(list(_public_methods())) >= 10


def test_validation_catches_a_missing_section():
    # The checks above can fail: a function without Returns and Examples does.
    codes = {code for code, _ in _errors(f"{__name__}._undocumented_returns", OBJECT_CHECKS)}
    assert {"RT01", "EX01", "PR01"} <= codes


def _undocumented_returns(x):
    """Do something with a value.

    Parameters
    ----------
    y : int
        Not the parameter this function takes.
    """
    return x


def test_api_reference_lists_every_public_name():
    # docs/api.rst documents each module's __all__ (autosummary entries or
    # ``.. data::`` directives); a new public name must be added there too.
    from pathlib import Path

    api = Path(__file__).resolve().parents[1] / "docs" / "api.rst"
    text = api.read_text(encoding="utf-8")
    documented = set()
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(".. data::"):
            documented.add(stripped.split("::", 1)[1].strip())
        elif stripped and " " not in stripped and not stripped.startswith((".", ":", "=", "-")):
            documented.add(stripped)
    missing = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        missing += [f"{module_name}.{name}" for name in module.__all__
                    if name not in documented and not inspect.ismodule(getattr(module, name))]
    assert not missing, f"docs/api.rst does not document: {missing}"
