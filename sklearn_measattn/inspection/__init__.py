"""Looking inside a fitted model: its trained attention, hidden similarity, the learnt
transport map, and :class:`MeasureDisplay` for plotting measures.

The estimator's :meth:`~sklearn_measattn.MeasureTransformerRegressor.attention_ess`,
``attention_weights``, ``hidden_similarity`` and ``transport`` methods are the
usual way in; the functions here are what they run.
"""

from ._display import MeasureDisplay

# For the rest of the package (the estimator's methods, the phase diagram's display), not the user.
from ._display import import_pyplot as import_pyplot
from ._hidden_similarity import trained_hidden_similarity as trained_hidden_similarity
from ._trained_attention import trained_attention_ess as trained_attention_ess
from ._trained_attention import trained_attention_weights as trained_attention_weights
from ._transport import transport_points as transport_points

__all__ = ["MeasureDisplay"]
