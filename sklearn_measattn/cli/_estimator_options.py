"""The options of ``measattn fit`` that set a hyper-parameter of the estimator, as one table.

Exposing one more hyper-parameter on the command line is one more entry of
:data:`ESTIMATOR_OPTIONS`. Every value is checked against the estimator's own
constraint for its parameter before any file is read, and a refusal names the
option and keeps the estimator's message. The help shows the estimator's
defaults from :data:`~._names.ESTIMATOR_DEFAULTS`, so that ``measattn fit
--help`` does not import the estimator (and torch); the checks import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._arguments import device, option_error, positive_float, positive_int
from ._names import ALL_KERNEL_NAMES, ESTIMATOR_DEFAULTS, LOSS_NAMES

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
        Turns the text typed into a value (argparse's ``type``).
    choices : tuple of str or None, default=None
        The values the option takes, if only some.
    metavar : str or None, default=None
        The value's name in the help.
    default : object, default=None
        The value when the option is not given; None leaves the estimator's default.
    aliases : dict, default={}
        Values spelled otherwise on the command line (``"none"`` for None).
    """

    flag: str
    parameter: str
    help: str
    type: object = str
    choices: tuple | None = None
    metavar: str | None = None
    default: object = None
    aliases: dict = field(default_factory=dict)

    @property
    def dest(self):
        """The attribute of the parsed arguments that holds the value."""
        return self.flag.removeprefix("--").replace("-", "_")


#: The options of ``measattn fit`` that set estimator hyper-parameters, in the order of the help.
ESTIMATOR_OPTIONS = (
    EstimatorOption("--kernel", "kernel", f"attention kernel, from {', '.join(ALL_KERNEL_NAMES)} (default {{default}})",
                    choices=ALL_KERNEL_NAMES, metavar="KERNEL"),
    EstimatorOption("--transform", "transform", "pointwise transform of the data, inverted on the predictions "
                                                "(default none; symlog for heavy tails)",
                    choices=("none", "symlog"), aliases={"none": None}),
    EstimatorOption("--epochs", "max_epochs", "training epochs (default {default})", type=positive_int),
    EstimatorOption("--d-model", "d_model", "model width (default {default})", type=positive_int),
    EstimatorOption("--n-heads", "n_heads", "attention heads (default {default})", type=positive_int),
    EstimatorOption("--n-layers", "n_layers", "blocks (default {default})", type=positive_int),
    EstimatorOption("--dim-feedforward", "dim_feedforward",
                    "hidden width of the feed-forward networks (default {default})", type=positive_int),
    EstimatorOption("--lr", "lr", "learning rate (default {default})", type=positive_float),
    EstimatorOption("--batch-size", "batch_size", "measures per batch (default {default})", type=positive_int),
    EstimatorOption("--loss", "loss", "training loss (default {default}; mse needs targets paired point by point)",
                    choices=LOSS_NAMES),
    EstimatorOption("--context-size", "context_size",
                    "attend to a random subsample of at most N points of each measure (fresh each training step; "
                    "every point still gets its image), for ensembles of many thousand points "
                    "(default: the whole measure)", type=positive_int, metavar="N"),
    EstimatorOption("--seed", "random_state", "seed of the initial weights and shuffling (default 0)", type=int,
                    default=0),
    EstimatorOption("--device", "device", "auto, cpu, cuda or cuda:N (default: auto)", type=device),
)


def add_estimator_options(group):
    """Add every option of :data:`ESTIMATOR_OPTIONS`.

    Parameters
    ----------
    group : argparse.ArgumentParser or argument group
        Where the options go.
    """
    for option in ESTIMATOR_OPTIONS:
        group.add_argument(option.flag, dest=option.dest, type=option.type, choices=option.choices,
                           metavar=option.metavar, default=None,
                           help=option.help.format(default=ESTIMATOR_DEFAULTS[option.parameter]))


def estimator_params(args, parser):
    """The estimator parameters the options set, each checked against the estimator's constraint.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.
    parser : argparse.ArgumentParser
        The command's parser.

    Returns
    -------
    params : dict
        Keyword arguments of :class:`~sklearn_measattn.MeasureTransformerRegressor`;
        parameters whose option is not given (and has no default) are left out.
    """
    from .._param_validation import InvalidParameterError, validate_parameter_constraints
    from ..estimator import MeasureTransformerRegressor

    constraints = MeasureTransformerRegressor._parameter_constraints
    params = {}
    for option in ESTIMATOR_OPTIONS:
        given = getattr(args, option.dest)
        value = option.default if given is None else option.aliases.get(given, given)
        if given is None and value is None:
            continue
        try:
            validate_parameter_constraints({option.parameter: constraints[option.parameter]},
                                           {option.parameter: value}, caller_name=MeasureTransformerRegressor.__name__)
        except InvalidParameterError as exc:
            option_error(parser, option.flag, exc)
        params[option.parameter] = value
    return params
