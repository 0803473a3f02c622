"""The phase diagram's heatmap: a cell's label contrasts with its colour, the colour scale and the text size."""

import math

import numpy as np
import pytest

from sklearn_measattn.experiments import PhaseDiagramDisplay
from sklearn_measattn.experiments._phase_display import label_color, relative_luminance

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


def _rows(values, *, face_key="attention_ess"):
    """One seed per (kernel, tail index); ``values`` maps (kernel, tail index) to the face's value."""
    rows = []
    for (kernel, alpha), value in values.items():
        row = {"task": "matrix_inverse", "tail": "pareto", "tail_index": alpha, "kernel": kernel,
               "transform": "none", "seed": 0, "collapsed": False, "learned": False, "attention_ess": 0.5,
               "energy_vs_baseline": 1.0, "status": "ok", "learned_degree": math.nan}
        row[face_key] = value
        rows.append(row)
    return rows


def _contrast(a, b):
    high, low = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _labels(display):
    """{cell text: (text colour, cell colour)} of a drawn display."""
    out = {}
    for text in display.ax_.texts:
        j, i = (round(v) for v in text.get_position())
        cell = display.image_.to_rgba(display.image_.get_array()[i, j])
        out[text.get_text()] = (matplotlib.colors.to_rgba(text.get_color()), cell)
    return out


def test_luminance_and_label_colour():
    assert relative_luminance((0, 0, 0)) == 0 and relative_luminance((1, 1, 1)) == pytest.approx(1)
    assert label_color((1, 1, 1)) == "black" and label_color((0, 0, 0)) == "white"
    assert label_color((1.0, 0.9, 0.6, 1.0)) == "black"  # a light orange, alpha ignored
    assert label_color((0.4, 0.0, 0.1)) == "white"  # a dark red
    # the choice is the one of higher contrast, over a sweep of greys and of a colormap
    for color in [(g, g, g) for g in np.linspace(0, 1, 41)] + [matplotlib.colormaps["RdBu_r"](x)
                                                             for x in np.linspace(0, 1, 41)]:
        chosen = matplotlib.colors.to_rgba(label_color(color))
        other = matplotlib.colors.to_rgba("white" if label_color(color) == "black" else "black")
        assert _contrast(chosen, color) >= _contrast(other, color)


def test_light_cells_get_dark_labels_and_dark_cells_light_ones():
    collapse = PhaseDiagramDisplay.from_rows(
        _rows({("softmax", 0.7): 0.01, ("softmax", 3.0): 0.95, ("log", 0.7): 0.5, ("log", 3.0): 0.9}),
        task="matrix_inverse", transform="none", colorbar=False)
    labels = _labels(collapse)
    assert labels["0.010"][0] == matplotlib.colors.to_rgba("white")  # viridis' dark purple end
    assert labels["0.95"][0] == matplotlib.colors.to_rgba("black")  # its yellow end
    # on the learned face a light orange cell far from the margin (1.4 of a scale to 2.9) once got a
    # white label; it now gets a black one, and the darkest red a white one
    learned = PhaseDiagramDisplay.from_rows(
        _rows({("softmax", 0.7): 2.9, ("softmax", 3.0): 1.4, ("log", 0.7): 0.8, ("log", 3.0): 0.45},
              face_key="energy_vs_baseline"),
        task="matrix_inverse", transform="none", face="learned", colorbar=False)
    labels = _labels(learned)
    assert labels["1.4"][0] == matplotlib.colors.to_rgba("black")
    assert labels["2.9"][0] == matplotlib.colors.to_rgba("white")
    assert labels["0.80"][0] == matplotlib.colors.to_rgba("black")  # white at the margin
    for display in (collapse, learned):
        for text_color, cell in _labels(display).values():
            assert _contrast(text_color, cell) >= 3.0
    matplotlib.pyplot.close("all")


def test_a_not_run_cell_shows_the_axes_background_with_a_dark_label():
    rows = _rows({("poly2", 0.4): math.nan, ("poly2", 3.0): 0.9}, face_key="energy_vs_baseline")
    rows[0]["status"] = "diverged"  # no held-out energy: the cell is left uncoloured
    display = PhaseDiagramDisplay.from_rows(rows, task="matrix_inverse", transform="none", face="learned",
                                            colorbar=False)
    (diverged,) = [t for t in display.ax_.texts if t.get_text() == "diverged"]
    assert matplotlib.colors.to_rgba(diverged.get_color()) == matplotlib.colors.to_rgba("black")  # on white
    matplotlib.pyplot.close("all")


def test_colour_scale_and_text_size_can_be_set():
    rows = _rows({("softmax", 0.7): 2.0, ("log", 0.7): 0.5}, face_key="energy_vs_baseline")
    display = PhaseDiagramDisplay.from_rows(rows, task="matrix_inverse", transform="none", face="learned",
                                            colorbar=False, fontsize=12, vmin=0.2, vmax=4.0)
    assert (display.image_.norm.vmin, display.image_.norm.vmax) == (0.2, 4.0)
    assert {t.get_fontsize() for t in display.ax_.texts} == {12}
    default = PhaseDiagramDisplay.from_rows(rows, task="matrix_inverse", transform="none", face="learned",
                                            colorbar=False)
    assert (default.image_.norm.vmin, default.image_.norm.vmax) == (0.3, 2.0)  # the values, widened to 0.3
    matplotlib.pyplot.close("all")
