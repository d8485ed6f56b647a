"""DroPE's route (lengen.rundir.init_from): ``train.py init_from=<RoPE run> pe=nope`` loads the
RoPE run's weights 1:1 into a NoPE model, which equals the RoPE model with the identity rotation
(the reference's cos = 1, sin = 0), and results.json records a DroPE recalibration of the base
run's id."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

from helpers import compose_train, run_train
from lengen.build import build
from lengen.identity import run_id
from lengen.rundir.init_from import init_from_record, route
from lengen.train import run

FAST = ("data.len=6", "eval.factors=[1,2]", "eval.diagnostics=false", "eval.plot_dpi=30")


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A few steps of a RoPE decoder: the run DroPE starts from."""
    run_dir = tmp_path_factory.mktemp("rope")
    run(compose_train("pe=rope", *FAST), run_dir=run_dir)
    return run_dir


def test_dropping_the_encoding_is_named_drope():
    base = OmegaConf.to_container(compose_train("pe=rope"), resolve=True)
    assert route(base, compose_train("pe=nope")) == "drope"


def test_keeping_the_encoding_is_a_fine_tune():
    base = OmegaConf.to_container(compose_train("pe=rope"), resolve=True)
    assert route(base, compose_train("pe=rope")) == "fine-tune"


def test_a_checkpoint_without_a_config_records_its_path_only(tmp_path):
    cfg = compose_train("pe=nope", f"init_from={tmp_path}")
    assert init_from_record(cfg, {"state_dict": {}}) == {
        "init_from": {"path": str(tmp_path), "route": "fine-tune"}
    }


def test_a_recalibration_at_another_length_says_so():
    base = {"lengen": {"config": OmegaConf.to_container(compose_train("pe=rope"), resolve=True)}}
    cfg = compose_train("pe=nope", "data.len=7", "init_from=/elsewhere")
    assert "original length" in init_from_record(cfg, base)["init_from"]["note"]


def test_rope_weights_load_into_nope_as_the_identity_rotation(base_run):
    # an independent re-derivation of the drop: the RoPE model whose rotation is the identity
    # (angle 0 everywhere, as the reference's cos = 1, sin = 0) is the NoPE model with its weights
    state = torch.load(base_run / "checkpoints/last.ckpt", weights_only=False)["state_dict"]
    state = {key.removeprefix("model."): value.double() for key, value in state.items()}
    _, rope_model, _ = build(compose_train("pe=rope", *FAST))
    _, nope_model, _ = build(compose_train("pe=nope", *FAST))
    rope_model.load_state_dict(state)
    nope_model.load_state_dict(state)  # no key missing or left over: the weights map 1:1
    identity = lambda q, k, q_positions, k_positions: (q, k)  # noqa: E731
    for module in rope_model.modules():
        if hasattr(module, "rotate") and hasattr(module, "inverse_frequencies"):
            module.rotate = identity
    tokens = torch.randint(0, 10, (2, 9))
    rope_model.double().eval(), nope_model.double().eval()
    with torch.no_grad():
        torch.testing.assert_close(nope_model(tokens), rope_model(tokens), rtol=0, atol=1e-12)


def test_results_record_a_drope_recalibration_of_the_base_run(base_run, tmp_path):
    cfg = compose_train("pe=nope", f"init_from={base_run}", *FAST)
    run(cfg, run_dir=tmp_path)
    record = json.loads((tmp_path / "results.json").read_text())["init_from"]
    base_id = run_id(OmegaConf.load(base_run / "config.yaml"))
    assert (record["route"], record["run_id"], record["pe"]) == ("drope", base_id, "rope")


def test_a_pack_records_the_drope_recalibration_as_a_solo_run(base_run, tmp_path):
    from lengen.pack import train_pack

    cfgs = [compose_train("pe=nope", f"init_from={base_run}", f"seed={s}", *FAST) for s in (0, 1)]
    dirs = [tmp_path / str(seed) for seed in (0, 1)]
    train_pack(cfgs, dirs)
    records = [json.loads((d / "results.json").read_text())["init_from"] for d in dirs]
    assert [record["route"] for record in records] == ["drope", "drope"]


def test_the_route_runs_through_hydra_keys(base_run, tmp_path):
    done = run_train(
        "debug=fast", "pe=nope", f"init_from={base_run}", *FAST, f"hydra.run.dir={tmp_path}",
        one_thread=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "results.json").read_text())["init_from"]["route"] == "drope"
