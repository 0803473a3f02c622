"""The options of ``measattn fit`` and ``measattn compare`` that set a hyper-parameter of the estimator, as one table.

Exposing one more hyper-parameter on the command line is one more entry of
:data:`ESTIMATOR_OPTIONS`: ``fit`` builds its estimator from the table,
``compare`` the template its fits clone (all but the kernel, transform and seed,
which it varies). Each option's ``type`` or ``choices`` hold the parameter's
domain, so argparse refuses a bad value as the command line is read, before any
file, naming the option; the estimator checks the whole of its parameters again
when it fits. The help shows the estimator's defaults from
each option's ``estimator_default`` (or a command's own), so that ``--help``
does not import the estimator (and torch).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._arguments import device, positive_float, positive_int, seed
from ._names import ALL_KERNEL_NAMES, LOSS_NAMES

__all__ = ["ESTIMATOR_OPTIONS", "EstimatorOption", "add_estimator_options", "estimator_params"]


@dataclass(frozen=True)
class EstimatorOption:
    """One option of ``measattn fit`` and the estimator hyper-parameter it sets.

    Parameters
    ----------
    flag : str
        The option, e.g. ``"--epochs"``.
    parameter : str
        The parameter of :class:`~sklearn_measattn.MeasureTransformerRegressor`
        it sets, e.g. ``"max_epochs"``.
    help : str
        The help text; ``{default}`` stands for the estimator's default.
    type : callable, default=str
        Turns the text typed into a value (argparse's ``type``), refusing a
        value outside the parameter's domain.
    choices : tuple of str or None, default=None
        The values the option takes, if only some.
    metavar : str or None, default=None
        The value's name in the help.
    default : object, default=None
        The value when the option is not given; None leaves the estimator's default.
    aliases : dict, default={}
        Values spelled otherwise on the command line (``"none"`` for None).
    estimator_default : object, default=None
        The estimator's own default, which the help shows (written here, so
        that ``--help`` does not import the estimator; a test checks it is
        the estimator's).
    """

    flag: str
    parameter: str
    help: str
    type: object = str
    choices: tuple | None = None
    metavar: str | None = None
    default: object = None
    aliases: dict = field(default_factory=dict)
    estimator_default: object = None

    @property
    def dest(self):
        """The attribute of the parsed arguments that holds the value."""
        return self.flag.removeprefix("--").replace("-", "_")


#: The options of ``measattn fit`` that set estimator hyper-parameters, in the order of the help.
ESTIMATOR_OPTIONS = (
    EstimatorOption("--kernel", "kernel", f"attention kernel, from {', '.join(ALL_KERNEL_NAMES)} (default {{default}})",
                    choices=ALL_KERNEL_NAMES, metavar="KERNEL", estimator_default="log"),
    EstimatorOption("--transform", "transform", "pointwise transform of the data, inverted on the predictions "
                                                "(default none; symlog for heavy tails)",
                    choices=("none", "symlog"), aliases={"none": None}),
    EstimatorOption("--epochs", "max_epochs", "training epochs (default {default})", type=positive_int,
                    estimator_default=100),
    EstimatorOption("--d-model", "d_model", "model width (default {default})", type=positive_int,
                    estimator_default=64),
    EstimatorOption("--n-heads", "n_heads", "attention heads (default {default})", type=positive_int,
                    estimator_default=4),
    EstimatorOption("--n-layers", "n_layers", "blocks (default {default})", type=positive_int, estimator_default=2),
    EstimatorOption("--dim-feedforward", "dim_feedforward",
                    "hidden width of the feed-forward networks (default {default})", type=positive_int,
                    estimator_default=128),
    EstimatorOption("--activation", "activation", "activation of the feed-forward networks (default {default})",
                    choices=("gelu", "relu", "tanh"), estimator_default="gelu"),
    EstimatorOption("--lr", "lr", "learning rate, the peak with --lr-schedule onecycle (default {default})",
                    type=positive_float, estimator_default=0.001),
    EstimatorOption("--lr-schedule", "lr_schedule", "learning-rate schedule (default {default})",
                    choices=("constant", "onecycle"), estimator_default="constant"),
    EstimatorOption("--batch-size", "batch_size", "measures per batch (default {default})", type=positive_int,
                    estimator_default=32),
    EstimatorOption("--loss", "loss", "training loss (default {default}; mse needs targets paired point by point)",
                    choices=LOSS_NAMES, estimator_default="energy"),
    EstimatorOption("--context-size", "context_size",
                    "attend to a random subsample of at most N points of each measure (fresh each training step; "
                    "every point still gets its image), for ensembles of many thousand points "
                    "(default: the whole measure)", type=positive_int, metavar="N"),
    EstimatorOption("--seed", "random_state", "seed of the initial weights and shuffling (default 0)", type=seed,
                    default=0),
    EstimatorOption("--device", "device", "auto, cpu, cuda or cuda:N (default: auto)", type=device,
                    estimator_default="auto"),
)


def add_estimator_options(group, *, leave_out=(), defaults=None):
    """Add the options of :data:`ESTIMATOR_OPTIONS`.

    Parameters
    ----------
    group : argparse.ArgumentParser or argument group
        Where the options go.
    leave_out : tuple of str, default=()
        The parameters whose options the command does not offer (those it sets itself).
    defaults : dict or None, default=None
        The defaults the help shows, by parameter, where the command's differ
        from the options' ``estimator_default``.
    """
    shown = {option.parameter: option.estimator_default for option in ESTIMATOR_OPTIONS} | (defaults or {})
    for option in ESTIMATOR_OPTIONS:
        if option.parameter not in leave_out:
            group.add_argument(option.flag, dest=option.dest, type=option.type, choices=option.choices,
                               metavar=option.metavar, default=None,
                               help=option.help.format(default=shown[option.parameter]))


def estimator_params(args, *, leave_out=()):
    """The estimator parameters the options given set (argparse has checked each value against its domain).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.
    leave_out : tuple of str, default=()
        Parameters whose options the command does not offer.

    Returns
    -------
    params : dict
        Keyword arguments of :class:`~sklearn_measattn.MeasureTransformerRegressor`;
        parameters whose option is not given (and has no default) are left out.
    """
    params = {}
    for option in ESTIMATOR_OPTIONS:
        if option.parameter in leave_out:
            continue
        given = getattr(args, option.dest)
        value = option.default if given is None else option.aliases.get(given, given)
        if given is None and value is None:
            continue
        params[option.parameter] = value
    return params
