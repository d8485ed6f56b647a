"""A word without '=' on train.py's or eval.py's command line (a stray word, or the pieces a
shell split off a value with spaces) is refused by lengen's pre-check in one line naming it,
exit 2, nothing written; it was Hydra's raw 4-line "missing EQUAL" message, exit 1 (issue #51:
U01s). Hydra's own flags and override forms still pass."""

from __future__ import annotations

import pytest

from helpers import ROOT, run_train
from lengen import preflight
from lengen.errors import ConfigError


def test_train_py_refuses_the_words_a_shell_split_off_a_value_naming_them(tmp_path):
    run_dir = tmp_path / "my"
    done = run_train("debug=fast", f"hydra.run.dir={run_dir}", "run", "ü", one_thread=True)
    (line,) = done.stderr.strip().splitlines()
    assert (done.returncode, line.split(":")[0]) == (2, "error")
    assert "'run', 'ü': not key=value" in line and "quoted" in line
    assert not run_dir.exists()


def test_a_stray_word_after_overrides_is_refused_by_the_pre_check():
    with pytest.raises(ConfigError, match=r"^'bogus': not key=value"):
        preflight.parse_command_line(["debug=fast", "bogus"])


@pytest.mark.parametrize(
    "arguments",
    [
        ["-m", "seed=1,2"],
        ["--multirun", "seed=1"],
        ["--cfg", "job", "seed=1"],
        ["-c", "job"],
        ["--info"],
        ["--help"],
        ["hydra/launcher=basic", "+pe.extra=1", "~model.d_ff", "pe@pe=rope"],
    ],
)
def test_hydras_flags_and_override_forms_still_pass(arguments):
    preflight.parse_command_line(arguments)  # raises ConfigError where refused


def test_eval_py_says_to_quote_a_value_with_spaces():
    import subprocess
    import sys

    command = [sys.executable, str(ROOT / "eval.py"), "run=/nonexistent", "bogus"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1)
    assert "bogus: expected key=value (did the shell split a value with spaces?" in done.stderr
