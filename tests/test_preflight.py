"""lengen.preflight: the in-process refusal table (each bad config refused by the preflight entry
that owns it, and by the build alike where the build sees the key), group choices, and one
validation pass per config and process. The same refusals from the shell, through train.py:
tests/test_bad_input.py; each encoding's own messages: tests/pe/test_options.py."""

from __future__ import annotations

import re
from typing import NamedTuple

import pytest

from helpers import CONFIG_DIR, compose_train, fresh_python
from lengen import preflight
from lengen.build import build
from lengen.checks import ConfigError
from lengen.options import OptimConfig
from lengen.preflight import Checked, check_components, check_group_overrides, validate


class Refusal(NamedTuple):
    arguments: str  #: overrides, space-separated, over debug=fast
    message: str  #: the refusal's first words: the key, then what is wrong
    by: str = "validate"  #: the preflight entry that refuses it: validate or check_components
    built: bool = False  #: the build (meta device) refuses it alike


#: every in-process refusal, each case once
REFUSALS = [
    # -- values: validate (each key against its typed config, lengen.options) --------------------
    Refusal("data.len=0", "data.len must be a positive integer, got 0"),
    Refusal("data.len=-3", "data.len must be a positive integer, got -3"),
    Refusal("seed=-1", "seed must be an integer >= 0, got -1"),
    Refusal("resume=maybe", "resume must be true, false or auto, got 'maybe'"),
    Refusal("optim.lr=0", "optim.lr must be a number in (0.0, inf), got 0"),
    Refusal("logger=wandb logger.mode=foo", "logger.mode must be one of offline, online, disabled"),
    Refusal("trainer.max_steps=0", "trainer.max_steps must be a positive integer, got 0"),
    Refusal("~pe", "pe: removed, but every run needs it; allowed: pe=<one of abacus, alibi"),
    Refusal("data.len=${oc.env:LENGEN_NO_SUCH_VARIABLE}", "data.len: cannot be resolved"),
    Refusal("data.len=${data.len}", "data.len: cannot be resolved (Recursive"),
    Refusal("eval.samples=0", "eval.samples must be a positive integer, got 0"),
    Refusal("eval.decoding=beam", "eval.decoding must be one of teacher_forced, greedy"),
    Refusal("eval.plot_dpi=0", "eval.plot_dpi must be a positive integer, got 0"),
    Refusal("eval.plot_formats=[jpg]", "eval.plot_formats must be a non-empty list of distinct"),
    Refusal("eval.lengths=[16,0]", "eval.lengths must hold positive integers", built=True),
    Refusal("model.n_heads=3", "model.d_model must be divisible by model.n_heads", built=True),
    Refusal("model.dropout=1.0", "model.dropout must be a number in [0.0, 1.0)", built=True),
    Refusal("model.attention=xformers", "model.attention must be one of auto, flex", built=True),
    Refusal(
        "model=encoder_decoder model.n_decoder_layers=0",
        "model.n_decoder_layers must be a positive integer",
        built=True,
    ),
    Refusal(
        "trainer.criterion_target=1.5",
        "trainer.criterion_target must be a number in (0.0, 1.0], got 1.5",
    ),
    Refusal(
        "trainer.criterion_target=0",
        "trainer.criterion_target must be a number in (0.0, 1.0], got 0",
    ),
    Refusal(
        "trainer.criterion_target=0.9 trainer.criterion_metric=loss",
        "trainer.criterion_metric must be one of exact_match, accuracy",
    ),
    Refusal(
        "trainer.criterion_target=0.9 trainer.criterion_checks=0",
        "trainer.criterion_checks must be a positive integer",
    ),
    # -- components: check_components (the data source's and the encoding's own checks) -------
    *(
        Refusal(arguments, message, by="check_components", built=True)
        for arguments, message in [
            ("pe=cope model=encoder", "pe: CoPE is defined for causal attention only"),
            ("pe=xpos model=encoder_decoder", "pe: XPos is defined for causal attention only"),
            ("pe=stick_breaking model=encoder", "pe: StickBreaking is defined for causal"),
            ("pe=path_fox model=encoder_decoder", "pe: PaTHFoX is defined for causal attention"),
            ("pe=rope model.d_model=12 model.n_heads=4", "pe=rope needs an even head dimension"),
            ("pe=sinusoidal model.d_model=9 model.n_heads=3", "pe=sinusoidal needs an even"),
            ("pe=rope pe.base=0.5", "pe.base must be > 1"),
            ("pe=rope pe.layout=diagonal", "pe.layout must be one of interleaved, half"),
            ("pe=alibi pe.bidirectional=mirror", "pe.bidirectional must be one of symmetric"),
            ("pe=learned pe.policy=error", "pe.policy=error: evaluation needs 257 positions"),
            ("pe.randomized=true", "pe.max_position must be an integer >= 257"),
            ("data=grid_locate model=encoder pe=t5", "pe: T5RelativeBias has no form for"),
            ("data=grid_locate", "model=decoder: task grid_locate has positions on 2 axes"),
            ("data.task.n_symbols=1", "data.task.n_symbols must be an integer >= 2"),
            ("data.min_len=0", "data.min_len must be a positive integer"),
            ("data.min_len=20 data.len=10", "data.min_len must be <= data.len"),
            ("data=shapes model=encoder data.len=17", "data.len must be a multiple of"),
        ]
    ),
]
ENTRIES = {"validate": validate, "check_components": check_components}
IDS = [case.arguments for case in REFUSALS]


