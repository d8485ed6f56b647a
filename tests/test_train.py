"""Short end-to-end runs: every PE × model kind writes a complete run directory; eval.py adds a
results file and leaves the original untouched; the default experiment learns (slow)."""

from __future__ import annotations

import json
import os
from contextlib import nullcontext

import pytest
import torch
import yaml

from helpers import compose_train, pe_supports, unsaved_figures, yaml_choices
from lengen.config import ConfigError
from lengen.reeval import evaluate_run
from lengen.results import REQUIRED_KEYS, ROW_KEYS
from lengen.train import run

KINDS = yaml_choices("model")
PES = yaml_choices("pe")
PAIRS = [(m, p) for m in KINDS for p in PES if pe_supports(p, m)]
UNSUPPORTED = [(m, p) for m in KINDS for p in PES if not pe_supports(p, m)]
#: for runs and evaluations whose test looks at no attention diagnostics: drawing their figures
#: costs more than the rest of a debug=fast run
NO_DIAGNOSTICS = ("eval.diagnostics=false",)
#: the runs whose figures are rasterised and written. Every other run builds each figure from
#: its own numbers and hands it to ``save_figure``, which closes it unsaved
#: (``helpers.unsaved_figures``): drawing and saving is the same code for every encoding (2–4 s
#: a run of layout, most of this module's time), while what an encoding changes, the numbers,
#: still reaches each figure. Chosen for the shapes of their diagnostics: a bias, none, no
#: softmax, a window, contextual positions, a blind encoder; tests/evaluation/test_diagnostics.py
#: writes the figures as PNG and PDF
DRAWN = {("decoder", pe) for pe in ("rope", "alibi", "nope", "stick_breaking", "rnope_swa",
                                    "cope")} | {("encoder", "rope"), ("encoder", "nope"),
                                                ("encoder_decoder", "learned")}  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """trained(model, pe) -> (run_dir, results): one short run per PE × model kind, trained the
    first time a test of this module asks for it and shared after (so ``-k`` narrows what is
    trained). ``trained.built[(model, pe)]``: the figure files a run outside DRAWN built and
    asked ``save_figure`` for."""
    done = {}
    train_built: dict[tuple[str, str], list[str]] = {}

    def train(model: str, pe: str):
        if (model, pe) not in done:
            run_dir = tmp_path_factory.mktemp(f"{model}-{pe}")
            # the attention diagnostics and their figures (about 4 s a run, mostly drawing) run
            # for every encoding in the decoder; bidirectional kinds skip them here (their
            # weights: tests/evaluation/test_attention_statistics.py). The figures are drawn
            # at a low resolution (it changes no number; eval.py's runs of a run inherit it):
            # rasterising at the default 200 dpi is a good part of every run's time
            diagnostics = model == "decoder"
            cfg = compose_train(
                f"pe={pe}", f"model={model}", "data.len=6", "eval.factors=[1,4]",
                f"eval.diagnostics={str(diagnostics).lower()}", "eval.plot_dpi=30",
            )  # fmt: skip
            blind = pe == "nope" and model != "decoder"
            figures = nullcontext([]) if (model, pe) in DRAWN else unsaved_figures()
            warned = pytest.warns(UserWarning, match="position") if blind else nullcontext()
            with figures as built, warned:
                done[(model, pe)] = (run_dir, run(cfg, run_dir=run_dir))
            train_built[(model, pe)] = built
        return done[(model, pe)]

    train.built = train_built
    return train


@pytest.mark.parametrize(("model", "pe"), UNSUPPORTED)
def test_unsupported_model_kind_is_refused_before_training(model, pe, tmp_path):
    cfg = compose_train(f"pe={pe}", f"model={model}")
    with pytest.raises(ConfigError, match=r"^pe: .*allowed: model=decoder"):
        run(cfg, run_dir=tmp_path)
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize(("model", "pe"), PAIRS)
def test_run_writes_complete_directory(trained, model, pe):
    run_dir, results = trained(model, pe)
    names = ["config.yaml", "results.json", "checkpoints/last.ckpt", "logs/metrics.csv"]
    figures = ["extrapolation.png", "accuracy_by_position.png"]
    if model == "decoder":
        figures += ["attention_diagnostics.png", "attention_diagnostics_distance.png"]
    if (model, pe) in DRAWN:
        names += figures
    else:  # each figure built from this run's numbers and handed to save_figure (DRAWN)
        assert sorted(trained.built[(model, pe)]) == sorted(figures)
    for name in names:
        assert (run_dir / name).is_file(), name
    assert not [w for w in results.get("warnings", []) if w.startswith("figure ")]
    assert not list(run_dir.rglob("*.tmp")), "temporary files left behind"


