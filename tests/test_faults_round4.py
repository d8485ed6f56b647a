"""Issue #51's hostile trial (../shared/trials/hostile-2026-11-28.md), the cases left after
round three (tests/test_faults_round3.py): memory limits the size check could not see
(E13b); block options and encodings that cannot act together, and encodings with no attention
layer to act in, refused before torch (they were refused at build, a run folder left).
Evaluation estimates: tests/test_estimate_bound.py; damaged calibrations:
tests/test_estimate_damage.py."""

from __future__ import annotations

import resource

import pytest

from helpers import compose_train, fresh_python, run_train
from lengen import preflight
from lengen.errors import ConfigError
from lengen.preflight import limits
from lengen.preflight.resources import available_memory, check_memory

GIB = 2**30


def test_a_v2_cgroup_limit_is_its_max_less_its_usage(tmp_path):
    group = tmp_path / "job"
    group.mkdir()
    (group / "memory.max").write_text(f"{6 * GIB}\n")
    (group / "memory.current").write_text(f"{GIB}\n")
    assert limits.cgroup_available(tmp_path, "0::/job\n") == 5 * GIB


def test_a_v1_cgroup_limit_is_the_tightest_of_it_and_its_parents(tmp_path):
    memory = tmp_path / "memory"
    (memory / "adv").mkdir(parents=True)
    (memory / "memory.limit_in_bytes").write_text(f"{4 * GIB}\n")
    (memory / "memory.usage_in_bytes").write_text(f"{GIB}\n")
    (memory / "adv" / "memory.limit_in_bytes").write_text(f"{6 * GIB}\n")
    (memory / "adv" / "memory.usage_in_bytes").write_text("0\n")
    assert limits.cgroup_available(tmp_path, "4:memory:/adv\n1:cpu:/\n") == 3 * GIB


def test_an_unlimited_cgroup_is_no_limit(tmp_path):
    (tmp_path / "memory.max").write_text("max\n")
    (tmp_path / "memory.current").write_text(f"{GIB}\n")
    assert limits.cgroup_available(tmp_path, "0::/\n") is None


@pytest.fixture
def address_limit(monkeypatch):
    """``ulimit -v 1200000`` (the trial's E13b), on a machine with 16 GiB available."""
    real = resource.getrlimit

    def getrlimit(which):
        if which == resource.RLIMIT_AS:
            return 1_200_000 * 1024, resource.RLIM_INFINITY
        return real(which)

    monkeypatch.setattr(limits.resource, "getrlimit", getrlimit)
    monkeypatch.setattr(limits, "cgroup_available", lambda: None)
    # eval.py's check runs before torch is imported, its process ~33 MiB large
    monkeypatch.setattr(limits, "_status_kib", lambda: {"VmSize": 33_504, "VmData": 18_120})
    monkeypatch.setattr(limits, "torch_imported", lambda: False)
    monkeypatch.setattr("lengen.preflight.resources.cpu_memory_available", lambda: 16 * GIB)


def test_the_address_space_limit_bounds_the_memory_available(address_limit):
    cfg = compose_train("debug=fast", "trainer.accelerator=cpu")
    available, where = available_memory(cfg)
    assert available == 1_200_000 * 1024 - 33_504 * 1024 - limits.TORCH_ADDRESS_SPACE
    assert where == "CPU (ulimit -v)"


def test_an_evaluation_length_past_the_address_space_limit_is_refused(address_limit):
    cfg = compose_train("debug=fast", "trainer.accelerator=cpu", "eval.lengths=[8,16,32768]")
    with pytest.raises(ConfigError, match=r"^eval.lengths: evaluating length 32768 .*ulimit -v"):
        check_memory(cfg)


# -- block options and encodings, before torch ---------------------------------------------
#: (overrides, the refusal's start): block options on plain logits with an encoding that has
#: none (it computes attention itself, or reads its logits from q·k)
NO_PLAIN_LOGITS = [
    (("pe=fox", "model.attn_sinks=true"), "model.attn_sinks=true: pe=ForgettingAttention computes"),
    (("pe=stick_breaking", "model.kv_bias=true"), "model.kv_bias=true: pe=StickBreaking computes"),
    (("pe=path", "model.attn_fn=sigmoid"), "model.attn_fn=sigmoid: pe=PaTH computes attention"),
    (("pe=cope", "model.attn_fn=sigmoid"), "model.attn_fn=sigmoid: pe=CoPE reads its logits"),
    (("pe=dape", "model.attn_sinks=true"), "model.attn_sinks=true: pe=DAPE reads its logits"),
    (
        ("pe=rope", "pe.extension=rerope", "model.attn_sinks=true"),
        "model.attn_sinks=true: pe=RoPE computes attention itself under pe.extension=rerope",
    ),
    (("pe=irope", "pe.layers=[rope,fox]", "model.kv_bias=true"), "model.kv_bias=true: pe=Forg"),
]