def test_each_case_is_in_the_table_once():
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("case", REFUSALS, ids=IDS)
def test_refused_by_its_preflight_entry(case):
    cfg = compose_train(*case.arguments.split())
    if case.by == "check_components":  # validate, which precheck asks first, lets it through
        validate(cfg)
    with pytest.raises(ConfigError, match=f"^{re.escape(case.message)}"):
        ENTRIES[case.by](cfg)


BUILT = [case for case in REFUSALS if case.built]


@pytest.mark.parametrize("case", BUILT, ids=[case.arguments for case in BUILT])
def test_the_build_refuses_alike(case):
    with pytest.raises(ConfigError, match=f"^{re.escape(case.message)}"):
        build(compose_train(*case.arguments.split()), meta=True)


def test_the_refusals_import_no_torch():
    """Each case of the table, as precheck asks it (validate, then check_components), in one
    fresh interpreter: torch is never loaded."""
    code = (
        "from helpers import compose_train\n"
        "from lengen.lazy import is_loaded\n"
        "from lengen.preflight import check_components, validate\n"
        f"for arguments in {IDS!r}:\n"
        "    cfg = compose_train(*arguments.split())\n"
        "    try:\n"
        "        validate(cfg)\n"
        "        check_components(cfg)\n"
        "    except ValueError:\n"
        "        pass\n"
        "    print(arguments, is_loaded('torch'))"
    )
    lines = fresh_python(code).splitlines()
    assert len(lines) == len(REFUSALS)
    assert [line for line in lines if line.endswith("True")] == []


# -- check_components: what it covers ---------------------------------------------------------
@pytest.mark.parametrize(
    "overrides", [(), ("pe=learned", "model=encoder_decoder"), ("data=shapes", "model=encoder")]
)
def test_check_components_covers_lengens_own_components(overrides):
    assert check_components(compose_train(*overrides)) is True


def test_check_components_leaves_the_flex_kernel_to_the_build():
    assert check_components(compose_train("model.attention=flex")) is False


# -- group choices ----------------------------------------------------------------------------
def test_unknown_group_choice_lists_allowed_values():
    with pytest.raises(ConfigError) as error:
        check_group_overrides(["pe=rope,ropey"])
    first_line = str(error.value).splitlines()[0]
    assert first_line.startswith("pe=ropey") and "alibi" in first_line and "rope" in first_line


def test_known_group_choices_pass():
    check_group_overrides(["pe=rope,alibi", "model=encoder", "data.len=8", "experiment=null"])


# -- one validation pass per config and process -----------------------------------------------
@pytest.fixture
def optim_checks(monkeypatch) -> list:
    """Every OptimConfig.from_keys call from here on (validate builds it once per pass), with
    this process's validated configs forgotten."""
    monkeypatch.setattr(preflight.values, "_CHECKED", {})
    calls, original = [], OptimConfig.from_keys.__func__

    def counted(cls, *args, **kwargs):
        calls.append(args)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(OptimConfig, "from_keys", classmethod(counted))
    return calls


def test_validate_returns_the_typed_configs():
    checked = validate(compose_train("optim.lr=0.002", "seed=3"))
    assert isinstance(checked, Checked)
    assert checked.optim.lr == 0.002 and checked.run.seed == 3
    assert checked.model.kind == "decoder" and checked.eval.samples > 0


def test_the_same_config_is_checked_once_per_process(optim_checks):
    first = validate(compose_train("optim.lr=0.002"))
    again = validate(compose_train("optim.lr=0.002"))  # composed anew, as Hydra's main does
    assert again is first and len(optim_checks) == 1


def test_another_config_is_checked(optim_checks):
    first = validate(compose_train("optim.lr=0.002"))
    other = validate(compose_train("optim.lr=0.003"))
    assert other is not first and other.optim.lr == 0.003 and len(optim_checks) == 2


def test_a_refused_config_is_refused_every_time(optim_checks):
    cfg = compose_train("optim.lr=0")
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"^optim\.lr"):
            validate(cfg)
    assert len(optim_checks) == 2


