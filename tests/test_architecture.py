"""The import rules of docs/architecture.rst, checked on the source.

The package is made of units: each module and each subpackage directly under
``sklearn_measattn/``. Across a unit's line, a module imports public names only:
never a name that begins with an underscore, and from a subpackage only what its
``__init__`` exports (not its private modules). The root gets no exemption: its
modules are units like the subpackages. And no module imports, at any depth or
inside a function, a module that imports it back.
"""

import ast
import importlib
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import sklearn_measattn
from tests.conftest import assert_close_across_machines

PACKAGE = Path(sklearn_measattn.__file__).parent
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
ROOT_MODULES = sorted(p.stem for p in PACKAGE.glob("*.py"))
SOURCES = sorted(PACKAGE.rglob("*.py"))
DATA = Path(__file__).parent / "data"


def _unit(module):
    """``module`` (dotted, from sklearn_measattn) -> its unit: the root module or subpackage it is in."""
    parts = module.split(".")[1:]
    return parts[0] if parts else "__init__"


def _module_name(path):
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


ALL_MODULES = {_module_name(path) for path in SOURCES}


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
    here = _unit(module)
    for line, target, name in _imports(module, source, is_package):
        there = _unit(target)
        if there == here:
            continue
        if there == "__init__" and f"sklearn_measattn.{name}" in ALL_MODULES:
            there, target = name, f"sklearn_measattn.{name}"  # ``from . import _persistence``
        if name.startswith("_") and not name.startswith("__") and there != name:
            yield f"{module}:{line} imports private name {name} from {target}"
        below = target.split(".")[2:]
        if any(part.startswith("_") for part in below):
            yield f"{module}:{line} imports from {target}, a private module of {there}"


def _import_graph():
    """``{module: {modules it imports}}`` over the package, function-level imports included.

    ``from package import name`` is an edge to ``package.name`` when that is a module, else to
    the package; parents a module's import runs implicitly are not edges (every module would
    otherwise import the root, which imports everything).
    """
    graph = {}
    for path in SOURCES:
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in ALL_MODULES)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    if f"{target}.{alias.name}" in ALL_MODULES:
                        edges.add(f"{target}.{alias.name}")
                    elif target in ALL_MODULES:
                        edges.add(target)
        graph[module] = edges - {module}
    return graph


def _cycles(graph):
    """Every strongly connected group of more than one module (Tarjan's algorithm), sorted."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def test_the_root_reads_as_a_map():
    """At most twelve modules directly in the package; every other concept has a package of its own."""
    assert len(ROOT_MODULES) <= 12, ROOT_MODULES
    assert {"cli", "kernels", "inspection", "_training", "_distances", "_extension"} <= set(SUBPACKAGES)
    assert {"estimator", "transformer", "preprocessing", "losses"} <= set(ROOT_MODULES)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_private_name_crosses_a_unit_line(path):
    assert list(_violations(_module_name(path), path.read_text(), path.name == "__init__.py")) == []


def test_the_check_catches_a_crossing():
    """The rule finds every kind of crossing in a module written to break it, and allows the rest."""
    source = (
        "from ..metrics._diagnostics import attention_ess\n"
        "from ..attention import _private_helper\n"
        "from .._validation import check_measures\n"
        "from .._persistence import _not_a_model\n"
        "from ._compare import _fit_and_score\n"
    )
    found = list(_violations("sklearn_measattn.experiments._offender", source))
    assert len(found) == 3
    assert "private module of metrics" in found[0] and "private name _private_helper" in found[1]
    assert "private name _not_a_model" in found[2]
    # the root's modules get no exemption among themselves
    assert list(_violations("sklearn_measattn._model_files", "from ._persistence import _not_a_model\n"))


@pytest.mark.slow
def test_no_import_cycle():
    assert _cycles(_import_graph()) == []


def test_the_cycle_check_finds_a_function_level_cycle():
    graph = _import_graph()
    graph["sklearn_measattn.transformer"] = graph["sklearn_measattn.transformer"] | {"sklearn_measattn.estimator"}
    assert any({"sklearn_measattn.estimator", "sklearn_measattn.transformer"} <= set(group) for group in _cycles(graph))


def _pre_move_models():
    """The pickled models, each with its stored predictions and transports, made on another machine."""
    folder = DATA / "pre_move"
    pickles = sorted(folder.glob("*.pkl"))
    assert len(pickles) >= 8
    for path in pickles:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # skorch's note on pickles from another torch
            model = pickle.loads(path.read_bytes())
        yield path, model, np.load(folder / f"{path.stem}_predict.npy"), np.load(folder / f"{path.stem}_transport.npy")


@pytest.mark.slow
@pytest.mark.skipif(int(np.__version__.split(".")[0]) < 2,
                    reason="the pickles were written with numpy 2, whose arrays numpy 1 cannot unpickle")
def test_models_pickled_before_the_root_was_reorganised_predict_as_recorded():
    """Tiny models of every kernel, pickled (and saved as model files) by the version before the
    package root became subpackages, load and give the predictions and transports recorded then
    (within float32's cross-machine tolerance: they were recorded on another CPU); the pickle and
    the model file, loaded here, agree bit for bit."""
    from sklearn_measattn import load_model

    X = np.load(DATA / "pre_move" / "X_test.npy")
    for path, model, predicted, transported in _pre_move_models():
        assert_close_across_machines(model.predict(X), predicted, err_msg=path.stem)
        assert_close_across_machines(model.transport(X, X[:, :3] * 0.5), transported, err_msg=path.stem)
        saved = path.with_suffix(".safetensors")
        if saved.exists():
            np.testing.assert_array_equal(load_model(saved).predict(X), model.predict(X), err_msg=path.stem)


@pytest.mark.slow
@pytest.mark.skipif(int(np.__version__.split(".")[0]) < 2,
                    reason="the pickles were written with numpy 2, whose arrays numpy 1 cannot unpickle")
@pytest.mark.parametrize("damage", ["lost transform", "one weight off by 1%"])
def test_the_cross_machine_tolerance_still_catches_a_loading_regression(damage):
    """A loading regression moves predictions far outside the tolerance the recorded ones are held to."""
    X = np.load(DATA / "pre_move" / "X_test.npy")
    caught = 0
    for _, model, predicted, _ in _pre_move_models():
        if damage == "lost transform":
            if getattr(model, "transform_X_", None) is None:
                continue
            model.transform_X_ = model.transform_y_ = None
        else:
            with torch.no_grad():
                weight = next(p for p in model.net_.module_.parameters() if p.dim() == 2)
                weight.mul_(1.01)
        with pytest.raises(AssertionError):
            assert_close_across_machines(model.predict(X), predicted)
        caught += 1
    assert caught >= 2


@pytest.mark.parametrize("listing", ["pre_move/pickled_names.txt", "pickled_names_before_attention_package.txt"])
def test_names_that_old_pickles_reference_still_import(listing):
    lines = (DATA / listing).read_text().splitlines()
    names = [line.split(":") for line in lines if line and not line.startswith("#")]
    assert len(names) > 10
    for module, name in names:
        assert hasattr(importlib.import_module(module), name), f"{module}:{name} no longer importable"
