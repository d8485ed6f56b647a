"""lengen.preflight.sizes and resources.check_model_memory: sizes that options set (tables,
networks, widths, vocabularies) are refused up front when they cannot fit, naming the key;
shipped configs are not, and the parameter estimate bounds the built model's from above within
a small factor."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import ROOT, compose_train, fresh_python, pe_supports, yaml_choices
from lengen.errors import ConfigError
from lengen.preflight.resources import check_model_memory, config_axes
from lengen.preflight.sizes import model_sizes

GIB = 2**30


@pytest.fixture
def memory(monkeypatch):
    """A machine with 16 GiB of CPU memory available, whatever this one has."""
    monkeypatch.setattr(
        "lengen.preflight.resources.available_memory", lambda cfg: (16 * GIB, "CPU")
    )


#: the hostile trial's cases (O04–O14, TK24, O08) and their kind: overrides, the key named
TOO_BIG = {
    "learned_table": (["pe=learned", "pe.table_size=2000000000"], "pe.table_size"),
    "cope_positions": (["pe=cope", "pe.npos_max=1000000000"], "pe.npos_max"),
    "fire_mlp": (["pe=fire", "pe.mlp_width=10000000000"], "pe.mlp_width"),
    "dape_mlp": (["pe=dape", "pe.mlp_width=10000000000"], "pe.mlp_width"),
    "path_rank": (["pe=path", "pe.w_rank=1000000000"], "pe.w_rank"),
    "t5_buckets": (["pe=t5", "pe.num_buckets=1000000000"], "pe.num_buckets"),
    "sandwich_dim": (["pe=sandwich", "pe.dim=1000000000"], "pe.dim"),
    "start_offset": (
        ["data=addition", "data.task.positions=coupled", "pe=learned", "pe.start_offset=100000000"],
        "pe.start_offset",
    ),
    "width": (["model.d_model=65536", "model.n_heads=1"], "model.d_model"),
    "mlp": (["model.d_ff=100000000"], "model.d_ff"),
    "vocabulary": (["data.task.n_symbols=1000000000"], "data.task.n_symbols"),
    "schedule_layer": (
        ["pe=irope", "pe.layers=[{pe: t5, num_buckets: 1000000000}, {pe: rope}]"],
        "pe.layers.0.num_buckets",
    ),
}


@pytest.mark.parametrize("case", sorted(TOO_BIG))
def test_a_size_that_cannot_fit_is_refused_naming_its_key(memory, case):
    overrides, key = TOO_BIG[case]
    cfg = compose_train("eval.lengths=[8,16]", *overrides)
    with pytest.raises(ConfigError, match=rf"^{key}=\d+: training this model needs about [\d,.]+ "):
        check_model_memory(cfg)


def test_the_refusal_gives_the_estimate_and_the_memory(memory):
    cfg = compose_train("pe=learned", "pe.table_size=2000000000")
    with pytest.raises(ConfigError) as refused:
        check_model_memory(cfg)
    # 2e9 rows × 128 × 32 bytes (weight, gradient, Adam's two moments, transient copies)
    assert "needs about 7,629.4 GiB" in str(refused.value)
    assert "more than the 16.0 GiB of CPU memory available" in str(refused.value)


@pytest.mark.parametrize(
    "experiment", [None, *yaml_choices("experiment")], ids=lambda name: name or "default"
)
def test_a_shipped_experiment_is_not_refused(memory, experiment):
    cfg = compose_train(*([f"experiment={experiment}"] if experiment else []), fast=False)
    check_model_memory(cfg)


def _built_parameters(cfg) -> int:
    from lengen.build import build

    _, model, _ = build(cfg, meta=True)
    return sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())


@pytest.mark.parametrize("pe", yaml_choices("pe"))
def test_the_parameter_estimate_bounds_the_built_model_within_a_factor_of_two(pe):
    model = "decoder" if pe_supports(pe, "decoder") else "encoder"
    cfg = compose_train(f"pe={pe}", f"model={model}", "eval.lengths=[8,16]")
    estimate = sum(model_sizes(cfg, config_axes(cfg)).parameters.values())
    built = _built_parameters(cfg)
    assert built <= estimate <= 2 * built


def test_a_table_too_big_is_refused_on_the_command_line_writing_nothing(tmp_path):
    """O04: it failed at build with a 4-line RuntimeError and a run directory left."""
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "debug=fast", "pe=learned",
         "pe.table_size=2000000000", f"hydra.run.dir={run_dir}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: pe.table_size=")
    assert not run_dir.exists()


def test_a_size_that_cannot_fit_is_refused_before_torch_is_imported():
    imported = fresh_python(
        "import sys\n"
        "from lengen.errors import ConfigError\n"
        "from lengen.preflight import precheck\n"
        "try:\n"
        "    precheck(['debug=fast', 'pe=learned', 'pe.table_size=2000000000'])\n"
        "except ConfigError as error:\n"
        "    assert str(error).startswith('pe.table_size='), error\n"
        "print('torch' in sys.modules)"
    )
    assert imported == "False"


def test_the_training_estimate_bounds_a_measured_peak_within_a_factor_of_two(single_thread):
    """A table that dominates the model (T5's, 4e6 buckets × 4 heads): built, one step of
    AdamW; the peak memory it took lies under the estimate, and the estimate under twice it."""
    import torch

    from lengen.build import build
    from lengen.evaluation.metrics import loss_sum
    from lengen.measure import measure

    cfg = compose_train("pe=t5", "pe.num_buckets=4000000", "eval.lengths=[8,16]")
    estimate = sum(model_sizes(cfg, config_axes(cfg)).training.values())
    with measure("cpu") as measured:
        data, model, _ = build(cfg)
        optimiser = torch.optim.AdamW(model.parameters())
        batch = data.train_batch(0)
        loss_sum(model(**batch["inputs"]), batch["targets"]).backward()
        optimiser.step()
    if measured.memory_source != "vm_hwm":
        pytest.skip("no exact peak here (/proc/self/clear_refs): lengen.measure")
    peak = measured.as_row()["peak_mem_mb"] * 2**20
    assert peak <= estimate <= 2 * peak


def _step(cfg):
    """Build ``cfg`` and take one training step's forward and backward -> the step's peak
    memory growth in bytes (its model and batch built before), or None without an exact peak."""
    import torch

    from lengen.build import build
    from lengen.evaluation.metrics import loss_sum
    from lengen.measure import measure

    data, model, _ = build(cfg)
    batch = data.train_batch(0)
    with measure("cpu") as measured:
        loss_sum(model(**batch["inputs"]), batch["targets"]).backward()
    del data, model, batch
    torch.set_num_threads(1)
    if measured.memory_source != "vm_hwm":
        return None
    return measured.as_row()["peak_mem_mb"] * 2**20


#: one of each attention path: SDPA, a bias block, gates, transforms, contextual positions
MECHANISMS = ("rope", "nope", "xpos", "alibi", "t5", "kerple", "fire", "sandwich", "dape",
              "fox", "stick_breaking", "path", "cope")  # fmt: skip
#: every instance as long as data.len (copy: 2 × 64 + 1 = 129 tokens), 32 of them
FIXED = ("data.min_len=64", "data.len=64", "data.batch_size=32", "eval.lengths=[64]")


@pytest.fixture(scope="module")
def warmed(single_thread):
    """A first step taken, so the process's first-use allocations are not measured below."""
    _step(compose_train(*FIXED))


@pytest.mark.parametrize("pe", MECHANISMS)
def test_the_activation_estimate_bounds_a_measured_step_within_a_factor_of_three(warmed, pe):
    cfg = compose_train(*FIXED, f"pe={pe}")
    peak = _step(cfg)
    if peak is None:
        pytest.skip("no exact peak here (/proc/self/clear_refs): lengen.measure")
    estimate = sum(model_sizes(cfg, config_axes(cfg)).training.values())
    assert peak <= estimate <= 3 * peak
