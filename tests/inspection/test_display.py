"""MeasureDisplay: the figure objects, their labels and titles, and refused arguments."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from numpydoc.validate import validate  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.utils._param_validation import InvalidParameterError  # noqa: E402

from sklearn_measattn import MeasureDisplay, MeasureTransformerRegressor  # noqa: E402
from sklearn_measattn.__main__ import main  # noqa: E402
from sklearn_measattn.datasets import make_matrix_inverse  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def data():
    """Inputs, targets and predictions to draw (this file's own, not the shared training data)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, 30, 3))
    y = rng.standard_normal((4, 40, 2))
    return X, y, y * 0.5 + 1


def test_from_predictions_builds_figure_axes_and_labels(data):
    X, y, y_pred = data
    display = MeasureDisplay.from_predictions(
        y, y_pred, X=X, measures=[1, 3], input_features=(0, 2), feature_names=["u", "v"],
        input_feature_names=["a", "b", "c"], measure_names=["m0", "m1", "m2", "m3"], title="held out",
    )
    assert isinstance(display.figure_, Figure)
    assert display.axes_.shape == (2, 3) and all(isinstance(a, Axes) for a in display.axes_.ravel())
    assert [a.get_title() for a in display.axes_[1]] == ["m3: input", "m3: target", "m3: predicted"]
    assert (display.axes_[0, 0].get_xlabel(), display.axes_[0, 0].get_ylabel()) == ("a", "c")
    assert (display.axes_[0, 1].get_xlabel(), display.axes_[0, 2].get_ylabel()) == ("u", "v")
    assert display.figure_._suptitle.get_text() == "held out"
    # The scatters hold the chosen measure's points in the chosen features.
    offsets = display.axes_[1, 2].collections[0].get_offsets()
    np.testing.assert_allclose(offsets, y_pred[3][:, [0, 1]])
    np.testing.assert_allclose(display.axes_[1, 0].collections[0].get_offsets(), X[3][:, [0, 2]])
    # Target and prediction share limits by default.
    assert display.axes_[0, 1].get_xlim() == display.axes_[0, 2].get_xlim()


def test_several_feature_pairs_symlog_and_no_sharing(data):
    _, y, y_pred = data
    display = MeasureDisplay.from_predictions(y, y_pred * 100, features=[(0, 1), (1, 0)], scale="symlog", share=False)
    assert display.axes_.shape == (2, 2)
    assert display.axes_[0, 0].get_xscale() == "symlog" and display.axes_[1, 1].get_yscale() == "symlog"
    assert display.axes_[1, 0].get_xlabel() == "feature 1"
    assert display.axes_[0, 0].get_xlim() != display.axes_[0, 1].get_xlim()


@pytest.mark.slow
def test_overlay_into_given_axes_and_ragged_measures():
    rng = np.random.default_rng(1)
    y = [rng.standard_normal((n, 2)) for n in (5, 12, 8)]
    y_pred = [rng.standard_normal((n, 2)) for n in (5, 12, 8)]
    fig, ax = plt.subplots()
    display = MeasureDisplay.from_predictions(y, y_pred, measures=1, ax=ax, kind="overlay", clip=0.1)
    assert display.figure_ is fig and display.axes_[0, 0] is ax
    assert ax.get_title() == "measure 1"
    assert [len(c.get_offsets()) for c in ax.collections] == [12, 12]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["target", "predicted"]
    # Drawn again with other settings, on a new figure.
    again = display.plot(kind="side_by_side")
    assert again is display and display.axes_.shape == (1, 2) and display.figure_ is not fig


@pytest.mark.slow
def test_from_estimator_predicts_the_chosen_measures(seeded_tiny_params):
    X, y = make_matrix_inverse(n_samples=6, n_points=20, random_state=0)
    model = MeasureTransformerRegressor(**{**seeded_tiny_params, "max_epochs": 1}).fit(X, y)
    display = MeasureDisplay.from_estimator(model, X, y, measures=[4], measure_names=list("abcdef"))
    assert display.axes_.shape == (1, 3)
    assert display.axes_[0, 2].get_title() == "e: predicted"
    np.testing.assert_allclose(display.axes_[0, 2].collections[0].get_offsets(), model.predict(X[4:5])[0], rtol=1e-6)
    assert MeasureDisplay.from_estimator(model, X, y, show_input=False).axes_.shape == (1, 2)
    with pytest.raises(NotFittedError):
        MeasureDisplay.from_estimator(MeasureTransformerRegressor(), X, y)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(y_pred="short"), "y_pred must be 3-D|could not be converted|strings"),
        (dict(y_pred="fewer"), "y_true has 4 measures but y_pred has 2"),
        (dict(y_pred="wide"), "y_true has 2 features per point but y_pred has 3"),
        (dict(measures=[4]), "there are 4 measures"),
        (dict(measures=[]), "measures is empty"),
        (dict(measures=[True]), "there are 4 measures"),
        (dict(features=(0, 2)), "names feature 2, but the measures have 2 features"),
        (dict(features=(0, 1, 2)), "pair of feature indices"),
        (dict(features=[]), "pair of feature indices|is empty"),
        (dict(feature_names=["u"]), "feature_names has 1 entries"),
        (dict(measure_names=["a"]), "measure_names has 1 entries"),
        (dict(kind="grid"), "'kind' parameter of MeasureDisplay.from_predictions must be a str among"),
        (dict(scale="log"), "'scale' parameter .* 'symlog' shows heavy-tailed ensembles whole"),
        (dict(clip=0.5), r"'clip' parameter .* \[0.0, 0.5\): the fraction of points in each tail"),
        (dict(X="fewer"), "X has 2 measures but y_true has 4"),
        (dict(X="narrow"), "does not exist in X, which has 1 features"),
        (dict(X="full", input_features=[(0, 1), (1, 2)]), "input_features has 2 pairs but features has 1"),
        (dict(ax="three"), "ax holds 3 Axes but this display draws 1 x 2 panels"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match, data):
    X, y, y_pred = data
    kwargs = dict(kwargs)
    replace = {"short": y_pred[0], "fewer": y_pred[:2], "wide": np.concatenate([y_pred, y_pred[..., :1]], -1)}
    if "y_pred" in kwargs:
        y_pred = replace[kwargs.pop("y_pred")]
    if "X" in kwargs:
        kwargs["X"] = {"fewer": X[:2], "narrow": X[..., :1], "full": X}[kwargs["X"]]
    if kwargs.get("ax") == "three":
        kwargs["ax"] = list(plt.subplots(1, 3)[1])
    with pytest.raises(ValueError, match=match):
        MeasureDisplay.from_predictions(y, y_pred, **kwargs)


