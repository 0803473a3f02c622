"""The import rules of docs/architecture.rst, checked on the source.

The package is made of units: each module and each subpackage directly under
``sklearn_measattn/``. Across a unit's line, a module imports public names only:
never a name that begins with an underscore, and from a subpackage only what its
``__init__`` exports (not its private modules). The root gets no exemption: its
modules are units like the subpackages. And no module imports, at any depth or
inside a function, a module that imports it back.

What an import cannot show is checked on the attributes: no unit reads, calls or
sets a private attribute (``obj._x``) of another unit, and no module sets an
object's fitted attributes (``obj.x_ = ...``) from outside the module that
computes them. scikit-learn's private validation API comes in through one module,
``_param_validation``; the studies, benchmarks and examples beside the package
import only what a user can (each module's ``__all__``).
"""

import ast
import importlib
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


def _import_target(node, package):
    """The absolute module a ``from ... import`` names, ``package`` being the importing module's package."""
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def _imports(module, source, is_package):
    """``(line, target module, imported name)`` for every ``from ... import`` of the package in ``source``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        target = _import_target(node, package)
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
                target = _import_target(node, package)
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


# scikit-learn's private validation API ---------------------------------------------------------------------

SKLEARN_PRIVATE_VALIDATION = "sklearn.utils._param_validation"
VALIDATION_DOOR = "sklearn_measattn._param_validation"


def _sklearn_private_validation_imports(source):
    """Lines of ``source`` that import scikit-learn's private validation module, in any spelling."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            if any(alias.name == SKLEARN_PRIVATE_VALIDATION for alias in node.names):
                yield node.lineno
        elif isinstance(node, ast.ImportFrom) and not node.level:
            if node.module == SKLEARN_PRIVATE_VALIDATION or (
                node.module == "sklearn.utils" and any(alias.name == "_param_validation" for alias in node.names)
            ):
                yield node.lineno


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_one_module_imports_sklearns_private_validation(path):
    """scikit-learn's validation API is private to scikit-learn and may change between its releases:
    the package imports it in ``_param_validation`` only, and every other module from there."""
    if _module_name(path) == VALIDATION_DOOR:
        assert list(_sklearn_private_validation_imports(path.read_text()))
    else:
        assert list(_sklearn_private_validation_imports(path.read_text())) == []


def test_the_validation_door_holds_what_the_package_uses():
    """``_param_validation`` re-exports exactly the names the rest of the package imports from it."""
    door = importlib.import_module(VALIDATION_DOOR)
    used = set()
    for path in SOURCES:
        module = _module_name(path)
        if module != VALIDATION_DOOR:
            used.update(name for _, target, name in _imports(module, path.read_text(), path.name == "__init__.py")
                        if target == VALIDATION_DOOR)
    assert used == set(door.__all__)


def test_the_validation_check_catches_every_spelling():
    sources = [
        "from sklearn.utils._param_validation import Interval\n",
        "import sklearn.utils._param_validation\n",
        "from sklearn.utils import _param_validation\n",
        "def f():\n    from sklearn.utils._param_validation import validate_params\n",
    ]
    assert all(list(_sklearn_private_validation_imports(source)) for source in sources)
    assert not list(_sklearn_private_validation_imports("from .._param_validation import Interval\n"))


# private attributes across a unit's line ---------------------------------------------------------------


def _is_private(name):
    return name.startswith("_") and not name.startswith("__")


def _constant_name(call):
    """``"_x"`` of ``getattr(obj, "_x")``, ``hasattr``, ``setattr``, ``delattr``; else None."""
    if (isinstance(call.func, ast.Name) and call.func.id in ("getattr", "hasattr", "setattr", "delattr")
            and len(call.args) >= 2 and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str)):
        return call.args[1].value
    return None


def _is_own(node):
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _private_definitions(tree):
    """The private names a module defines: functions, classes and methods; names assigned at module or
    class level; attributes it sets on ``self`` or ``cls`` (directly, by ``setattr`` or ``__dict__.setdefault``)."""
    names = set()

    def visit(node, in_function):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and not in_function:
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)) and _is_own(node.value):
            names.add(node.attr)
        elif isinstance(node, ast.Call):
            if _constant_name(node) is not None and _is_own(node.args[0]) and node.func.id == "setattr":
                names.add(_constant_name(node))
            func = node.func  # self.__dict__.setdefault("_x", ...)
            if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                    and func.value.attr == "__dict__" and _is_own(func.value.value) and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names.add(node.args[0].value)
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return {name for name in names if _is_private(name)}


