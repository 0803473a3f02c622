"""Noise laws apart from the observation operator: exact densities, a record without one, the laws as training input."""

import numpy as np
import pytest
from scipy import stats
from sklearn.utils import check_random_state

from sklearn_measattn.assimilation import (
    CauchyNoise,
    GaussianNoise,
    KernelDensityNoise,
    NoiseLaw,
    ObservationModel,
    RankHistogramFilter,
    SampledNoise,
    StudentTNoise,
    contaminated_errors,
    make_local_analysis_data,
    make_synthetic_analysis_data,
    make_twin_problem,
)

RESIDUALS = np.array([-1e4, -3.0, -0.5, 0.0, 0.2, 7.0, 1e6])


@pytest.mark.parametrize("law, reference", [
    (GaussianNoise(scale=0.7), stats.norm(scale=0.7)),
    (StudentTNoise(df=3.0, scale=2.0), stats.t(3.0, scale=2.0)),
    (CauchyNoise(scale=0.3), stats.cauchy(scale=0.3)),
])
def test_the_built_in_laws_have_their_exact_densities_and_draws(law, reference):
    np.testing.assert_allclose(law.log_density(RESIDUALS), reference.logpdf(RESIDUALS), rtol=1e-10)
    assert stats.kstest(law.sample(4000, random_state=0), reference.cdf).pvalue > 1e-3
    variance = reference.var()
    assert (law.variance is None) == (not np.isfinite(variance))
    if law.variance is not None:
        assert law.variance == pytest.approx(variance)


@pytest.mark.parametrize("noise, df, law", [
    ("gaussian", 1.5, GaussianNoise(scale=0.5)), ("student_t", 4.0, StudentTNoise(df=4.0, scale=0.5)),
    ("cauchy", 1.5, CauchyNoise(scale=0.5)),
])
def test_a_law_by_name_and_the_law_itself_give_the_same_problem(noise, df, law):
    by_name = make_twin_problem(n_variables=8, noise=noise, df=df, noise_scale=0.5, n_cycles=20, random_state=3)
    by_law = make_twin_problem(n_variables=8, noise=law, n_cycles=20, random_state=3)
    np.testing.assert_array_equal(by_name.observations, by_law.observations)
    model = by_law.observation_model
    assert model.law is law and (model.noise, model.noise_scale, model.tail) == (law.name, 0.5, law.tail)
    np.testing.assert_array_equal(model.log_density(RESIDUALS), law.log_density(RESIDUALS))


def test_a_law_holds_its_own_scale():
    with pytest.raises(ValueError, match="holds its own scale"):
        ObservationModel(n_variables=8, noise=CauchyNoise(), noise_scale=2.0)
    with pytest.raises(ValueError, match="scale"):
        GaussianNoise(scale=-1.0)
    shared = GaussianNoise()
    model = ObservationModel(n_variables=8, noise=shared)
    model.noise_scale = 3.0
    assert model.law.scale == 3.0 and shared.scale == 1.0  # the law given stays as it was


def test_a_record_has_no_density_and_its_fits_do():
    errors = contaminated_errors(3000, random_state=1)
    law = SampledNoise(errors)
    assert not hasattr(law, "log_density") and not law.symmetric
    assert np.isin(law.sample(50, random_state=0), errors).all()
    assert isinstance(law.fit_student_t(), StudentTNoise) and isinstance(law.kernel_density(), KernelDensityNoise)
    with pytest.raises(ValueError, match="has none"):
        RankHistogramFilter().bind(ObservationModel(n_variables=8, noise=law))
    RankHistogramFilter(likelihood=law.kernel_density()).bind(ObservationModel(n_variables=8, noise=law))


def test_a_rescaled_record_scales_its_draws_and_its_density():
    errors = contaminated_errors(5000, random_state=2)
    model = ObservationModel(n_variables=4, noise=KernelDensityNoise(errors))
    wider = ObservationModel(n_variables=4, noise=KernelDensityNoise(errors))
    wider.noise_scale = 2.0 * model.noise_scale
    np.testing.assert_allclose(wider.law.sample(100, random_state=0), 2.0 * model.law.sample(100, random_state=0))
    np.testing.assert_allclose(wider.log_density(2.0 * RESIDUALS), model.log_density(RESIDUALS) - np.log(2.0))
    assert wider.law.fit_student_t().scale == pytest.approx(2.0 * model.law.fit_student_t().scale)


def test_training_functions_take_the_law_or_an_observation_model_through_it():
    laws = [CauchyNoise(), GaussianNoise()]
    models = [ObservationModel(n_variables=8, noise=law) for law in laws]
    settings = dict(n_priors=40, draws=2, ensemble_size=6, random_state=0)
    X_law, y_law = make_synthetic_analysis_data(laws, **settings)
    X_model, y_model = make_synthetic_analysis_data(models, **settings)
    np.testing.assert_array_equal(X_law, X_model)
    np.testing.assert_array_equal(y_law, y_model)
    forecasts = [np.random.default_rng(0).standard_normal((7, 12))]
    X_local, _ = make_local_analysis_data(forecasts, CauchyNoise(), window_radius=2, random_state=0)
    X_through, _ = make_local_analysis_data(forecasts, models[0], window_radius=2, random_state=0)
    np.testing.assert_array_equal(X_local[6], X_through[6])


@pytest.mark.parametrize("noise", ["cauchy", [], [GaussianNoise(), "gaussian"]])
def test_what_is_not_a_law_is_refused_with_what_is(noise):
    with pytest.raises((TypeError, ValueError), match="noise"):
        make_synthetic_analysis_data(noise, n_priors=10, ensemble_size=6)


def test_a_law_of_ones_own_needs_only_its_draws_and_tail():
    class Uniform(NoiseLaw):
        tail = 0.0

        def standard_noise(self, size, random_state=None):
            return check_random_state(random_state).uniform(-1.0, 1.0, size)

    law = Uniform(scale=0.5)
    X, _ = make_synthetic_analysis_data(law, n_priors=20, draws=1, ensemble_size=6, random_state=0)
    assert X.shape == (40, 6, 5)  # reflected too: the law is symmetric by default
    assert np.abs(law.sample(1000, random_state=0)).max() <= 0.5
    with pytest.raises(NotImplementedError, match="standard_noise"):
        NoiseLaw().sample(3)
