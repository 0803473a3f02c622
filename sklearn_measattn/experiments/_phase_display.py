"""The phase diagram as a heatmap, in scikit-learn's Display style."""

from __future__ import annotations

import math

import numpy as np

from ..inspection import import_pyplot
from ..metrics import LEARNED_MARGIN
from ._phase import PHASE_KERNELS, kernel_threshold, phase_cells
from ._report import format_number

__all__ = ["PhaseDiagramDisplay"]

_FACES = ("collapse", "learned")


def _tail_label(tail_index):
    return "Gaussian" if math.isinf(tail_index) else f"{tail_index:g}"


def relative_luminance(color):
    """The relative luminance of a colour, as WCAG 2 defines it (0: black, 1: white).

    Parameters
    ----------
    color : sequence of float
        RGB or RGBA, each channel in ``[0, 1]`` (a colormap's output).

    Returns
    -------
    luminance : float
    """
    channels = np.asarray(color, dtype=float)[:3]
    linear = np.where(channels <= 0.04045, channels / 12.92, ((channels + 0.055) / 1.055) ** 2.4)
    return float(linear @ np.array([0.2126, 0.7152, 0.0722]))


#: Above this luminance black text contrasts with the background more than
#: white text does: the two contrast ratios, (L + 0.05) / 0.05 and
#: 1.05 / (L + 0.05), are equal at L = sqrt(1.05 * 0.05) - 0.05.
_BLACK_TEXT_ABOVE = math.sqrt(1.05 * 0.05) - 0.05


def label_color(background):
    """``"black"`` or ``"white"``, whichever contrasts more with ``background``.

    Parameters
    ----------
    background : sequence of float
        The cell's RGB or RGBA colour, channels in ``[0, 1]``.

    Returns
    -------
    color : {"black", "white"}

    Examples
    --------
    >>> from sklearn_measattn.experiments._phase_display import label_color
    >>> label_color((0.99, 0.91, 0.15)), label_color((0.27, 0.0, 0.33))  # viridis' yellow and purple ends
    ('black', 'white')
    """
    return "black" if relative_luminance(background) > _BLACK_TEXT_ABOVE else "white"


def _boundary_position(threshold, tail_indices):
    """x of the boundary line: right of the last Pareto column whose tail index is <= threshold."""
    if threshold is None or (isinstance(threshold, float) and math.isnan(threshold)):
        return None
    return sum(1 for t in tail_indices if not math.isinf(t) and t <= threshold) - 0.5


