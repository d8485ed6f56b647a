"""A logger that cannot start is refused before the run directory is made (lengen.loggers'
``wandb_start_refusal``, asked by lengen.preflight.resources). No test touches the network:
the server's answer is monkeypatched."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from helpers import ROOT
from lengen.errors import ConfigError
from lengen.loggers import wandb_start_refusal
from lengen.options import WandbConfig
from lengen.preflight import precheck


@pytest.fixture
def no_credentials(tmp_path, monkeypatch):
    """No W&B key anywhere wandb looks, and a server that would not answer."""
    for variable in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_BASE_URL", "WANDB_MODE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))

    def unreachable(*args, **kwargs):
        raise OSError("Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    return tmp_path


def _login(tmp_path, host="api.wandb.ai"):
    (tmp_path / "netrc").write_text(f"machine {host}\n  login user\n  password {'k' * 40}\n")


def test_online_without_credentials_is_refused_before_the_run_directory(no_credentials):
    run_dir = no_credentials / "run"
    with pytest.raises(ConfigError, match=r"^logger=wandb logger\.mode=online: no W&B credentials"):
        precheck(["debug=fast", "logger=wandb", "logger.mode=online", f"hydra.run.dir={run_dir}"])
    assert not run_dir.exists()


def test_the_refusal_says_how_to_run_offline(no_credentials):
    refusal = wandb_start_refusal(WandbConfig(mode="online"))
    assert "allowed: logger.mode=offline or WANDB_MODE=offline" in refusal


def test_online_from_the_environment_names_wandb_mode(no_credentials, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "online")
    assert wandb_start_refusal(WandbConfig()).startswith("logger=wandb WANDB_MODE=online: ")


def test_a_netrc_login_counts_as_credentials(no_credentials):
    _login(no_credentials)
    assert "no W&B credentials" not in wandb_start_refusal(WandbConfig(mode="online"))


def test_credentials_and_a_server_that_does_not_answer_are_refused(no_credentials):
    _login(no_credentials)
    refusal = wandb_start_refusal(WandbConfig(mode="online"))
    assert refusal.startswith("logger=wandb logger.mode=online: the W&B server https://api.wandb")
    assert "(Network is unreachable)" in refusal


def test_credentials_and_a_server_that_answers_start(no_credentials, monkeypatch):
    _login(no_credentials)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: socket.socket())
    assert wandb_start_refusal(WandbConfig(mode="online")) is None


@pytest.mark.parametrize("mode", ["offline", "disabled"])
def test_offline_asks_nothing(no_credentials, mode):
    assert wandb_start_refusal(WandbConfig(mode=mode)) is None


def test_the_command_line_refusal_is_one_line_exit_2(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("WANDB_API")}
    env.update(NETRC=str(tmp_path / "netrc"), WANDB_MODE="online")
    env.pop("WANDB_BASE_URL", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "debug=fast", "logger=wandb",
         f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: logger=wandb")
    assert not (tmp_path / "run").exists()