def _imported_units(module, tree, is_package):
    """``{name: unit}`` for every name ``module`` binds by ``from ... import`` from another unit of the package."""
    here, bound = _unit(module), {}
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        target = _import_target(node, package)
        if not (target == "sklearn_measattn" or target.startswith("sklearn_measattn.")):
            continue
        for alias in node.names:
            there = _unit(target)
            if there == "__init__" and f"sklearn_measattn.{alias.name}" in ALL_MODULES:
                there = alias.name  # ``from . import _persistence``: the module is a unit
            if there != here:
                bound[alias.asname or alias.name] = there
    return bound


def _receiver_root(node):
    """The name an attribute chain or call starts from: ``Estimator`` in ``Estimator(...)._x``; else None."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _private_accesses(tree):
    """``(line, receiver, name)`` for each ``receiver._name`` (read, set or deleted) and each
    ``getattr``/``hasattr``/``setattr``/``delattr`` of a private name written out as a string."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            yield node.lineno, node.value, node.attr
        elif isinstance(node, ast.Call) and _constant_name(node) is not None and _is_private(_constant_name(node)):
            yield node.lineno, node.args[0], _constant_name(node)


def _attribute_crossings(modules):
    """Every private attribute of one unit used in another, over ``modules`` (``{module: (source, is_package)}``).

    A private name (``_x``, not a dunder) belongs to the units that define it (see
    :func:`_private_definitions`). ``obj._x`` in a unit crosses its line when

    - ``_x`` is defined in the package, but not in this unit: ``estimator._net_params()`` read by
      the model files, ``self._x`` in a subclass whose base is another unit's;
    - or ``obj`` is (a call of, an attribute of) a name imported from another unit, whatever
      ``_x`` is: ``MeasureTransformerRegressor._parameter_constraints`` read by the command line,
      ``Estimator(...)._check_params()``, scikit-learn's ``Estimator._get_param_names()`` on another
      unit's class.

    Allowed: a unit's own private names, on any object: ``self._x``, ``cls._x`` and ``super()._x``
    in the class that defines ``_x``, a method preparing the copy of itself it returns
    (``bound._prepare()``), a helper of the same unit (inside a unit private names are shared
    freely, as with imports). Not seen: a name that two units both define (``_parameter_constraints``
    of the estimator and of the analysis steps) read in one on an object of the other, unless that
    object is a name imported from the other.

    A name the package never defines belongs to a dependency and is not this rule's business
    (``self._validate_params()`` and ``self._parameters`` inherited from scikit-learn's and torch's
    base classes, ``torch._dynamo``): using a dependency's private API is a choice between the package
    and that dependency, made in the one module that needs it (scikit-learn's validation behind
    ``_param_validation``). Names computed at run time (``getattr(obj, name)``) are not seen.
    """
    trees = {module: (ast.parse(source), is_package) for module, (source, is_package) in modules.items()}
    owners = {}
    for module, (tree, _) in trees.items():
        for name in _private_definitions(tree):
            owners.setdefault(name, set()).add(_unit(module))
    for module, (tree, is_package) in sorted(trees.items()):
        here, imported = _unit(module), _imported_units(module, tree, is_package)
        for line, receiver, name in sorted(_private_accesses(tree), key=lambda access: access[0]):
            root = _receiver_root(receiver)
            if root in imported:
                yield f"{module}:{line} {name} of {root}, from unit {imported[root]}"
            elif name in owners and here not in owners[name]:
                yield f"{module}:{line} {name}, private to {', '.join(sorted(owners[name]))}"


def _package_modules():
    return {_module_name(path): (path.read_text(), path.name == "__init__.py") for path in SOURCES}


def test_no_private_attribute_crosses_a_unit_line():
    """No unit reads, calls or sets a private attribute (``obj._x``) that belongs to another unit."""
    assert list(_attribute_crossings(_package_modules())) == []


