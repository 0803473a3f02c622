"""MeasureTransformerRegressor: a scikit-learn estimator around a skorch net."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ._param_validation import HasMethods, StrOptions
from ._persistence import VersionStampMixin, estimator_params_as_data
from ._training import (
    CheckpointPlan,
    FittedNetwork,
    StopTraining,
    TrainingPlan,
    check_callbacks,
    check_checkpoint_dir,
    freeze_params,
    prepare_training,
    probe_loss,
    resolve_device,
    restore_network,
    same_params,
)
from ._validation import (
    NumberInterval,
    check_measures,
    check_n_features,
    check_paired_counts,
    check_validation_split,
    is_ragged,
)
from .attention import BACKENDS, resolve_backend
from .inspection import trained_attention_ess, trained_attention_weights, trained_hidden_similarity, transport_points
from .kernels import get_kernel
from .losses import get_loss
from .metrics import SCORING_SPACES, energy_distance, to_space

__all__ = ["MeasureTransformerRegressor", "StopTraining", "check_checkpoint_dir", "resolve_device"]
# (``fitted_network`` and ``restore_fitted`` below are for the package's other units: model files, the
# learned analysis step.)

_FITTED_ATTRIBUTES = ("net_", "transform_X_", "transform_y_", "n_features_in_", "n_features_out_")
_POSITIVE_INT = NumberInterval(Integral, 1, None, closed="left")
# What a continued fit does with a changed parameter (the table is MeasureTransformerRegressor._continued_fit).
_FIXED, _APPLIED, _UNRELATED = "fixed by the first fit", "applied to each continued fit", "no bearing on the network"


def _listed(names):
    """``a``, ``b`` and ``c``."""
    quoted = [f"``{name}``" for name in names]
    return ", ".join(quoted[:-1]) + " and " + quoted[-1] if len(quoted) > 1 else quoted[0]


class MeasureTransformerRegressor(VersionStampMixin, RegressorMixin, BaseEstimator):
    """Measure-to-measure regression with a kernel-attention transformer.

    Each sample of ``X`` is an input ensemble (an empirical measure, shape
    ``(n_points, n_features)``) and each sample of ``y`` its target ensemble.
    A post-norm :class:`~sklearn_measattn.transformer.MeasureTransformer` maps
    every input point to an output point, attending to the whole input measure
    with the chosen attention kernel, and is trained with a distance between
    the predicted and target ensembles (energy distance by default), so ``y``
    need not be paired with ``X`` point by point, nor have as many points.
    Training runs through a skorch ``NeuralNetRegressor`` (``net_``).

    Parameters
    ----------
    kernel : str or callable, default="log"
        Attention kernel: ``"softmax"``, ``"poly"``, ``"log"``, ``"sigmoid"``,
        ``"softplus"``, the bounded-support ``"compact"`` and ``"sparsemax"``,
        or a callable log-weight ``g`` (see
        :func:`~sklearn_measattn.kernels.get_kernel`). Slower-growing kernels
        avoid ensemble collapse on heavy-tailed data.
    kernel_params : dict, default=None
        Kernel parameters, e.g. ``{"degree": 2}`` for ``"poly"``.
        ``kernel="poly", kernel_params={"degree": "learn"}`` learns one positive
        degree per layer and head with the network (starting at 1; see
        :class:`~sklearn_measattn.transformer.KernelMultiheadAttention` for the
        parameterisation and the backend it runs on), reported after fit by
        :attr:`learned_kernel_params_`.
    transform : None, "symlog" or transformer, default=None
        Pointwise transform fitted on the points of ``X`` and (separately) of
        ``y``, applied before training and inverted on the predictions.
        ``"symlog"`` is :class:`~sklearn_measattn.preprocessing.SymlogTransformer`;
        any scikit-learn transformer with ``inverse_transform`` works (it sees
        the points as rows of a 2-D array).
    d_model : int, default=64
        Width of the hidden point features.
    n_heads : int, default=4
        Attention heads; must divide ``d_model``.
    n_layers : int, default=2
        Transformer blocks.
    dim_feedforward : int, default=128
        Hidden width of the feed-forward networks.
    norm : {"post", "pre"}, default="post"
        Post-norm blocks (LayerNorm after each residual) or pre-norm.
    activation : {"gelu", "relu", "tanh"}, default="gelu"
        Activation of the feed-forward networks.
    dropout : float, default=0.0
        Dropout rate in [0, 1).
    residual : bool, default=False
        Learn a displacement: each output point is its input point's first
        ``n_features_out`` features plus the network's output, which starts
        at zero, so that the untrained model is the identity map (for
        targets close to their inputs, such as an ensemble updated by a weak
        observation). The sum is taken after ``transform``: the identity
        carries over to the original space when the targets' transform is
        the inputs' (None, or the same fixed scale). Needs
        ``n_features_out <= n_features_in``.
    loss : str or callable, default="energy"
        ``"energy"``, ``"sliced"``, ``"sinkhorn"``, ``"mse"`` (paired targets),
        ``"quantile"`` (one output feature, its points read as quantiles)
        or a callable ``loss(y_pred, y_true, pred_weights, true_weights)``;
        see :mod:`sklearn_measattn.losses`.
    loss_params : dict, default=None
        Keyword parameters of the loss, e.g. ``{"n_projections": 32}``.
    lr : float, default=1e-3
        Learning rate of AdamW (its peak with ``lr_schedule="onecycle"``).
    lr_schedule : {"constant", "onecycle"}, default="constant"
        ``"constant"`` trains at ``lr`` throughout; ``"onecycle"`` warms up
        from ``lr / 25`` to ``lr`` over the first 30% of the training steps
        and then decays to ``lr / 1e4`` (cosine curves, set before every
        batch), which reaches a given loss in fewer epochs (measured in the
        repository's ``benchmarks/RESULTS.md``). Each :meth:`fit` is one cycle over
        ``max_epochs``; a warm start or a :meth:`partial_fit` call runs a
        new cycle over its own epochs; a fit resumed from a checkpoint
        continues its cycle.
    weight_decay : float, default=0.0
        AdamW weight decay.
    batch_size : int, default=32
        Measures per batch.
    max_epochs : int, default=100
        Training epochs (an upper bound with ``early_stopping``).
    shuffle : bool, default=True
        Shuffle the training measures each epoch (from a private generator
        seeded by ``random_state``).
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the measures and stop when their
        loss has not improved for ``patience`` epochs, keeping the best weights.
    validation_fraction : float, default=0.1
        Held-out fraction for early stopping, in (0, 1).
    patience : int, default=5
        Epochs without improvement before stopping.
    device : {"auto", "cpu", "cuda"}, "cuda:N" or torch.device, default="auto"
        ``"auto"`` uses CUDA when available; a :class:`torch.device` of type
        cpu or cuda works as its string does.
    attention_backend : {"auto", "sdpa", "flex", "fused", "chunked", "naive"}, default="auto"
        How attention is computed, see
        :func:`~sklearn_measattn.attention.kernel_attention` and :ref:`gpu`.
        ``"auto"``: SDPA for softmax, FlexAttention on CUDA, the fused C++
        kernels on CPU (compiled on first use), else ``"chunked"``. A backend
        that cannot run the kernel on the chosen device raises ``ValueError``
        in ``fit`` before training.
    random_state : int, RandomState instance or None, default=None
        Seeds weight initialisation, shuffling, dropout and the validation
        split; an int gives identical predictions on CPU. The global torch
        random state is left untouched.
    verbose : int, default=0
        0 is silent; 1 prints skorch's per-epoch table and a progress bar.
    callbacks : list of skorch callbacks, default=None
        Extra callbacks (e.g. ``skorch.callbacks.LRScheduler``,
        ``Checkpoint``), as objects or ``(name, callback)`` pairs. To end
        training early from a callback, raise
        :class:`~sklearn_measattn.StopTraining` (a bare ``KeyboardInterrupt``
        means Ctrl-C: ``fit`` raises it and leaves the estimator unfitted).
    score_space : {"raw", "symlog"}, default="raw"
        Where :meth:`score` compares predicted and target measures: as they
        are, or after ``sign(y) * log1p(|y|)`` of every coordinate (see
        :func:`~sklearn_measattn.metrics.to_space`). On data with infinite
        moments the raw energy distance is dominated by a few extreme points;
        use ``"symlog"`` there. It does not change training.
    warm_start : bool, default=False
        When True and the estimator is fitted, :meth:`fit` continues training
        the fitted net for ``max_epochs`` more epochs (keeping its weights,
        optimizer state, fitted transforms and history) instead of starting
        afresh; :meth:`partial_fit` always continues, one epoch at a time. A
        continued fit trains with the parameters the estimator shows:
        APPLIED_ON_A_CONTINUED_FIT changed by ``set_params`` since the last fit
        apply to it (the optimizer keeps its state under the new learning rate
        and weight decay). A change of FIXED_BY_THE_FIRST_FIT raises
        ``ValueError`` before any training (set it back, or fit afresh with
        ``warm_start=False``). The
        data must have the fitted numbers of features.
    distributed : bool, default=False
        Train data-parallel on the process group that a launcher sets up
        (``torchrun``, ``accelerate launch``, Slurm's ``srun`` with
        ``MASTER_ADDR`` and ``MASTER_PORT``), or that the script created with
        ``torch.distributed.init_process_group``; without one, :meth:`fit`
        creates it from the launcher's environment (``gloo`` on the CPU,
        ``nccl`` on CUDA, each process on ``cuda:LOCAL_RANK``). Every process
        runs the same script on the same full ``X`` and ``y`` (checked); each
        epoch, each trains on its shard of the measures and the gradients are
        averaged before every optimiser step, so all processes end with the
        same fitted estimator. ``batch_size`` is per process: the effective
        batch is ``batch_size x world_size``. Only the first process prints
        progress; early stopping decides on the whole validation split, the
        same on every process; a non-finite value on one process stops all.
        The fitted estimator pickles and predicts in a single process.
        :meth:`partial_fit` and ``warm_start`` are refused with it. See
        :ref:`scaling`.
    context_size : int, default=None
        Attend to a random subsample of at most ``context_size`` points of
        each measure instead of all of them (``None``: the whole measure).
        Attention is an integral against the input measure, and a uniform
        subsample estimates it without bias, at ``O(n_points x
        context_size)`` instead of ``O(n_points^2)``. In training, every
        measure gets a fresh subsample at every step (its target a matching
        one, of the same size; the same points with ``loss="mse"``), drawn
        from a private generator seeded by ``random_state``, so a step costs
        the same for ensembles of a thousand or a million points. In
        :meth:`predict` and :meth:`transport`, every point of the input
        measure (every query point) is a query against one fixed subsample of
        the measure, so every point gets its image. Measures with at most
        ``context_size`` points are used whole, exactly as with ``None``.
        Weighted and ragged measures subsample their real points and keep
        their weights. On heavy-tailed measures a subsample estimates the
        slow kernels' integrals well and softmax's badly: softmax's weight
        sits on the few most extreme points, which a subsample usually
        misses (see :ref:`scaling`). The diagnostics
        (:meth:`attention_ess`, :meth:`hidden_similarity`) use whole measures.
    checkpoint_dir : str or path-like, default=None
        A directory (created if missing) where :meth:`fit` writes a
        checkpoint, ``checkpoint.safetensors``, at the end of every epoch and
        when training ends: the network, the optimiser's state, the history,
        the state of every private random stream, the early-stopping state,
        the fitted transforms, the parameters and a fingerprint of the data.
        Each write is atomic (a crash while writing leaves the previous
        checkpoint intact). A fit with the same parameters and data on a
        directory that holds a checkpoint resumes from its last epoch (and
        says so on stderr), ending with the model an uninterrupted fit would
        have; a checkpoint of a finished fit is loaded without training. A
        checkpoint of other parameters or data is refused with a
        ``ValueError`` that names the differences. Only ``verbose``,
        ``callbacks`` and ``device`` may differ on resume (the state of
        user callbacks, e.g. a learning-rate scheduler, is not saved). In a
        data-parallel fit the first process writes and every process
        resumes. Not with :meth:`partial_fit` or a warm-start continuation.

    Attributes
    ----------
    net_ : skorch.NeuralNetRegressor
        The trained net; ``net_.module_`` is the ``MeasureTransformer``.
    history_ : skorch.History
        Per-epoch (and per-batch) losses and timings.
    n_features_in_ : int
        Features per input point.
    n_features_out_ : int
        Features per target point.
    transform_X_, transform_y_ : transformer or None
        The fitted transforms of the input and target points.
    device_ : str
        The device the net was trained on.

    Examples
    --------
    >>> from sklearn_measattn import MeasureTransformerRegressor
    >>> from sklearn_measattn.datasets import make_matrix_inverse
    >>> X, y = make_matrix_inverse(n_samples=16, n_points=32, tail="gaussian", random_state=0)
    >>> model = MeasureTransformerRegressor(
    ...     kernel="log", d_model=16, n_heads=2, n_layers=1, max_epochs=2, random_state=0
    ... ).fit(X, y)
    >>> model.predict(X[:2]).shape
    (2, 32, 2)
    >>> model.predict(X[:2, :10]).shape  # any number of points at inference
    (2, 10, 2)
    >>> score = model.score(X, y)  # negative energy distance, higher is better
    >>> model.attention_ess(X[:3]).shape  # trained attention ESS / n per measure and head
    (3, 2)
    """

    # One statement of each hyper-parameter's domain, checked by scikit-learn's
    # ``_validate_params`` at the start of fit. Parameters whose domain depends
    # on other values (kernel, loss and their params, device, callbacks) are
    # checked by their own homes in ``_check_params``.
    _parameter_constraints: dict = {
        "kernel": [str, callable],
        "kernel_params": [dict, None],
        "transform": [StrOptions({"symlog"}), HasMethods(["fit", "transform", "inverse_transform"]), None],
        "d_model": [_POSITIVE_INT],
        "n_heads": [_POSITIVE_INT],
        "n_layers": [_POSITIVE_INT],
        "dim_feedforward": [_POSITIVE_INT],
        "norm": [StrOptions({"post", "pre"})],
        "activation": [StrOptions({"gelu", "relu", "tanh"})],
        "residual": ["boolean"],
        "dropout": [NumberInterval(Real, 0, 1, closed="left")],
        "loss": [str, callable],
        "loss_params": [dict, None],
        "lr": [NumberInterval(Real, 0, None, closed="neither")],
        "lr_schedule": [StrOptions({"constant", "onecycle"})],
        "weight_decay": [NumberInterval(Real, 0, None, closed="left")],
        "batch_size": [_POSITIVE_INT],
        "max_epochs": [_POSITIVE_INT],
        "shuffle": ["boolean"],
        "early_stopping": ["boolean"],
        "validation_fraction": [NumberInterval(Real, 0, 1, closed="neither")],
        "patience": [_POSITIVE_INT],
        "device": [str, torch.device],
        "attention_backend": [StrOptions(set(BACKENDS))],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callbacks": [list, tuple, None],
        "score_space": [StrOptions(set(SCORING_SPACES))],
        "warm_start": ["boolean"],
        "distributed": ["boolean"],
        "context_size": [_POSITIVE_INT, None],
        "checkpoint_dir": [str, HasMethods(["__fspath__"]), None],
    }

    #: What a continued fit (``warm_start=True``, :meth:`partial_fit`) does with each parameter
    #: changed since the last fit: the network, its kernel, the fitted transforms, the device
    #: and the seeds of its random streams are fixed by the first fit; the optimiser, the
    #: batches, the epochs, the loss and the callbacks apply to each continued fit; the rest
    #: does not concern the fitted network. The ``warm_start`` docstring and the error that
    #: refuses a change are written from this table.
    _continued_fit: dict = {
        "kernel": _FIXED, "kernel_params": _FIXED, "transform": _FIXED, "d_model": _FIXED, "n_heads": _FIXED,
        "n_layers": _FIXED, "dim_feedforward": _FIXED, "norm": _FIXED, "activation": _FIXED, "dropout": _FIXED,
        "residual": _FIXED,
        "attention_backend": _FIXED, "random_state": _FIXED, "shuffle": _FIXED, "distributed": _FIXED,
        "context_size": _FIXED, "device": _FIXED,
        "lr": _APPLIED, "lr_schedule": _APPLIED, "weight_decay": _APPLIED, "batch_size": _APPLIED,
        "max_epochs": _APPLIED, "loss": _APPLIED, "loss_params": _APPLIED, "callbacks": _APPLIED,
        "verbose": _APPLIED, "early_stopping": _APPLIED, "validation_fraction": _APPLIED, "patience": _APPLIED,
        "score_space": _UNRELATED, "warm_start": _UNRELATED, "checkpoint_dir": _UNRELATED,
    }
    #: What a fit that resumes from its checkpoint may change: how it reports, where it runs and
    #: checkpoints; any other difference means the checkpoint belongs to another fit.
    _free_on_resume = ("verbose", "callbacks", "checkpoint_dir", "device")

    def __init__(
        self,
        *,
        kernel="log",
        kernel_params=None,
        transform=None,
        d_model=64,
        n_heads=4,
        n_layers=2,
        dim_feedforward=128,
        norm="post",
        activation="gelu",
        dropout=0.0,
        residual=False,
        loss="energy",
        loss_params=None,
        lr=1e-3,
        lr_schedule="constant",
        weight_decay=0.0,
        batch_size=32,
        max_epochs=100,
        shuffle=True,
        early_stopping=False,
        validation_fraction=0.1,
        patience=5,
        device="auto",
        attention_backend="auto",
        random_state=None,
        verbose=0,
        callbacks=None,
        score_space="raw",
        warm_start=False,
        distributed=False,
        context_size=None,
        checkpoint_dir=None,
    ):
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.transform = transform
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.dim_feedforward = dim_feedforward
        self.norm = norm
        self.activation = activation
        self.dropout = dropout
        self.residual = residual
        self.loss = loss
        self.loss_params = loss_params
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.shuffle = shuffle
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.device = device
        self.attention_backend = attention_backend
        self.random_state = random_state
        self.verbose = verbose
        self.callbacks = callbacks
        self.score_space = score_space
        self.warm_start = warm_start
        self.distributed = distributed
        self.context_size = context_size
        self.checkpoint_dir = checkpoint_dir

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.input_tags.two_d_array = False
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        tags.regressor_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Train the transformer to map each measure of ``X`` to that of ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures; a list of ``(n_points_i, n_features_in)`` arrays
            is a ragged batch (padded internally, padding weighted 0).
        y : array-like of shape (n_samples, n_points_out, n_features_out) or list
            Target measures; ``n_points_out`` may differ from ``n_points``
            (except with ``loss="mse"``).

        Returns
        -------
        self : MeasureTransformerRegressor
            The fitted estimator.

        Raises
        ------
        ValueError
            On an invalid parameter (the message names it) or invalid data,
            before any training.
        FloatingPointError
            When the training loss becomes non-finite; the estimator is then
            left unfitted.
        KeyboardInterrupt
            On Ctrl-C during training, or a ``KeyboardInterrupt`` raised
            anywhere in it (a callback's hooks included); the estimator is then
            left unfitted (skorch would keep the half-trained net). A callback
            ends training early and keeps the model by raising
            :class:`~sklearn_measattn.StopTraining`; skorch's ``EarlyStopping``
            keeps working as in skorch.

        Notes
        -----
        With ``warm_start=True`` a fitted estimator continues training its
        net for ``max_epochs`` more epochs on this data, keeping the fitted
        transforms, with the training parameters it now shows; see
        ``warm_start`` for which parameters may change between fits.
        """
        continuing = self.warm_start and hasattr(self, "net_")
        return self._fit(X, y, continuing=continuing, continuation="a warm start" if continuing else None,
                         epochs=None)

    def partial_fit(self, X, y):
        """Train for one more epoch (pass over ``X``), continuing from the fitted net.

        The first call on an unfitted estimator builds the network and fits
        the transforms on this data, then trains one epoch; later calls keep
        the weights, optimizer state, transforms and history, as skorch's
        ``partial_fit`` does. ``max_epochs`` does not apply; the other
        training parameters changed since the last fit do, and a changed
        architecture, kernel or transform is refused, as for ``warm_start``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures.
        y : array-like of shape (n_samples, n_points_out, n_features_out) or list
            Target measures.

        Returns
        -------
        self : MeasureTransformerRegressor
            The estimator, trained one more epoch.

        Raises
        ------
        ValueError
            On invalid parameters or data, data whose number of features
            differs from the fitted one, or a parameter fixed by the first fit
            that has changed since (see ``warm_start``), before any training.
        FloatingPointError
            When the training loss becomes non-finite; the estimator is then
            left unfitted.

        Examples
        --------
        >>> from sklearn_measattn import MeasureTransformerRegressor
        >>> from sklearn_measattn.datasets import make_matrix_inverse
        >>> X, y = make_matrix_inverse(n_samples=8, n_points=16, random_state=0)
        >>> model = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, random_state=0)
        >>> for _ in range(3):
        ...     model = model.partial_fit(X, y)
        >>> len(model.history_)
        3
        """
        return self._fit(X, y, continuing=hasattr(self, "net_"), continuation="partial_fit", epochs=1)

    def _fit(self, X, y, *, continuing, continuation, epochs):
        """Check, then train for ``epochs`` (None: ``max_epochs``): the fitted network when ``continuing``,
        else a fresh one. ``continuation`` names the call that continues (refused with distributed training
        or a checkpoint), or is None. The estimator is fitted only if training ends."""
        device = self._check_params()["device"]
        if continuation is not None:
            self._refuse_distributed_continuation()
            self._refuse_checkpointed_continuation(continuation)
        if continuing:
            self._check_fixed_since_fit(device)
        data = self._checked_data(X, y, fitted=continuing)
        training = prepare_training(self._plan(device), data, network=self._network() if continuing else None)
        params = freeze_params(self.get_params(deep=False))
        # A failed fit leaves the estimator unfitted, never half-fitted.
        self._forget_fit()
        self._become_fitted(training.run(epochs=epochs), params)
        return self

    def _refuse_distributed_continuation(self):
        if self.distributed:
            raise ValueError(
                "distributed=True trains with fit from scratch; partial_fit and warm_start are not supported "
                "with it. Fit with warm_start=False, or continue training in a single process with "
                "distributed=False on a fresh estimator."
            )

    def _refuse_checkpointed_continuation(self, what):
        if self.checkpoint_dir is not None:
            raise ValueError(
                f"checkpoint_dir={self.checkpoint_dir!r} checkpoints and resumes fit from scratch; {what} "
                "continues the fitted network in memory instead. Set checkpoint_dir=None for it (or fit with "
                "warm_start=False to use the checkpoint)."
            )

    def _checked_data(self, X, y, *, fitted):
        """``X, x_weights, y, y_weights`` checked for training (against the fitted shapes when ``fitted``)."""
        X, x_weights = check_measures(X, input_name="X")
        y, y_weights = check_measures(y, input_name="y")
        if fitted:
            check_n_features(X, self.n_features_in_)
            check_n_features(y, self.n_features_out_, input_name="y")
        if X.shape[0] != y.shape[0]:
            raise ValueError(
                f"X has {X.shape[0]} measures but y has {y.shape[0]}; each input measure needs "
                "its target measure."
            )
        if self.loss == "mse":
            check_paired_counts(X, x_weights, y, y_weights)
        if self.early_stopping:
            check_validation_split(X.shape[0], self.validation_fraction)
        probe_loss(self.loss, self.loss_params or {}, y.shape[-1])
        return X, x_weights, y, y_weights

    def _plan(self, device):
        """What to train, for the training home: see :class:`~._training.TrainingPlan`."""
        checkpoint = None
        if self.checkpoint_dir is not None:
            checkpoint = CheckpointPlan(self.checkpoint_dir, estimator_params_as_data(self), self._free_on_resume)
        return TrainingPlan(
            module_params=self._module_params(), net_params=self._net_params(), transform=self.transform,
            random_state=self.random_state, device=device, distributed=self.distributed, checkpoint=checkpoint,
        )

    def _network(self):
        """The fitted network, with what runs it (the batch size and context size the estimator shows now)."""
        check_is_fitted(self, "net_")
        return FittedNetwork(
            self.net_, transform_X=self.transform_X_, transform_y=self.transform_y_,
            n_features_in=self.n_features_in_, n_features_out=self.n_features_out_, transform=self.transform,
            batch_size=self.batch_size, context_size=self.context_size, owner=type(self).__name__,
        )

    def _forget_fit(self):
        for attribute in (*_FITTED_ATTRIBUTES, "_fitted_params"):
            self.__dict__.pop(attribute, None)

    def _become_fitted(self, network, params):
        """Hold ``network`` as the fitted one; ``params`` (frozen) are those it was trained with, which a
        continued fit compares against."""
        self.net_ = network.net
        self.transform_X_ = network.transform_X
        self.transform_y_ = network.transform_y
        self.n_features_in_ = network.n_features_in
        self.n_features_out_ = network.n_features_out
        self._fitted_params = params
        # Inference then finds the module in evaluation mode and leaves it be: switching modes there and back
        # walks every submodule twice, a few percent of a small network's call, which a filter makes every
        # cycle. A continued fit switches back to training mode at its first batch.
        network.module.eval()

    @property
    def device_(self):
        """The device the fitted net runs on (``"cpu"`` after loading a CUDA-trained model without CUDA)."""
        check_is_fitted(self, "net_")
        return str(self.net_.device)

    def _check_fixed_since_fit(self, device):
        """Refuse a warm start or partial fit after a change the fitted net cannot take."""
        before = getattr(self, "_fitted_params", None)
        now = freeze_params(self.get_params(deep=False))
        fixed = [name for name, rule in self._continued_fit.items() if rule == _FIXED and name != "device"]
        changed = [] if before is None else [name for name in fixed if not same_params(before.get(name), now.get(name))]
        shown = [f"{name}={getattr(self, name)!r}" for name in changed]
        if device != self.device_:  # compared resolved: "auto" may still name the fitted device
            shown.append(f"device={self.device!r} (fitted on {self.device_!r})")
        if shown:
            applied = [name for name, rule in self._continued_fit.items() if rule == _APPLIED]
            raise ValueError(
                f"Cannot continue training the fitted network: {', '.join(shown)} changed since it was fitted. "
                f"A warm start or partial_fit keeps what is {_FIXED} and applies only {', '.join(applied)}. "
                "Set these back, or fit afresh with warm_start=False."
            )

    def _module_params(self):
        """The keyword arguments of the :class:`~sklearn_measattn.transformer.MeasureTransformer`, besides its
        feature counts and seed: the one place where the estimator's parameters become the network's."""
        return {
            "d_model": self.d_model,
            "n_heads": self.n_heads,
            "n_layers": self.n_layers,
            "dim_feedforward": self.dim_feedforward,
            "dropout": self.dropout,
            "kernel": self.kernel,
            "kernel_params": self.kernel_params,
            "norm_first": self.norm == "pre",
            "activation": self.activation,
            "residual": self.residual,
            "attention_backend": self.attention_backend,
        }

    def _net_params(self):
        """The keyword arguments of the training net besides the network's, which a continued fit updates.

        skorch's own (the loss's as ``criterion__*``, the optimiser's) and the
        training options ``callbacks``, ``lr_schedule``, ``early_stopping`` and
        ``context_size``.
        """
        return {
            "criterion__name": self.loss,
            **{f"criterion__{key}": value for key, value in (self.loss_params or {}).items()},
            "lr": self.lr,
            "optimizer__weight_decay": self.weight_decay,
            "batch_size": self.batch_size,
            "max_epochs": self.max_epochs,
            "iterator_train__shuffle": self.shuffle,
            "verbose": self.verbose,
            "callbacks": self.callbacks,
            "lr_schedule": self.lr_schedule,
            "early_stopping": {"patience": self.patience, "validation_fraction": self.validation_fraction}
            if self.early_stopping else None,
            "context_size": self.context_size,
        }

    def set_params(self, **params):
        """Set the estimator's parameters, as in scikit-learn.

        ``name__key`` sets parameter ``key`` of the estimator held in ``name``
        (e.g. ``transform__scale`` for a ``SymlogTransformer`` instance). The
        dict parameters ``kernel_params`` and ``loss_params`` and string
        values are not estimators: set them whole.

        Parameters
        ----------
        **params : dict
            Parameter names and their new values.

        Returns
        -------
        self : MeasureTransformerRegressor
            The estimator.

        Raises
        ------
        ValueError
            For an unknown parameter, or a ``name__key`` whose ``name`` holds a
            value without parameters of its own (a dict, a string, None).
        """
        own = self.get_params(deep=False)
        for key in params:
            name, nested, sub = key.partition("__")
            if not nested or name not in own:
                continue  # plain parameters and unknown names: scikit-learn's own checks
            value = params.get(name, own[name])
            if hasattr(value, "set_params"):
                continue
            if isinstance(value, dict) or (value is None and name.endswith("_params")):
                raise ValueError(
                    f"Cannot set {key}: {name} is a dict of keyword arguments, not an estimator, so "
                    f"its entries are not parameters of their own. Set the whole dict, e.g. "
                    f"set_params({name}={{**(model.{name} or {{}}), {sub!r}: value}}), or search over "
                    f"a list of dicts for {name!r}."
                )
            raise ValueError(
                f"Cannot set {key}: {name}={value!r} is not an estimator with parameters of its own. "
                f"Set {name} itself (e.g. set_params({name}=...)), or pass an object with set_params."
            )
        return super().set_params(**params)

    @property
    def history_(self):
        """The skorch ``History`` of the last fit (losses per epoch and batch)."""
        check_is_fitted(self, "net_")
        return self.net_.history

    def predict(self, X, *, batch_size=None):
        """Predict the output measure of each input measure.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures; ``n_points`` may differ from the training data. A
            list of 2-D arrays (ragged batch) gives a list of predictions.
        batch_size : int, default=None
            Measures per forward pass (default: the estimator's ``batch_size``;
            the predictions do not depend on it).

        Returns
        -------
        y_pred : ndarray of shape (n_samples, n_points, n_features_out) or list
            One output point per input point; a list of
            ``(n_points_i, n_features_out)`` arrays for a list input.

        Raises
        ------
        ValueError
            On invalid measures (wrong rank, NaN/inf, empty, wrong
            ``n_features``) or values beyond the float32 range of the network,
            or a ``batch_size`` that is not a positive integer.
        FloatingPointError
            When the network's output is not finite (extreme inputs without
            ``transform="symlog"``); NaN is never returned.
        """
        network = self._network()
        checked_batch_size = network.checked_batch_size(batch_size, method="predict")
        ragged = is_ragged(X)
        measures = X
        X, x_weights, X_model = network.inputs(X)
        largest_measure = X.shape[1] if x_weights is None else int((x_weights > 0).sum(axis=1).max())
        if self.context_size is not None and largest_measure > self.context_size:
            # every point a query against a subsampled context
            return transport_points(network, measures, measures, batch_size=batch_size)
        y_model = network.outputs(X_model, x_weights, checked_batch_size)
        y_pred = network.targets(y_model, float(np.max(np.abs(X_model))))
        if ragged:
            lengths = x_weights.sum(axis=1).astype(int) if x_weights is not None else [X.shape[1]] * len(X)
            return [y_pred[i, :n] for i, n in enumerate(lengths)]
        return y_pred

    def transport(self, X, points, *, batch_size=None):
        """Evaluate the learnt map of each measure at new points.

        A fitted model maps every point ``x`` to ``T_mu(x)``, where the input
        measure ``mu`` enters through attention. Here ``X[i]`` is the context
        that sets ``mu`` and ``points[i]`` are query points: at every layer they
        attend to the points of ``X[i]`` but are not part of the measure (they
        get no weight as keys). Hence ``transport(X, X)`` equals
        ``predict(X)`` (to float32 rounding), the image of a query point does
        not depend on the other query points, and a small context can push a
        large ensemble (or a grid) through its map. The fitted ``transform`` is
        applied to the context and the points and inverted on the images.
        Memory grows linearly in ``n_points + n_queries`` on the fused and
        chunked attention backends.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            The context measures; a list of 2-D arrays is a ragged batch.
        points : array-like of shape (n_samples, n_queries, n_features_in) or list
            Query points, one set per measure; ``n_queries`` is free. A list of
            ``(n_queries_i, n_features_in)`` arrays gives each measure its own
            number of query points.
        batch_size : int, default=None
            Measures per forward pass (default: the fitted ``batch_size``,
            fewer when the measures have many query points, so that a pass
            holds about 262144 of them; the images do not depend on it).

        Returns
        -------
        images : ndarray of shape (n_samples, n_queries, n_features_out) or list
            The image of every query point; a list of
            ``(n_queries_i, n_features_out)`` arrays when ``points`` is a list.

        Raises
        ------
        ValueError
            Before any computation, on invalid measures or points (wrong rank,
            NaN/inf, empty, features other than the fitted ``n_features_in_``),
            or when ``X`` and ``points`` hold different numbers of measures.
        FloatingPointError
            When the network's output is not finite; NaN is never returned.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn import MeasureTransformerRegressor
        >>> from sklearn_measattn.datasets import make_matrix_inverse
        >>> X, y = make_matrix_inverse(n_samples=8, n_points=32, random_state=0)
        >>> model = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, max_epochs=2,
        ...                                     random_state=0).fit(X, y)
        >>> grid = np.stack(np.meshgrid(np.linspace(-2, 2, 10), np.linspace(-2, 2, 10)), -1).reshape(-1, 2)
        >>> model.transport(X[:2], np.stack([grid, grid])).shape  # 100 query points per measure
        (2, 100, 2)
        >>> bool(np.allclose(model.transport(X, X), model.predict(X), atol=1e-5))
        True
        """
        return transport_points(self._network(), X, points, batch_size=batch_size)

    def score(self, X, y, sample_weight=None):
        """Negative energy distance between predicted and target measures.

        :class:`~sklearn.base.RegressorMixin`'s R^2 does not take 3-D targets;
        higher is better, 0 is perfect. With ``score_space="symlog"`` both
        measures are compared after symlog of every coordinate.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures.
        y : array-like of shape (n_samples, n_points_out, n_features_out) or list
            Target measures.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the measures in the average.

        Returns
        -------
        score : float
            ``-energy_distance(y, self.predict(X))`` in ``score_space``.
        """
        space = self.score_space
        return -energy_distance(to_space(y, space), to_space(self.predict(X), space), sample_weight=sample_weight)

    # --------------------------------------------------------- diagnostics
    def attention_ess(self, X, *, layer=0, max_queries=None, random_state=0, batch_size=None):
        """Effective sample size of the trained attention on measures ``X``, per head.

        For every measure, the attention weights of block ``layer`` are
        ``w_ij = a_j kappa(s_ij) / sum_l a_l kappa(s_il)`` with the model's
        learnt queries and keys (point weights ``a`` respected; padding of a
        ragged batch has weight 0). The ESS of query ``i`` is
        ``1 / sum_j w_ij^2``, as a fraction of the measure's own effective size
        ``1 / sum_j a_j^2`` (``n`` for uniform weights), averaged over queries
        with weights ``a_i``: the same definition as
        :func:`sklearn_measattn.metrics.attention_ess`, on the trained model
        instead of random projections. Near ``1/n``: every query puts all its
        weight on one point (attention collapse); near 1: flat attention.

        Computed in float64 one block of queries at a time, so the N x N
        weights are never held in memory.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures, raw (the fitted ``transform`` is applied here).
        layer : int, default=0
            Block whose attention is measured, ``0 <= layer < n_layers``. The
            first block is the one that sees the data's scale.
        max_queries : int, default=None
            Evaluate at most this many queries per measure, drawn at random
            among its present points (each against all keys): an unbiased
            estimate at a fraction of the cost for large ``n_points``.
            ``None`` uses every query.
        random_state : int, RandomState instance or None, default=0
            Seeds the query subsample.
        batch_size : int, default=None
            Measures per forward pass (default: the fitted ``batch_size``).

        Returns
        -------
        ess : ndarray of shape (n_samples, n_heads)
            ESS / n in ``(0, 1]`` per measure and head.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn import MeasureTransformerRegressor
        >>> from sklearn_measattn.datasets import make_matrix_inverse
        >>> X, y = make_matrix_inverse(n_samples=8, n_points=32, tail="pareto", tail_index=0.7,
        ...                            random_state=0)
        >>> model = MeasureTransformerRegressor(kernel="softmax", d_model=16, n_heads=2, n_layers=1,
        ...                                     max_epochs=1, random_state=0).fit(X, y)
        >>> ess = model.attention_ess(X)
        >>> ess.shape
        (8, 2)
        >>> bool(np.median(ess) < 0.1)  # softmax on raw Pareto(0.7) data: one point takes the weight
        True
        """
        return trained_attention_ess(
            self._network(), X, layer=layer, max_queries=max_queries, random_state=random_state, batch_size=batch_size
        )

    def attention_weights(self, X, *, layer=0, batch_size=None):
        """The trained attention weights of block ``layer`` on measures ``X`` (for plots).

        Materialises ``n_points x n_points`` weights per measure and head, so it
        is meant for small measures; :meth:`attention_ess` summarises large ones
        without doing so.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures, raw.
        layer : int, default=0
            Block whose attention is returned.
        batch_size : int, default=None
            Measures per forward pass (default: the fitted ``batch_size``).

        Returns
        -------
        weights : ndarray of shape (n_samples, n_heads, n_points, n_points) or list
            ``weights[i, h, q, j]``: how much query point ``q`` of measure ``i``
            attends to point ``j`` in head ``h``; each row sums to 1. For a
            list (ragged) input, a list of ``(n_heads, n_i, n_i)`` arrays.

        Raises
        ------
        ValueError
            When the weights would take more than 2 GiB (use
            :meth:`attention_ess`, or pass fewer measures).

        Examples
        --------
        >>> from sklearn_measattn import MeasureTransformerRegressor
        >>> from sklearn_measattn.datasets import make_matrix_inverse
        >>> X, y = make_matrix_inverse(n_samples=4, n_points=16, random_state=0)
        >>> model = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, max_epochs=1,
        ...                                     random_state=0).fit(X, y)
        >>> W = model.attention_weights(X)
        >>> W.shape
        (4, 2, 16, 16)
        >>> bool(abs(W.sum(axis=-1) - 1).max() < 1e-12)
        True
        """
        return trained_attention_weights(self._network(), X, layer=layer, batch_size=batch_size)

    @property
    def learned_kernel_params_(self):
        """The kernel parameters the network learnt, e.g. ``{"degree": array of shape (n_layers, n_heads)}``.

        Empty for kernels whose parameters are fixed. With
        ``kernel="poly", kernel_params={"degree": "learn"}``, ``degree[l, h]`` is
        the degree of head ``h`` in block ``l``: ``(1 + s/p)^p`` grows like
        ``s^p``, so the attention integrals converge for tail indices above
        ``p + 1``.

        Examples
        --------
        >>> from sklearn_measattn import MeasureTransformerRegressor
        >>> from sklearn_measattn.datasets import make_matrix_inverse
        >>> X, y = make_matrix_inverse(n_samples=8, n_points=16, random_state=0)
        >>> model = MeasureTransformerRegressor(kernel="poly", kernel_params={"degree": "learn"}, d_model=8,
        ...                                     n_heads=2, n_layers=2, max_epochs=2, random_state=0).fit(X, y)
        >>> model.learned_kernel_params_["degree"].shape
        (2, 2)
        >>> bool((model.learned_kernel_params_["degree"] > 0).all())
        True
        """
        return self._network().learned_kernel_params()

    def hidden_similarity(self, X, *, batch_size=None):
        """How alike the hidden states of each measure are, after the embedding and each block.

        For every measure, the mean pairwise cosine similarity
        ``cos(h_i, h_j) = <h_i, h_j> / (|h_i| |h_j|)`` of the hidden features of
        its points, over pairs of distinct points weighted by their point
        weights ``a_i a_j`` (padding of a ragged batch has weight 0), at
        ``n_layers + 1`` depths: after the embedding, then after each block.
        Attention averages the values of a measure, so with depth the points
        of one ensemble may become alike (rank collapse): a similarity rising
        towards 1 across depth is that face of collapse, which the attention
        ESS of one layer does not see. Values near 0 mean the hidden states
        point in unrelated directions. Computed in float64 in O(n d) per
        measure, without the n x n matrix.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures, raw (the fitted ``transform`` is applied here).
        batch_size : int, default=None
            Measures per forward pass (default: the fitted ``batch_size``).

        Returns
        -------
        similarity : ndarray of shape (n_samples, n_layers + 1)
            Mean pairwise cosine similarity in ``[-1, 1]`` per measure and
            depth; ``nan`` for a measure with a single point.

        Raises
        ------
        FloatingPointError
            When the hidden states overflow float32 (extreme inputs without
            ``transform="symlog"``).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn import MeasureTransformerRegressor
        >>> from sklearn_measattn.datasets import make_matrix_inverse
        >>> X, y = make_matrix_inverse(n_samples=8, n_points=32, random_state=0)
        >>> model = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=3, max_epochs=1,
        ...                                     random_state=0).fit(X, y)
        >>> similarity = model.hidden_similarity(X)
        >>> similarity.shape  # the embedding, then each of the 3 blocks
        (8, 4)
        >>> bool(np.all(np.abs(similarity) <= 1))
        True
        """
        return trained_hidden_similarity(self._network(), X, batch_size=batch_size)

    # -------------------------------------------------------------- helpers
    def _check_params(self):
        """Check every hyper-parameter, naming the bad one; return derived config."""
        self._validate_params()
        try:
            kernel = get_kernel(self.kernel, **(self.kernel_params or {}))
        except (ValueError, TypeError) as exc:
            # Chained: for a user callable, its own traceback says where it failed.
            raise type(exc)(f"Invalid kernel={self.kernel!r} / kernel_params={self.kernel_params!r}: {exc}") from exc
        try:
            get_loss(self.loss, **(self.loss_params or {}))
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"Invalid loss={self.loss!r} / loss_params={self.loss_params!r}: {exc}") from exc
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads={self.n_heads} must divide d_model={self.d_model}.")
        check_callbacks(self.callbacks)
        if self.checkpoint_dir is not None:
            check_checkpoint_dir(self.checkpoint_dir)
            estimator_params_as_data(self)  # a function as kernel or loss cannot be checkpointed
        device = resolve_device(self.device)
        # A backend that cannot run this kernel on this device (sdpa with log,
        # fused on CUDA) fails here, before any training, not at the first batch.
        probe = torch.empty(0, device=device)  # the network trains in float32
        try:
            resolve_backend(self.attention_backend, kernel, probe)
        except ValueError as exc:
            raise ValueError(f"attention_backend={self.attention_backend!r} cannot run here: {exc}") from None
        return {"device": device}


def _with_continued_fit_rules(doc, rules):
    """``doc`` with the parameters a continued fit applies, and those it refuses to change, listed."""
    applied = [name for name, rule in rules.items() if rule == _APPLIED]
    fixed = [name for name, rule in rules.items() if rule == _FIXED]
    return doc.replace("APPLIED_ON_A_CONTINUED_FIT", _listed(applied)).replace("FIXED_BY_THE_FIRST_FIT", _listed(fixed))


MeasureTransformerRegressor.__doc__ = _with_continued_fit_rules(
    MeasureTransformerRegressor.__doc__, MeasureTransformerRegressor._continued_fit
)


def fitted_network(estimator):
    """The :class:`~._training.FittedNetwork` of a fitted ``estimator``: what runs, inspects or saves its network.

    Raises ``NotFittedError`` when the estimator is not fitted.
    """
    return estimator._network()


def restore_fitted(estimator, tensors, metadata, *, device):
    """Make ``estimator`` (built with a model file's parameters) fitted with the file's network and transforms
    (``(tensors, metadata)`` as read from the file), on ``device`` (resolved)."""
    estimator._become_fitted(restore_network(estimator._plan(device), tensors, metadata),
                             freeze_params(estimator.get_params(deep=False)))
    return estimator