class PhaseDiagramDisplay:
    """One face of the phase diagram: kernels (by growth) against tail index, theory's thresholds drawn.

    Each cell is one (kernel, tail index) of one benchmark and transform,
    coloured by the attention ESS/n of the trained first layer (``face="collapse"``,
    log scale) or by the learned ratio, held-out energy over the best no-model
    row (``face="learned"``, centred on the learned margin). The text in a cell
    is the mean over seeds; ``*`` marks a cell whose seeds disagree on the
    verdict of that face (near a boundary), ``?`` one where the learned rule
    cannot tell in some seed. A thick black bar in each kernel's
    row marks its threshold: the integral of the values diverges for the
    columns left of it (see :func:`kernel_threshold`); a dashed bar marks
    where the normaliser, which sets the weights, diverges, when that is
    elsewhere; kernels without a fixed threshold get none. Each cell's text
    is black or white, whichever contrasts more with the cell's colour (by its
    relative luminance). Create it with :meth:`from_rows`, which draws it.
    Needs matplotlib (``pip install 'sklearn-measattn[plot]'``).

    Parameters
    ----------
    values : ndarray of shape (n_kernels, n_tails)
        The cell values (``nan``: not run).
    kernels : list of str
        Row labels, top to bottom.
    tail_indices : list of float
        Column tail indices, ``inf`` for the Gaussian control.
    thresholds : list of float or None
        One per kernel: where the integral of the values diverges (solid bar).
    weight_thresholds : list of float or None, default=None
        One per kernel: where the normaliser, and so the weights, diverge
        (dashed bar, drawn where it differs from ``thresholds``).
    face : {"collapse", "learned"}, default="collapse"
        What ``values`` hold.
    boundary : ndarray of bool of shape (n_kernels, n_tails), default=None
        Cells whose seeds disagree (marked ``*``).
    undecided : ndarray of bool of shape (n_kernels, n_tails), default=None
        Cells where the learned rule cannot tell in some seed (marked ``?``).
    diverged : ndarray of bool of shape (n_kernels, n_tails), default=None
        Cells whose training diverged in every seed: written "diverged",
        coloured as the lowest ESS/n.
    title : str, default=""
        Axes title.

    Attributes
    ----------
    ax_ : matplotlib Axes
        The axes drawn on.
    figure_ : matplotlib Figure
        Its figure.
    image_ : matplotlib AxesImage
        The heatmap.
    threshold_lines_ : dict
        ``{kernel: Line2D}``, the threshold bar of each kernel that has one.
    weight_lines_ : dict
        ``{kernel: Line2D}``, the dashed bar of the weights' threshold, where
        it differs.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn_measattn.experiments import PhaseDiagramDisplay
    >>> rows = [{"task": "sheared_swap", "tail": "pareto", "tail_index": a, "kernel": k,
    ...          "transform": "none", "seed": 0, "attention_ess": e, "energy_vs_baseline": 1.0,
    ...          "collapsed": e < 0.05, "learned": False}
    ...         for k, a, e in (("softmax", 0.7, 0.01), ("softmax", 3.0, 0.02), ("log", 0.7, 0.5),
    ...                         ("log", 3.0, 0.6))]
    >>> display = PhaseDiagramDisplay.from_rows(rows, task="sheared_swap", transform="none")
    >>> display.kernels, display.tail_indices
    (['softmax', 'log'], [0.7, 3.0])
    >>> sorted(display.threshold_lines_)
    ['log', 'softmax']
    """

    def __init__(self, *, values, kernels, tail_indices, thresholds, weight_thresholds=None, face="collapse",
                 boundary=None, undecided=None, diverged=None, title=""):
        self.values = values
        self.kernels = kernels
        self.tail_indices = tail_indices
        self.thresholds = thresholds
        self.weight_thresholds = weight_thresholds
        self.face = face
        self.boundary = boundary
        self.undecided = undecided
        self.diverged = diverged
        self.title = title

    def plot(self, *, ax=None, annotate=True, colorbar=True, fontsize=7, vmin=None, vmax=None):
        """Draw the heatmap and the threshold bars.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Where to draw; a new figure when ``None``.
        annotate : bool, default=True
            Write each cell's value in it.
        colorbar : bool, default=True
            Add a colour bar.
        fontsize : float, default=7
            Size in points of the text in the cells.
        vmin, vmax : float, default=None
            Ends of the colour scale; by default 0.01 and 1 for the collapse
            face and, for the learned face, the values' extremes, widened to
            at least 0.3 and 1.5. Pass the same ends to faces drawn side by
            side so that one colour means one value.

        Returns
        -------
        display : PhaseDiagramDisplay
            ``self``, with ``ax_``, ``figure_``, ``image_`` and ``threshold_lines_`` set.
        """
        if self.face not in _FACES:
            raise ValueError(f"face must be one of {_FACES}, got {self.face!r}.")
        plt = import_pyplot("PhaseDiagramDisplay")
        from matplotlib.colors import LogNorm, TwoSlopeNorm

        values = np.asarray(self.values, dtype=float)
        if ax is None:
            _, ax = plt.subplots(figsize=(1.0 + 0.8 * len(self.tail_indices), 0.8 + 0.45 * len(self.kernels)))
        if self.face == "collapse":
            low, high = 0.01 if vmin is None else vmin, 1.0 if vmax is None else vmax
            norm, cmap, label = LogNorm(vmin=low, vmax=high), "viridis", "attention ESS/n"
            shown = np.clip(values, low, high)
            if self.diverged is not None:
                shown = np.where(self.diverged, low, shown)
        else:
            finite = values[np.isfinite(values)]
            high = max(1.5, float(finite.max()) if finite.size else 1.5) if vmax is None else vmax
            low = min(0.3, float(finite.min()) if finite.size else 0.3) if vmin is None else vmin
            norm, cmap, label = TwoSlopeNorm(LEARNED_MARGIN, vmin=low, vmax=high), "RdBu_r", "energy / best no-model row"
            shown = values
        image = ax.imshow(np.ma.masked_invalid(shown), norm=norm, cmap=cmap, aspect="auto")
        if annotate:
            empty = ax.get_facecolor()  # what shows through a masked (not run) cell
            for i in range(values.shape[0]):
                for j in range(values.shape[1]):
                    cell = shown[i, j]
                    background = image.to_rgba(cell) if np.isfinite(cell) else empty
                    if self.diverged is not None and self.diverged[i, j]:
                        ax.text(j, i, "diverged", ha="center", va="center", fontsize=fontsize,
                                color=label_color(background))
                        continue
                    if not np.isfinite(values[i, j]):
                        continue
                    mark = "*" if self.boundary is not None and self.boundary[i, j] else ""
                    mark += "?" if self.undecided is not None and self.undecided[i, j] else ""
                    ax.text(j, i, format_number(values[i, j], 2) + mark, ha="center", va="center",
                            fontsize=fontsize, color=label_color(background))
        self.threshold_lines_ = {}
        for i, (kernel, threshold) in enumerate(zip(self.kernels, self.thresholds)):
            x = _boundary_position(threshold, self.tail_indices)
            if x is not None:
                (line,) = ax.plot([x, x], [i - 0.5, i + 0.5], color="black", linewidth=3.5, solid_capstyle="butt",
                                  clip_on=False)
                self.threshold_lines_[kernel] = line
        self.weight_lines_ = {}
        for i, (kernel, threshold) in enumerate(zip(self.kernels, self.weight_thresholds or [])):
            x = _boundary_position(threshold, self.tail_indices)
            if x is not None and x != _boundary_position(self.thresholds[i], self.tail_indices):
                (line,) = ax.plot([x, x], [i - 0.45, i + 0.45], color="black", linewidth=2.0, linestyle=(0, (2, 1.5)),
                                  clip_on=False)
                self.weight_lines_[kernel] = line
        ax.set_xticks(range(len(self.tail_indices)), [_tail_label(t) for t in self.tail_indices])
        ax.set_yticks(range(len(self.kernels)), self.kernels)
        ax.set_xlabel("tail index (Pareto)")
        ax.set_xlim(-0.5, len(self.tail_indices) - 0.5)
        ax.set_ylim(len(self.kernels) - 0.5, -0.5)
        if self.title:
            ax.set_title(self.title, fontsize=9)
        if colorbar:
            ax.figure.colorbar(image, ax=ax, label=label, fraction=0.05, pad=0.02)
        self.ax_, self.figure_, self.image_ = ax, ax.figure, image
        return self

    @classmethod
    def from_rows(cls, rows, *, task, transform, face="collapse", kernels=None, tail_indices=None, ax=None,
                  annotate=True, colorbar=True, fontsize=7, vmin=None, vmax=None):
        """Draw one face of the phase diagram from the per-seed rows of :func:`phase_diagram`.

        Parameters
        ----------
        rows : iterable of dict
            Rows of :func:`phase_diagram` (or read back from its CSV), of one
            setting (sizes and benchmark parameters).
        task : str
            Benchmark whose cells are drawn.
        transform : {"none", "symlog"}
            Transform whose cells are drawn.
        face : {"collapse", "learned"}, default="collapse"
            Attention ESS/n, or the learned ratio.
        kernels : list of str, default=None
            Rows, top to bottom; default: the kernels present, in the order of
            :data:`PHASE_KERNELS` (decreasing growth).
        tail_indices : list of float or "gaussian", default=None
            Columns; default: those present, increasing, the Gaussian control last.
        ax : matplotlib Axes, default=None
            Where to draw.
        annotate, colorbar : bool, default=True
            As in :meth:`plot`.
        fontsize : float, default=7
            As in :meth:`plot`.
        vmin, vmax : float, default=None
            As in :meth:`plot`.

        Returns
        -------
        display : PhaseDiagramDisplay

        Raises
        ------
        ValueError
            For an unknown face, no rows of ``task`` and ``transform``, or rows
            of several settings in one cell.
        """
        if face not in _FACES:
            raise ValueError(f"face must be one of {_FACES}, got {face!r}.")
        cells = [c for c in phase_cells(rows) if c["task"] == task and c["transform"] == transform]
        if not cells:
            raise ValueError(f"no rows of task={task!r} with transform={transform!r}; pass rows of phase_diagram.")
        present = {c["kernel"] for c in cells}
        if kernels is None:
            kernels = [k for k in PHASE_KERNELS if k in present] + sorted(present - set(PHASE_KERNELS))
        if tail_indices is None:
            tail_indices = sorted({c["tail_index"] for c in cells})
        else:
            tail_indices = [math.inf if t == "gaussian" else float(t) for t in tail_indices]
        values = np.full((len(kernels), len(tail_indices)), np.nan)
        boundary = np.zeros(values.shape, dtype=bool)
        diverged = np.zeros(values.shape, dtype=bool)
        undecided = np.zeros(values.shape, dtype=bool)
        degrees = {k: [] for k in kernels}
        seen = set()
        for cell in cells:
            if cell["kernel"] not in kernels or cell["tail_index"] not in tail_indices:
                continue
            i, j = kernels.index(cell["kernel"]), tail_indices.index(cell["tail_index"])
            if (i, j) in seen:
                raise ValueError(
                    f"rows of several settings (sizes or benchmark parameters) fall in the cell {cell['kernel']}, "
                    f"tail index {cell['tail_index']}; pass the rows of one setting."
                )
            seen.add((i, j))
            values[i, j] = cell["attention_ess"] if face == "collapse" else cell["energy_vs_baseline"]
            boundary[i, j] = cell["collapsed"] is None if face == "collapse" else cell["learned_split"]
            undecided[i, j] = face == "learned" and cell["learned_undecided"] > 0
            diverged[i, j] = cell["diverged"] == cell["seeds"]
            if not math.isnan(cell["learned_degree"]) and not math.isinf(cell["tail_index"]):
                degrees[cell["kernel"]].append(cell["learned_degree"])
        thresholds, weight_thresholds = [], []
        for kernel in kernels:
            if kernel not in PHASE_KERNELS:
                thresholds.append(None)
                weight_thresholds.append(None)
                continue
            degree = float(np.mean(degrees[kernel])) if degrees[kernel] else None
            thresholds.append(kernel_threshold(kernel, transform=transform, learned_degree=degree))
            weight_thresholds.append(kernel_threshold(kernel, transform=transform, learned_degree=degree,
                                                      integral="weights"))
        title = f"{task}, {transform}: " + ("attention ESS/n" if face == "collapse" else "learned ratio")
        display = cls(values=values, kernels=list(kernels), tail_indices=list(tail_indices), thresholds=thresholds,
                      weight_thresholds=weight_thresholds, face=face, boundary=boundary, undecided=undecided,
                      diverged=diverged, title=title)
        return display.plot(ax=ax, annotate=annotate, colorbar=colorbar, fontsize=fontsize, vmin=vmin, vmax=vmax)