@pytest.mark.parametrize(("model", "pe"), PAIRS)
def test_results_follow_the_schema(trained, model, pe):
    run_dir, returned = trained(model, pe)
    results = json.loads((run_dir / "results.json").read_text())
    assert results == json.loads(json.dumps(returned))
    assert set(REQUIRED_KEYS) <= set(results)
    assert (results["pe"], results["model"], results["task"]) == (pe, model, "copy")
    assert results["train_len"] == 6 and results["n_params"] > 0 and results["train_tokens"] > 0
    assert set(results["provenance"]) >= {"git_commit", "torch", "device", "command"}
    assert [row["length"] for row in results["eval"]] == [6, 24]
    for row in results["eval"]:
        assert set(ROW_KEYS) <= set(row)
        assert row["in_distribution"] == (row["length"] <= 6)
        assert row["protocol"] == "teacher_forced" and row["ppl"] is None
        assert row["n_examples"] == 8
        assert 0.0 <= row["accuracy"] <= 1.0 and 0.0 <= row["exact_match"] <= 1.0


def test_max_position_recorded_per_kind(trained):
    rows = {model: trained(model, "rope")[1]["eval"] for model in KINDS}
    assert [r["max_position"] for r in rows["decoder"]] == [13, 49]
    assert [r["max_position"] for r in rows["encoder"]] == [13, 49]
    assert [r["max_position"] for r in rows["encoder_decoder"]] == [6, 24]


def test_config_yaml_is_fully_resolved(trained):
    run_dir, _ = trained("decoder", "rope")
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["data"]["len"] == 6 and saved["pe"]["name"] == "rope"
    assert "${" not in (run_dir / "config.yaml").read_text()


def test_nope_encoder_is_labelled_position_blind(trained):
    assert trained("encoder", "nope")[1]["position_blind"] is True
    assert trained("encoder", "nope")[1]["warnings"]
    assert trained("encoder_decoder", "nope")[1]["position_blind"] is True
    assert trained("decoder", "nope")[1]["position_blind"] is False


def test_learned_policy_is_recorded(trained):
    info = trained("decoder", "learned")[1]["pe_info"]
    assert info == {
        "policy": "extend",
        "table_size": 49,
        "trained_rows": 13,
        "trained_positions": 13,
    }


def test_checkpoint_carries_the_config(trained):
    run_dir, _ = trained("decoder", "alibi")
    checkpoint = torch.load(run_dir / "checkpoints/last.ckpt", weights_only=False)
    assert checkpoint["lengen"]["config"]["pe"]["name"] == "alibi"


def test_finished_run_directory_is_not_overwritten(trained):
    run_dir, _ = trained("decoder", "rope")
    before = (run_dir / "results.json").read_bytes()
    with pytest.raises(ConfigError, match=r"^hydra\.run\.dir"):
        run(compose_train(), run_dir=run_dir)
    assert (run_dir / "results.json").read_bytes() == before


@pytest.mark.parametrize("model", KINDS)
def test_eval_adds_results_and_keeps_the_original(trained, model):
    run_dir, _ = trained(model, "learned")
    before = (run_dir / "results.json").read_bytes()
    overrides = ["eval.lengths=[3,30]", *NO_DIAGNOSTICS]
    results = evaluate_run([f"run={run_dir}", *overrides, "tag=longer"])
    assert (run_dir / "results.json").read_bytes() == before
    written = json.loads((run_dir / "results.longer.json").read_text())
    assert written == json.loads(json.dumps(results))
    assert [row["length"] for row in written["eval"]] == [3, 30]
    assert written["overrides"] == overrides
    assert set(REQUIRED_KEYS) <= set(written)


def test_eval_never_overwrites_an_earlier_tag(trained):
    run_dir, _ = trained("decoder", "sinusoidal")
    evaluate_run([f"run={run_dir}", *NO_DIAGNOSTICS, "tag=again"])
    first = (run_dir / "results.again.json").read_bytes()
    evaluate_run([f"run={run_dir}", *NO_DIAGNOSTICS, "tag=again"])
    assert (run_dir / "results.again.json").read_bytes() == first
    assert (run_dir / "results.again-1.json").is_file()


