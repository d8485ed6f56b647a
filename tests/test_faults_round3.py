"""Issue #51's third hostile trial (../shared/trials/hostile-2026-11-28.md), items 5, 7, 8 and
9: each case's command through the real ``python train.py``, refused before anything is
written (one line naming the key, exit 2, no traceback), and the typed-config checks behind the
cases left from the previous trial (V05, M05, T02). The refusals of each class in-process:
tests/test_schema_finite.py, tests/pe/test_config_local.py, tests/test_preflight_launchers.py,
tests/test_preflight_task_name.py, tests/aggregate/test_load_values.py,
tests/test_reeval_tags.py."""

from __future__ import annotations

import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import compose_train, run_train
from lengen import preflight
from lengen.errors import ConfigError

FAST = "debug=fast eval.lengths=[8,16]"
#: (trial case, arguments after debug=fast, the first line's start after "error: ")
CASES = [
    ("P15", f"{FAST} pe=fox pe.gate_bias_init=nan", "pe.gate_bias_init must be a finite number"),
    ("P23b", f"{FAST} pe=pope pe.base=inf", "pe.base must be a finite number, got inf"),
    ("P52", f"{FAST} pe=fox pe.window=4", "pe.window=4: ForgettingAttention computes attention"),
    ("V05", "debug=fast eval.lengths=[8] trainer.devices=[]", "trainer.devices must be a"),
    ("M05", f"{FAST} pe=learned pe.table_size=1", "pe.table_size=1: training needs 33 positions"),
    ("TK07", f"{FAST} data=s5 data.task.group=a5", "data.task.group=a5 makes the task a5"),
    (
        "SN17",
        "-m debug=fast seed=0,1 hydra/launcher=local hydra.launcher.n_jobs=0",
        "hydra.launcher.n_jobs=0:",
    ),
]


def train(arguments: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """-> (the finished process, what it left in its folder, its current directory: a single
    run writes under results/ there by default, as the trial's commands did)."""
    with tempfile.TemporaryDirectory() as folder:
        result = run_train(
            *arguments.split(),
            f"hydra.sweep.dir={folder}/sweep",
            cwd=Path(folder),
            timeout=120,
            one_thread=True,
        )
        return result, sorted(path.name for path in Path(folder).iterdir())


@pytest.fixture(scope="module")
def outcomes() -> dict[str, tuple[subprocess.CompletedProcess, list[str]]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = pool.map(train, [arguments for _, arguments, _ in CASES])
        return dict(zip([case for case, _, _ in CASES], done, strict=True))


@pytest.mark.parametrize(("case", "arguments", "expected"), CASES, ids=[c for c, _, _ in CASES])
def test_the_trials_case_is_one_line_naming_the_key(outcomes, case, arguments, expected):
    result, _ = outcomes[case]
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith(f"error: {expected}"), result.stderr[-2000:]
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize("case", [c for c, _, _ in CASES])
def test_the_trials_case_writes_nothing(outcomes, case):
    assert outcomes[case][1] == []  # no run directory, no sweep folder, no results/ here


# -- the previous trial's cases, at their typed configs ------------------------------------
@pytest.mark.parametrize("devices", ["[]", "[0,0]", "[-1]"])
def test_devices_must_name_at_least_one_device_once(devices):
    with pytest.raises(ConfigError, match=r"^trainer\.devices must be .* non-empty list"):
        preflight.validate(compose_train(f"trainer.devices={devices}"))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("pe.table_size=1", "eval.lengths=[8,16]"), "pe.table_size=1: training needs 33"),
        (("pe.table_size=40",), "pe.table_size=40: evaluation needs 257 positions"),
        (("pe.table_size=10", "pe.policy=interpolate"), "pe.table_size=10: training needs 33"),
    ],
)
def test_a_learned_table_given_too_small_is_refused(overrides, message):
    with pytest.raises(ConfigError) as refused:
        preflight.check_components(compose_train("pe=learned", *overrides))
    assert str(refused.value).startswith(message)


def test_a_tokenizer_path_that_holds_no_tokenizer_is_refused_naming_the_key(tmp_path):
    corpus = tmp_path / "small.txt"
    corpus.write_text("".join(f"the cat sat on mat {i}\n" for i in range(200)))
    cfg = compose_train(
        "data=text", f"data.files.train={corpus}", "data.len=16", f"data.tokenizer={corpus}"
    )
    with pytest.raises(ConfigError, match=rf"^data\.tokenizer={corpus}: not a tokenizer\.json"):
        preflight.validate(cfg)


# -- the previous trial's rough messages ----------------------------------------------------
def test_several_values_outside_a_sweep_are_one_line_naming_the_ways(tmp_path):
    # Q02: Hydra's 5-line "Ambiguous value", exit 1
    with pytest.raises(ConfigError) as refused:
        preflight.precheck(["pe=rope,alibi", f"hydra.run.dir={tmp_path}/r"])
    assert str(refused.value).startswith(
        "pe=rope,alibi: several values outside a sweep; allowed: -m pe=rope,alibi"
    )


def test_a_long_value_is_shown_cut_with_its_length():
    # R11: a 100 KB value echoed whole made a 100 KB line
    with pytest.raises(ConfigError) as refused:
        preflight.validate(compose_train("model.attention=" + "a" * 100000))
    message = str(refused.value)
    assert len(message) < 200 and message.endswith("… (100,002 characters)")


def test_greedy_decoding_of_text_is_refused(tmp_path):
    # T09: eval.decoding=greedy was ignored for text without a word
    corpus = tmp_path / "small.txt"
    corpus.write_text("".join(f"the cat sat on mat {i}\n" for i in range(200)))
    cfg = compose_train(
        "data=text", f"data.files.train={corpus}", "data.len=16", "data.tokenizer=char",
        "eval.decoding=greedy",
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"^eval\.decoding=greedy: text is scored by perplexity"):
        preflight.validate(cfg)


def test_a_fifo_given_as_the_corpus_is_named_as_such(tmp_path):
    # X05: a FIFO that exists was reported as "no file matches"
    import os

    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    cfg = compose_train("data=text", f"data.files.train={fifo}", "data.len=16")
    with pytest.raises(ConfigError, match=r"^data\.files\.train: '.*fifo\.txt' is not a regular"):
        preflight.validate(cfg)


def test_a_corpus_of_blank_lines_is_refused(tmp_path):
    # X03: 5,000 newlines trained and reported ppl 1.08 with no warning
    corpus = tmp_path / "newlines.txt"
    corpus.write_text("\n" * 5000)
    cfg = compose_train("data=text", f"data.files.train={corpus}", "data.len=16")
    with pytest.raises(ConfigError, match=r"^data\.files\.train: .*newlines\.txt holds only white"):
        preflight.validate(cfg)
