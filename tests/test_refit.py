"""python -m experiments.refit: a refit of a shipped log's fits reproduces the shipped files."""

import pytest

from experiments import refit


@pytest.mark.slow
def test_a_refit_of_theta_reproduces_its_shipped_model_and_tuned_fit(capsys):
    assert refit.main(["--traces", "theta", "--only", "learned", "tuned", "--check"]) == 0
    assert "2 of 2 refits reproduce the shipped files" in capsys.readouterr().out


def test_the_commands_are_the_documented_ones(tmp_path):
    done = refit.commands("ricc", refit.KINDS, tmp_path / "p", tmp_path / "t")
    assert [k for k, _ in done] == ["learned", "tuned", "tuned-learned"]
    assert done[2][1][:6] == ["--trace", "ricc", "--backfill", "easy", "--predictors", "learned:ricc"]
    assert done[2][1][-1].endswith("ricc-easy-learned.json")


def test_a_log_without_requested_times_is_refused():
    with pytest.raises(refit.cli.UsageError, match="no requested times"):
        refit.main(["--traces", "metacentrum", "--check"])


def test_a_changed_fit_is_told_apart(tmp_path):
    import json

    shipped = refit.PACKAGE_TUNED / "theta-easy.json"
    made = tmp_path / "theta-easy.json"
    data = json.loads(shipped.read_text())
    data["weights"]["log_nodes"] += 1e-9
    made.write_text(json.dumps(data))
    assert "weights" in refit.same_fit(made, shipped)