def test_the_attribute_check_catches_a_crossing():
    """Written to break the rule: a model-files module reaching into the estimator and an experiment
    calling its private check; the estimator's own and scikit-learn's private names pass."""
    modules = {
        "sklearn_measattn.estimator": (
            "from sklearn.base import BaseEstimator\n"
            "class Estimator(BaseEstimator):\n"
            "    _parameter_constraints = {}\n"
            "    def _net_params(self):\n"
            "        return self._validate_params()\n"
            "    def fit(self):\n"
            "        self._fitted_params = setattr(self, '_seen', 1)\n"
            "        return self._net_params(), self._seen\n", False),
        "sklearn_measattn._model_files": (
            "from .estimator import Estimator\n"
            "def restore(estimator):\n"
            "    estimator._fitted_params = estimator._net_params()\n"
            "    return getattr(estimator, '_seen'), estimator._validate_params()\n", False),
        "sklearn_measattn.experiments._compare": (
            "from ..estimator import Estimator\n"
            "def run():\n"
            "    Estimator()._check_params()\n"
            "    return Estimator._get_param_names()\n", False),
        "sklearn_measattn.experiments._phase": (
            "import torch\n"
            "class Diagram:\n"
            "    _parameter_constraints = {}\n"
            "    def check(self, other):\n"
            "        return other._parameter_constraints, torch._dynamo, self._validate_params()\n", False),
    }
    found = list(_attribute_crossings(modules))
    assert [line.split(" ")[0] for line in found] == [
        "sklearn_measattn._model_files:3", "sklearn_measattn._model_files:3", "sklearn_measattn._model_files:4",
        "sklearn_measattn.experiments._compare:3", "sklearn_measattn.experiments._compare:4",
    ], found
    assert "_fitted_params, private to estimator" in found[0] and "_net_params" in found[1] and "_seen" in found[2]
    assert "_check_params of Estimator, from unit estimator" in found[3] and "_get_param_names" in found[4]


# fitted attributes set from outside -----------------------------------------------------------------------


def _is_fitted_name(name):
    return name.endswith("_") and not name.endswith("__") and not name.startswith("_")


def _fitted_attribute_writes(modules):
    """Every ``obj.x_ = ...`` (``obj`` not ``self``/``cls``) of a fitted attribute outside the modules that own it.

    A fitted attribute (scikit-learn's convention: a public name ending in one underscore, state an
    object computes) belongs to the modules whose classes set it on ``self``. Only they set it on
    another object (a step's ``bind`` sets it on the copy it returns); any other module that does
    reaches into an object's state from outside (a recorder put on a filter, a loader filling an
    estimator's fitted attributes). Names the package never sets on ``self`` (skorch's ``history_``,
    an early-stopping callback's ``best_epoch_`` restored from a checkpoint) are the dependency's.
    """
    trees = {module: ast.parse(source) for module, (source, _) in modules.items()}
    owners = {}
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _is_own(node.value)
                    and _is_fitted_name(node.attr)):
                owners.setdefault(node.attr, set()).add(module)
    for module, tree in sorted(trees.items()):
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
                    and not _is_own(node.value) and node.attr in owners and module not in owners[node.attr]):
                yield f"{module}:{node.lineno} sets {ast.unparse(node)}, set by {', '.join(sorted(owners[node.attr]))}"


def test_no_module_sets_a_fitted_attribute_from_outside():
    assert sorted(_fitted_attribute_writes(_package_modules())) == []


def test_the_fitted_attribute_check_catches_a_write_from_outside():
    modules = {
        "sklearn_measattn.assimilation._baselines": (
            "class Serial:\n"
            "    def bind(self):\n"
            "        bound = Serial()\n"
            "        bound.recorder_ = None\n"
            "        return bound\n"
            "    def _prepare(self):\n"
            "        self.recorder_ = None\n", False),
        "sklearn_measattn.assimilation._learned": (
            "def record(step, net):\n"
            "    step.recorder_ = []\n"
            "    net.history_ = []\n", False),
    }
    assert [line.split(" ")[0] for line in _fitted_attribute_writes(modules)] == ["sklearn_measattn.assimilation._learned:2"]


# studies, benchmarks and examples use the public API -----------------------------------------------------

SCRIPTS = sorted(path for folder in ("studies", "benchmarks", "examples")
                 for path in (PACKAGE.parent / folder).rglob("*.py"))