def test_a_train_py_process_validates_its_config_once(tmp_path):
    """precheck composes and validates; Hydra's main composes the same config again and run()
    gets precheck's typed configs back: the optimiser's config is built once in the process
    (LitModel takes it as validate built it)."""
    code = (
        "import runpy, sys\n"
        "from helpers import ROOT\n"
        "from lengen.options import OptimConfig\n"
        "calls, original = [], OptimConfig.from_keys.__func__\n"
        "def counted(cls, *args, **kwargs):\n"
        "    calls.append(args)\n"
        "    return original(cls, *args, **kwargs)\n"
        "OptimConfig.from_keys = classmethod(counted)\n"
        "sys.argv = ['train.py', 'debug=fast', 'data.len=4', 'eval.factors=[1]', 'logger=none',\n"
        "            'model.n_layers=1', 'model.d_model=16', 'eval.diagnostics=false',\n"
        f"            'eval.plot_dpi=20', 'hydra.run.dir={tmp_path / 'run'}']\n"
        "runpy.run_path(str(ROOT / 'train.py'), run_name='__main__')\n"
        "print(len(calls))"
    )
    assert fresh_python(code).splitlines()[-1] == "1"
    assert (tmp_path / "run" / "results.json").is_file()


# -- the command line as Hydra reads it; how runs start; where they write -----------------------
def test_hydras_config_dir_flag_is_composed_before_the_config_root():
    command = preflight.parse_command_line(["--config-dir=configs", "-m", "seed=1"])
    assert command.config_dirs[0].name == "configs" and command.config_dirs[-1] == CONFIG_DIR
    assert command.sweeping and command.overrides == ["seed=1"]


@pytest.mark.parametrize("flag", [["--help"], ["--cfg", "job"], ["--info"]])
def test_flags_that_only_print_are_left_to_hydra(flag):
    assert preflight.parse_command_line(flag) is None


def test_several_nodes_with_nothing_to_start_them_are_refused(monkeypatch):
    for variable in preflight.NODE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    cfg = compose_train("trainer.num_nodes=2", "trainer.accelerator=cpu")
    with pytest.raises(ConfigError, match=r"^trainer\.num_nodes=2: nothing here starts"):
        preflight.check_launch(cfg, sweeping=False, cluster=False)


def test_several_nodes_in_a_slurm_job_start(monkeypatch):
    # what srun gives each of the job's tasks (the first, here); without these the command was
    # not started by srun and is refused (tests/test_signal_waits.py)
    srun = {"SLURM_NTASKS": "2", "SLURM_NODEID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0"}
    for name, value in {**srun, "SLURM_NTASKS_PER_NODE": "1"}.items():
        monkeypatch.setenv(name, value)
    cfg = compose_train("trainer.num_nodes=2", "trainer.accelerator=cpu")
    preflight.check_launch(cfg, sweeping=False, cluster=False)


def test_several_processes_per_run_are_refused_in_a_local_sweep_only():
    cfg = compose_train("trainer.devices=2", "trainer.accelerator=cpu")
    preflight.check_launch(cfg, sweeping=True, cluster=True)  # submitit starts them
    with pytest.raises(ConfigError, match=r"^trainer\.devices=2 \(several processes"):
        preflight.check_launch(cfg, sweeping=True, cluster=False)


def test_half_precision_on_the_cpu_is_refused():
    cfg = compose_train("trainer.precision=bf16-mixed", "trainer.accelerator=cpu")
    with pytest.raises(ConfigError, match=r"^trainer\.precision=bf16-mixed: half precision"):
        preflight.check_devices(cfg)


def test_a_run_dir_under_a_file_is_refused(tmp_path):
    (tmp_path / "afile").write_text("mine\n")
    with pytest.raises(ConfigError, match=r"^hydra\.run\.dir=.*afile is a file"):
        preflight.check_output_dir("hydra.run.dir", f"{tmp_path}/afile/run")


def test_a_new_run_dir_in_a_writable_folder_passes(tmp_path):
    preflight.check_output_dir("hydra.run.dir", f"{tmp_path}/new/run")


@pytest.mark.parametrize("content", ['{"eval": [', "[1, 2]"])
def test_a_results_file_that_is_no_json_object_is_refused(tmp_path, content):
    (tmp_path / "results.json").write_text(content)
    with pytest.raises(ConfigError, match=r"^hydra\.run\.dir: .*results\.json"):
        preflight.check_results_file(tmp_path / "results.json")


# -- command lines refused before anything is composed -------------------------------------------
@pytest.mark.parametrize("argument", ["+foo=1", "++foo=1"])
def test_a_new_top_level_key_that_nothing_reads_is_refused(argument):
    key = argument.partition("=")[0]
    with pytest.raises(ConfigError, match=f"^{re.escape(key)}: a new top-level key that nothing"):
        preflight.check_new_top_level_keys([argument], (CONFIG_DIR,))


def test_a_list_given_to_a_group_outside_a_sweep_suggests_the_sweep():
    with pytest.raises(
        ConfigError, match=r"one choice; .* or a sweep over several: -m pe=rope,alibi$"
    ):
        check_group_overrides(["pe=[rope,alibi]"])


def test_adding_a_key_that_exists_says_to_drop_the_plus():
    with pytest.raises(
        ConfigError, match=r"^\+seed: seed is a key already; allowed: seed=… \(without"
    ):
        preflight.check_override_keys(["+seed=3"])


def test_a_command_line_hydra_cannot_parse_says_how_to_quote():
    with pytest.raises(ConfigError, match=r"^cannot parse the command line: .*quoted for Hydra"):
        preflight.check_override_keys(["data.len=[8,"])
