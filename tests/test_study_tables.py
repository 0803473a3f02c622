"""The held-out tables of the local analysis page are what the study's render makes of the committed results."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _study():
    spec = importlib.util.spec_from_file_location("local_analysis_study", ROOT / "studies" / "local_analysis.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_tables_are_rendered_from_the_committed_results():
    study = _study()
    results = ROOT / "studies" / "results"
    rows = study.read(results / "local_analysis.csv")
    assert rows, "the committed results hold no row"
    dapper_rows = study.read(results / "local_analysis_dapper.csv")
    assert {row["method"] for row in dapper_rows} <= set(study.DAPPER_FILTERS)
    page = (ROOT / "docs" / "local_analysis_results.rst").read_text(encoding="utf-8")
    assert page == study.render(rows + dapper_rows) + "\n", (
        "docs/local_analysis_results.rst differs from the render of the committed results: run "
        "python studies/local_analysis.py --render studies/results/local_analysis.csv "
        "studies/results/local_analysis_dapper.csv --rst docs/local_analysis_results.rst"
    )


def test_a_goal_is_judged_per_seed_against_its_reference():
    study = _study()

    def row(method, seed, rmse, diverged=False):
        return {"setting": "sakov_oke", "members": "40", "method": method, "seed": str(seed), "rmse": str(rmse),
                "crps": "0.1", "diverged": str(diverged), "ms_per_cycle": "1.0", "params": ""}

    rows = [row("LETKF", 1, 0.2), row("local learned", 1, 0.19), row("LETKF", 2, 0.2), row("local learned", 2, 0.3),
            row("LETKF", 3, 9.0, diverged=True), row("local learned", 3, 0.2)]
    line = next(text for text in study.render_goals(rows) if text.startswith("all observed"))
    assert "0.95 / 1.50 / n/a" in line and "1 of 3 (1 n/a)" in line


def test_the_truth_trained_first_round_is_shown_over_the_stand_in_one_where_both_ran():
    study = _study()

    def row(method, seed, rmse, diverged=False):
        return {"setting": "mnmef_sd1", "members": "10", "method": method, "seed": str(seed), "rmse": str(rmse),
                "crps": "0.1", "diverged": str(diverged), "ms_per_cycle": "1.0", "params": ""}

    rows = [row(study.STAND_IN_FIRST, 1, 2.0), row(study.TRUTH_FIRST, 1, 1.5),
            row(study.STAND_IN_FIRST, 2, 2.0, diverged=True), row(study.TRUTH_FIRST, 2, 1.8)]
    line = next(text for text in study.render_ceiling(rows) if text.startswith("every 4th"))
    assert "2.000 / 2.000 (d)" in line and "0.75 / n/a" in line
    assert study.render_ceiling([r for r in rows if r["method"] == study.STAND_IN_FIRST]) == []
    letkf = [row("LETKF", 1, 2.1), row("LETKF", 2, 2.1)]
    assert "The stand-in against the truth" in study.render(rows + letkf)
    assert "The stand-in against the truth" not in study.render(rows[::2] + letkf)
