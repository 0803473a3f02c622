"""Every public class and function has a numpydoc docstring with the sections
the documentation relies on: Parameters (when it takes any), Returns
(functions) and a runnable Examples section.

Walks ``__all__`` of each public module; scorer objects, constants and other
non-callables are out of scope (they are documented by their module).
"""

import importlib
import inspect

import pytest
from numpydoc.docscrape import ClassDoc, FunctionDoc

PUBLIC_MODULES = [
    "sklearn_measattn.kernels",
    "sklearn_measattn.attention",
    "sklearn_measattn.transformer",
    "sklearn_measattn.estimator",
    "sklearn_measattn.preprocessing",
    "sklearn_measattn.losses",
    "sklearn_measattn.datasets",
    "sklearn_measattn.metrics",
]


def _public_objects():
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            # Only classes and plain functions: scorers (callable instances),
            # tuples, dicts and submodules are documented elsewhere.
            if inspect.isclass(obj) or inspect.isfunction(obj):
                yield pytest.param(obj, id=f"{module_name.rsplit('.', 1)[1]}.{name}")


def _takes_parameters(obj):
    """Whether the callable (for a class: its constructor) takes any argument."""
    if inspect.isclass(obj) and obj.__init__ is object.__init__:
        return False
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return False
    names = [p for p in signature.parameters if p != "self"]
    return bool(names)


@pytest.mark.parametrize("obj", list(_public_objects()))
def test_numpydoc_sections(obj):
    assert inspect.getdoc(obj), f"{obj.__qualname__} has no docstring"
    if inspect.isclass(obj):
        doc = ClassDoc(obj, config={"show_class_members": False})
    else:
        doc = FunctionDoc(obj)
    missing = []
    if _takes_parameters(obj) and not doc["Parameters"]:
        missing.append("Parameters")
    if inspect.isfunction(obj) and not doc["Returns"]:
        missing.append("Returns")
    if not doc["Examples"]:
        missing.append("Examples")
    assert not missing, f"{obj.__module__}.{obj.__qualname__} lacks numpydoc section(s): {missing}"


def test_walk_found_something():
    # Guards against the walk silently testing nothing.
    assert len(list(_public_objects())) >= 20


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
        missing += [f"{module_name}.{name}" for name in module.__all__ if name not in documented]
    assert not missing, f"docs/api.rst does not document: {missing}"