def test_eval_reproduces_the_training_run_numbers(trained):
    run_dir, results = trained("decoder", "rope")
    again = evaluate_run([f"run={run_dir}", *NO_DIAGNOSTICS, "tag=same"])
    for old, new in zip(results["eval"], again["eval"], strict=True):
        assert new["accuracy"] == pytest.approx(old["accuracy"], abs=1e-6)
        assert new["loss"] == pytest.approx(old["loss"], rel=1e-5)


def test_eval_refuses_overrides_the_model_cannot_take(trained):
    run_dir, _ = trained("decoder", "rope")
    with pytest.raises(ConfigError, match="different model"):
        evaluate_run([f"run={run_dir}", "model.d_model=64"])


def test_eval_refuses_a_directory_without_checkpoint(tmp_path, trained):
    run_dir, _ = trained("decoder", "rope")
    (tmp_path / "config.yaml").write_text((run_dir / "config.yaml").read_text())
    with pytest.raises(ConfigError, match="never finished"):
        evaluate_run([f"run={tmp_path}"])


def test_learned_policy_error_refuses_before_training(tmp_path):
    cfg = compose_train("pe=learned", "pe.policy=error", "data.len=6")
    with pytest.raises(ConfigError, match=r"^pe\.policy"):
        run(cfg, run_dir=tmp_path)
    assert not (tmp_path / "checkpoints").exists()


def test_wandb_logger_writes_offline_inside_the_run_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_DIR")
    cfg = compose_train("logger=wandb", "data.len=4", "eval.factors=[1]", *NO_DIAGNOSTICS)
    run(cfg, run_dir=tmp_path)
    assert list((tmp_path / "wandb").glob("offline-run-*/*.wandb"))


def test_logger_none_writes_no_logs(tmp_path):
    cfg = compose_train("logger=none", "data.len=4", "eval.factors=[1]", *NO_DIAGNOSTICS)
    run(cfg, run_dir=tmp_path)
    assert (tmp_path / "results.json").is_file()
    assert not (tmp_path / "logs").exists()


def test_init_from_starts_from_the_runs_weights(trained, tmp_path):
    source_dir, _ = trained("decoder", "rope")
    cfg = compose_train(
        f"init_from={source_dir}",
        "seed=1",
        "data.len=6",
        "eval.factors=[1]",
        "trainer.max_steps=1",
        "optim.lr=1e-9",
        *NO_DIAGNOSTICS,
    )
    run(cfg, run_dir=tmp_path)
    source = torch.load(source_dir / "checkpoints/last.ckpt", weights_only=False)["state_dict"]
    tuned = torch.load(tmp_path / "checkpoints/last.ckpt", weights_only=False)["state_dict"]
    for name, weight in source.items():
        torch.testing.assert_close(tuned[name], weight, atol=1e-6, rtol=0)


def test_init_from_missing_path_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"^init_from="):
        run(compose_train(f"init_from={tmp_path}/nothing"), run_dir=tmp_path / "run")


@pytest.mark.parametrize("scaling", ["pi", "ntk", "dynamic_ntk", "yarn"])
def test_eval_extends_a_rope_run_with_scaling(trained, scaling):
    run_dir, _ = trained("decoder", "rope")
    before = (run_dir / "results.json").read_bytes()
    overrides = [f"pe.scaling={scaling}", "pe.scaling_factor=4", *NO_DIAGNOSTICS]
    results = evaluate_run([f"run={run_dir}", *overrides, f"tag={scaling}"])
    assert (run_dir / "results.json").read_bytes() == before
    assert results["pe_info"]["scaling"] == scaling
    assert results["overrides"] == overrides
    assert (run_dir / f"results.{scaling}.json").is_file()


def test_eval_keeps_the_trained_runs_verdict_beside_its_own(trained):
    run_dir, original = trained("decoder", "rope")
    results = evaluate_run(
        [f"run={run_dir}", "pe.scaling=pi", "pe.scaling_factor=4", *NO_DIAGNOSTICS, "tag=v"]
    )
    assert {k: v for k, v in results["learned"].items() if k != "this_evaluation"} == (
        original["learned"]
    )
    at_train = [row for row in results["eval"] if row["length"] == 6]
    assert results["learned"]["this_evaluation"] == at_train[0]["accuracy"]