@pytest.mark.parametrize(("overrides", "message"), NO_PLAIN_LOGITS)
def test_a_block_option_on_plain_logits_is_refused_with_an_encoding_without_them(
    overrides, message
):
    with pytest.raises(ConfigError) as refused:
        preflight.check_components(compose_train(*overrides))
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "overrides",
    [("pe=rope", "model.attn_sinks=true"), ("pe=alibi", "model.attn_fn=sigmoid"),
     ("pe=fox", "model.attn_gate=headwise"), ("pe=fox", "model.qk_norm=true")],
)  # fmt: skip
def test_block_options_an_encoding_can_take_pass(overrides):
    preflight.check_components(compose_train(*overrides))


@pytest.mark.parametrize(
    ("overrides", "name"),
    [(("model.mixer=gla",), "RoPE"), (("model.mixers=[gla,lstm]", "pe=alibi"), "ALiBi"),
     (("model.mixer=gla", "pe=fox"), "ForgettingAttention"),
     (("model.mixer=gla", "pe=cope"), "CoPE"), (("model.mixer=gla", "pe=irope"), "IRoPE")],
)  # fmt: skip
def test_an_encoding_with_no_attention_layer_to_act_in_is_refused_before_torch(overrides, name):
    with pytest.raises(ConfigError, match=rf"^pe: {name} acts in attention layers only and no "):
        preflight.check_components(compose_train(*overrides))


@pytest.mark.parametrize(
    "overrides",
    [("pe=nope", "model.mixer=gla"), ("pe=learned", "model.mixer=lstm"),
     ("pe=sinusoidal", "model.mixer=deltanet"), ("pe=rope", "model.mixers=[gla,attention]")],
)  # fmt: skip
def test_an_encoding_that_reaches_the_model_passes(overrides):
    preflight.check_components(compose_train(*overrides))


@pytest.mark.parametrize(
    "arguments",
    ["pe=fox model.attn_sinks=true", "model.mixer=gla"],
)
def test_the_refusal_is_one_line_and_writes_nothing(tmp_path, arguments):
    result = run_train(
        "debug=fast", "eval.lengths=[8,16]", *arguments.split(), cwd=tmp_path, timeout=120,
        one_thread=True,
    )  # fmt: skip
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("overrides", [("pe=fox", "model.kv_bias=true"), ("model.mixer=gla",)])
def test_the_refusal_imports_no_torch(overrides):
    code = (
        "import sys\n"
        "from helpers import compose_train\n"
        "from lengen import preflight\n"
        "from lengen.errors import ConfigError\n"
        "try:\n"
        f"    preflight.check_components(compose_train(*{overrides!r}))\n"
        "except ConfigError as error:\n"
        "    print('refused')\n"
        "print('torch' in sys.modules)\n"
    )
    assert fresh_python(code).splitlines() == ["refused", "False"]


# -- rows of finished lengths, kept as each finishes (E13b) ---------------------------------
@pytest.fixture(scope="module")
def tiny_run():
    from lengen.build import build

    cfg = compose_train("data.len=4", "model.d_model=32", "model.n_layers=1", "eval.samples=4")
    data, model, _ = build(cfg)
    return cfg, data, model


def test_each_finished_length_hands_over_the_rows_so_far(tiny_run, single_thread):
    from lengen.evaluation.tasks import score_lengths

    cfg, data, model = tiny_run
    seen = []
    score_lengths(model, data, [4, 8], samples=4, progress=False, on_row=seen.append)
    assert [[row["length"] for row in rows] for rows in seen] == [[4], [4, 8]]


def test_a_dying_evaluation_leaves_the_finished_lengths_rows(tiny_run, tmp_path, monkeypatch):
    import json

    import torch

    import lengen.evaluation
    from lengen.rundir import RunDirectory
    from lengen.train import evaluate_and_write

    def dies_after_one_length(*args, on_row, **kwargs):
        on_row([{"length": 4, "accuracy": 0.5}])
        raise KeyboardInterrupt  # unwinds past evaluate_and_write, as nothing catches it

    monkeypatch.setattr(lengen.evaluation, "evaluate", dies_after_one_length)
    cfg, data, model = tiny_run
    with pytest.raises(KeyboardInterrupt):
        evaluate_and_write(cfg, model, data, [4, 8], device=torch.device("cpu"),
                           directory=RunDirectory(tmp_path), train_tokens=0, extra={},
                           tag="x", progress=False)  # fmt: skip
    kept = json.loads((tmp_path / ".results.x.partial.json").read_text())
    assert kept["rows"] == [{"length": 4, "accuracy": 0.5}]


def test_the_kept_rows_are_removed_once_the_results_are_written(tiny_run, tmp_path, single_thread):
    import torch

    from lengen.rundir import RunDirectory
    from lengen.train import evaluate_and_write

    cfg, data, model = tiny_run
    evaluate_and_write(cfg, model, data, [4, 8], device=torch.device("cpu"),
                       directory=RunDirectory(tmp_path), train_tokens=0, extra={}, tag="x",
                       progress=False)  # fmt: skip
    assert (tmp_path / "results.x.json").is_file()
    assert not (tmp_path / ".results.x.partial.json").exists()
