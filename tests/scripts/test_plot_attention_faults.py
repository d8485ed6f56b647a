"""plot.py attention refuses maps too large to form from the run's config.yaml, before the run
is loaded (issue #51, the trial re-run's G11/G12 remark: refused after 25-28 s, once the
checkpoint was loaded): the run folders here hold no checkpoint, so only that early refusal
can name the option."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from helpers import compose_train, fresh_python, load_script


@pytest.fixture(scope="module")
def plot():
    return load_script("plot")


def config_only_run(folder, *overrides):
    """A run folder holding only config.yaml (no checkpoint: nothing to load)."""
    folder.mkdir()
    cfg = compose_train("data.len=4", "eval.lengths=[4]", *overrides)
    OmegaConf.save(cfg, folder / "config.yaml")
    return folder


def test_a_length_past_the_map_limit_is_refused_from_the_config(plot, tmp_path, capsys):
    run = config_only_run(tmp_path / "rope", "pe=rope")
    assert plot.main(["attention", str(run), "--length", "100000"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --length 100000: its sequences hold 200,001 tokens"
    )


def test_too_many_samples_for_an_own_attention_are_refused_from_the_config(plot, tmp_path, capsys):
    run = config_only_run(tmp_path / "path", "pe=path", "model.n_heads=4")
    assert plot.main(["attention", str(run), "--length", "16", "--samples", "100000"]) == 2
    most = (1 << 24) // (4 * 33 * 33)
    err = capsys.readouterr().err
    assert err.startswith("error: --samples 100000: PaTH computes attention itself")
    assert err.strip().endswith(f"allowed: --samples {most} or fewer")


def test_a_length_past_the_map_limit_is_refused_before_torch_is_imported(tmp_path):
    run = config_only_run(tmp_path / "rope", "pe=rope")
    out = fresh_python(
        "import sys\n"
        "from helpers import load_script\n"
        f"status = load_script('plot').main(['attention', {str(run)!r}, '--length', '100000'])\n"
        "print(status, 'torch' in sys.modules)"
    )
    assert out.splitlines()[-1] == "2 False"


def test_too_many_samples_for_an_own_attention_are_refused_before_torch_is_imported(tmp_path):
    run = config_only_run(tmp_path / "path", "pe=path")
    arguments = ["attention", str(run), "--length", "16", "--samples", "100000"]
    out = fresh_python(
        "import sys\n"
        "from helpers import load_script\n"
        f"status = load_script('plot').main({arguments!r})\n"
        "print(status, 'torch' in sys.modules)"
    )
    assert out.splitlines()[-1] == "2 False"
