"""The Lorenz-96 model and its observations: one home for the benchmark and the assimilation package.

The benchmark loader (:func:`sklearn_measattn.datasets.make_lorenz96_analysis`)
and the cycled twin experiments (:mod:`sklearn_measattn.assimilation`) simulate
the same model, spin it up the same way and observe it through the same
:class:`ObservationModel`; both import them from here, below both of them
(``datasets`` publishes the model, ``assimilation`` the observation model).
"""

from ._model import FORCING, MIN_VARIABLES, SPIN_UP_TIME, attractor_states, integrate_lorenz96, lorenz96_flow
from ._noise import CauchyNoise, GaussianNoise, NoiseLaw, StudentTNoise, as_noise_laws, noise_law
from ._observation import N_VARIABLES, NOISE, OBSERVATION_NOISES, OBSERVED, ObservationModel

__all__ = [
    "CauchyNoise",
    "FORCING",
    "GaussianNoise",
    "MIN_VARIABLES",
    "N_VARIABLES",
    "NOISE",
    "NoiseLaw",
    "OBSERVATION_NOISES",
    "OBSERVED",
    "SPIN_UP_TIME",
    "StudentTNoise",
    "ObservationModel",
    "as_noise_laws",
    "attractor_states",
    "integrate_lorenz96",
    "lorenz96_flow",
    "noise_law",
]