@pytest.mark.parametrize(
    "call, name, reason",
    [
        (lambda y: MeasureDisplay.from_predictions(y, y).plot(kind="grid"), "kind", "'side_by_side', 'overlay'"),
        (lambda y: MeasureDisplay.from_predictions(y, y, features=5), "features", "a pair of feature indices"),
        (lambda y: MeasureDisplay.from_predictions(y, y, input_features=0), "input_features", "a list of pairs"),
        (lambda y: MeasureDisplay.from_estimator(MeasureTransformerRegressor(), y, y, scale="log"), "scale",
         "'symlog' shows heavy-tailed ensembles whole"),
        (lambda y: MeasureDisplay.from_estimator(MeasureTransformerRegressor(), y, y, clip=-0.1), "clip",
         "the fraction of points in each tail"),
    ],
)
def test_bad_settings_raise_invalid_parameter_error(call, name, reason, data):
    """Refused before anything is drawn or predicted (the estimator here is not even fitted)."""
    _, y, _ = data
    with pytest.raises(InvalidParameterError, match=rf"The '{name}' parameter of MeasureDisplay\.\w+ must be .*{reason}"):
        call(y)


@pytest.mark.parametrize("name", ["MeasureDisplay", "MeasureDisplay.plot", "MeasureDisplay.from_predictions",
                                  "MeasureDisplay.from_estimator"])
def test_docstrings(name):
    checks = {"GL08", "PR01", "PR02", "PR03", "PR07", "SS01", "SS03"} | ({"RT01"} if "." in name else {"EX01"})
    errors = [(c, m) for c, m in validate(f"sklearn_measattn.inspection._display.{name}")["errors"] if c in checks]
    assert not errors, errors


@pytest.mark.slow
def test_compare_plot_draws_with_the_display(tmp_path, monkeypatch):
    calls = []
    original = MeasureDisplay.from_predictions.__func__

    def recording(cls, *args, **kwargs):
        calls.append(kwargs)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(MeasureDisplay, "from_predictions", classmethod(recording))
    png = tmp_path / "compare.png"
    main(["compare", "--quick", "--kernels", "softmax", "log", "--transforms", "none", "--plot", str(png),
          "--quiet", "--n-jobs", "1"])
    assert png.stat().st_size > 0
    assert [c["kind"] for c in calls] == ["overlay", "overlay"]
    assert sorted(c["measure_names"][0] for c in calls) == ["log / none", "softmax / none"]
