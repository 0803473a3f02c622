"""The numerical cores of the distances between measures, shared by the metrics and the losses.

``_energy`` computes the energy distance in ``O(N + M)`` memory with one of its
backends (compiled, chunked or the quadratic reference); ``_cores`` holds
distance powers, sliced Wasserstein and entropic transport (Sinkhorn);
``_clouds`` prepares the padded point clouds and weights the losses take.
"""

from ._clouds import REDUCTION, prepare_clouds, reduce, split_points_weights
from ._cores import distance_power, entropic_transport_value, sinkhorn_plan, sliced_wasserstein_batch
from ._energy import BACKENDS as ENERGY_BACKENDS
from ._energy import energy_distance_batch

__all__ = [
    "distance_power",
    "ENERGY_BACKENDS",
    "energy_distance_batch",
    "entropic_transport_value",
    "prepare_clouds",
    "reduce",
    "REDUCTION",
    "sinkhorn_plan",
    "sliced_wasserstein_batch",
    "split_points_weights",
]