def _script_violations(source):
    """Each import of ``source`` that reaches past the package's public API: a private module (any dotted
    part that begins with an underscore), a private name, or a name outside its module's ``__all__``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "sklearn_measattn" and any(_is_private(part) for part in parts):
                    yield f"{node.lineno}: import {alias.name}, a private module"
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "sklearn_measattn":
            if any(_is_private(part) for part in node.module.split(".")):
                yield f"{node.lineno}: from {node.module}, a private module"
                continue
            public = getattr(importlib.import_module(node.module), "__all__", ())
            for alias in node.names:
                if _is_private(alias.name):
                    yield f"{node.lineno}: {alias.name} from {node.module}, a private name"
                elif alias.name not in public and f"{node.module}.{alias.name}" not in ALL_MODULES:
                    yield f"{node.lineno}: {alias.name} from {node.module}, which does not export it (__all__)"


def test_scripts_are_found():
    assert {path.parent.name for path in SCRIPTS} >= {"studies", "benchmarks", "examples"}


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_studies_benchmarks_and_examples_import_only_the_public_api(path):
    """What the scripts beside the package import is what a user can: nothing a release may move or remove."""
    assert list(_script_violations(path.read_text())) == []


def test_the_script_check_catches_a_private_import():
    source = (
        "import sklearn_measattn._training\n"
        "from sklearn_measattn.assimilation._dapper import run_dapper\n"
        "from sklearn_measattn.metrics import _ensemble_scores, energy_score\n"
        "from sklearn_measattn.kernels import learned_degree, get_kernel\n"
        "from sklearn_measattn import MeasureTransformerRegressor, datasets\n"
    )
    found = list(_script_violations(source))
    assert [line.split(":")[0] for line in found] == ["1", "2", "3", "4"], found
    assert "_ensemble_scores" in found[2] and "learned_degree" in found[3]


# the command line is a user of the package ----------------------------------------------------------------

CLI_MODULES = sorted((PACKAGE / "cli").glob("*.py"))


def _cli_imports_outside_itself(source):
    """The imports of a ``cli`` module that leave ``cli``, written as a script would write them."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level >= 2:
            module = ".".join(["sklearn_measattn", *filter(None, [node.module])])
            yield f"from {module} import {', '.join(alias.name for alias in node.names)}\n"


@pytest.mark.parametrize("path", CLI_MODULES, ids=lambda p: p.name)
def test_the_command_line_imports_only_the_public_api(path):
    """``measattn`` is built on what a user can import: no private module or name of the rest of the package."""
    source = "".join(_cli_imports_outside_itself(path.read_text()))
    assert list(_script_violations(source)) == []


def test_the_command_line_check_sees_a_private_import():
    found = list(_script_violations("".join(_cli_imports_outside_itself(
        "from .._training import resolve_device\nfrom ..estimator import resolve_device\n"))))
    assert len(found) == 1 and "_training" in found[0]


# a public package's two export tiers ----------------------------------------------------------------------


def _export_tiers(source):
    """``(public, internal)`` of a package's ``__init__``: the names in ``__all__``, and those it binds by
    ``from ._module import name as name`` (the spelling that marks a re-export) for the rest of the package."""
    public, internal = set(), set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            public = set(ast.literal_eval(node.value))
        elif isinstance(node, ast.ImportFrom) and node.level:
            internal.update(alias.name for alias in node.names if alias.asname == alias.name)
    return public, internal


PUBLIC_PACKAGES = [name for name in SUBPACKAGES if not name.startswith("_")]


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_a_packages_internal_exports_serve_another_unit(package):
    """A public package's ``__init__`` exports to users what ``__all__`` lists, and to the rest of the
    package what it binds as ``name as name``: the tiers do not overlap, and every internal export is
    imported by another unit (else it is dead, and the unit's own modules import its home directly)."""
    public, internal = _export_tiers((PACKAGE / package / "__init__.py").read_text())
    assert public and not public & internal
    used = set()
    for path in SOURCES:
        module = _module_name(path)
        if _unit(module) != package:
            used.update(name for _, target, name in _imports(module, path.read_text(), path.name == "__init__.py")
                        if target == f"sklearn_measattn.{package}")
    assert internal <= used, sorted(internal - used)


def test_the_tiers_are_read_from_the_init():
    public, internal = _export_tiers(
        "from ._a import shown, helper as helper\nfrom ._b import other as renamed\n__all__ = ['shown']\n"
    )
    assert public == {"shown"} and internal == {"helper"}


def _pre_move_models():
    """The model files of tiny models, each with its stored predictions and transports, made on another machine.

    The model file, with its format version, is what stays loadable across versions; a pickle loads only
    within the version that wrote it.
    """
    from sklearn_measattn import load_model

    folder = DATA / "pre_move"
    files = sorted(folder.glob("*.safetensors"))
    assert len(files) >= 8
    for path in files:
        yield path, load_model(path), np.load(folder / f"{path.stem}_predict.npy"), np.load(
            folder / f"{path.stem}_transport.npy")


@pytest.mark.slow
def test_models_saved_before_the_root_was_reorganised_predict_as_recorded():
    """Tiny models of every kernel, saved as model files by the version before the package root became
    subpackages, load and give the predictions and transports recorded then (within float32's
    cross-machine tolerance: they were recorded on another CPU)."""
    X = np.load(DATA / "pre_move" / "X_test.npy")
    for path, model, predicted, transported in _pre_move_models():
        assert_close_across_machines(model.predict(X), predicted, err_msg=path.stem)
        assert_close_across_machines(model.transport(X, X[:, :3] * 0.5), transported, err_msg=path.stem)


@pytest.mark.slow
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