def test_eval_refuses_a_length_extension_without_its_factor(trained):
    run_dir, _ = trained("decoder", "rope")
    with pytest.raises(ConfigError, match=r"^pe\.scaling=yarn needs pe\.scaling_factor"):
        evaluate_run([f"run={run_dir}", "pe.scaling=yarn", "tag=nofactor"])
    assert not (run_dir / "results.nofactor.json").exists()


def test_eval_names_the_encodings_an_option_belongs_to(trained):
    run_dir, _ = trained("decoder", "alibi")
    with pytest.raises(ConfigError, match=r"^pe\.scaling is not an option of this run's "
                       r"encoding \(pe=alibi\); allowed: pe\.scaling with runs of .*pe=rope"):  # fmt: skip
        evaluate_run([f"run={run_dir}", "pe.scaling=yarn"])


def test_eval_scaling_changes_long_lengths_only_where_the_method_says(trained):
    """PI rescales every position, so even in-distribution numbers move; factor 1 changes nothing."""
    run_dir, original = trained("decoder", "rope")
    pi = [f"run={run_dir}", "pe.scaling=pi", *NO_DIAGNOSTICS]
    same = evaluate_run([*pi, "pe.scaling_factor=1", "tag=pi1"])
    moved = evaluate_run([*pi, "pe.scaling_factor=4", "tag=pi4"])
    assert [r["loss"] for r in same["eval"]] == pytest.approx([r["loss"] for r in original["eval"]])
    assert moved["eval"][0]["loss"] != pytest.approx(original["eval"][0]["loss"])


def test_train_accepts_scaling_for_fine_tuning(tmp_path):
    cfg = compose_train(
        "pe=rope", "pe.scaling=yarn", "pe.scaling_factor=2", "data.len=6", "eval.factors=[1]",
        *NO_DIAGNOSTICS,
    )  # fmt: skip
    results = run(cfg, run_dir=tmp_path)
    assert results["pe_info"]["scaling"] == "yarn"


def test_encoder_decoder_records_each_stacks_encoding(trained):
    info = trained("encoder_decoder", "learned")[1]["pe_info"]
    assert set(info) == {"encoder", "decoder"}
    assert info["encoder"]["policy"] == info["decoder"]["policy"] == "extend"


def test_runs_shorter_than_the_validation_interval_still_validate(tmp_path):
    cfg = compose_train(
        "trainer.max_steps=3",
        "trainer.val_check_interval=500",
        "data.len=4",
        "eval.factors=[1]",
        "logger=none",
        *NO_DIAGNOSTICS,
    )
    results = run(cfg, run_dir=tmp_path)
    assert set(results["validation"]) == {"val/loss", "val/accuracy", "val/exact_match"}


def test_wandb_groups_the_runs_of_a_sweep(tmp_path, monkeypatch):
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from helpers import CONFIG_DIR
    from lengen.loggers import wandb

    # the logger keeps its mode in WANDB_MODE for the next run of a sweep: restore it afterwards
    monkeypatch.setenv("WANDB_MODE", os.environ.get("WANDB_MODE", "offline"))
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=["hydra.mode=MULTIRUN", "hydra.sweep.dir=x/my-sweep"],
            return_hydra_config=True,
        )
    HydraConfig.instance().set_config(cfg)
    try:
        assert wandb(str(tmp_path), mode="disabled")._wandb_init["group"] == "my-sweep"
        assert wandb(str(tmp_path), group="mine", mode="disabled")._wandb_init["group"] == "mine"
    finally:
        HydraConfig.instance().cfg = None


def test_a_non_finite_loss_stops_training_naming_the_step(tmp_path, monkeypatch):
    import lengen.lit
    from lengen.checks import TrainingDiverged

    real = lengen.lit.batch_stats
    calls = []

    def diverging(logits, targets, **kwargs):
        stats = real(logits, targets, **kwargs)
        calls.append(1)
        return {**stats, "loss_sum": float("nan")} if len(calls) == 3 else stats

    monkeypatch.setattr(lengen.lit, "batch_stats", diverging)
    cfg = compose_train("data.len=4", "eval.factors=[1]", "trainer.val_check_interval=100")
    with pytest.raises(TrainingDiverged, match=r"^training diverged at step 2: the loss is nan"):
        run(cfg, run_dir=tmp_path)
    assert not (tmp_path / "results.json").exists()
