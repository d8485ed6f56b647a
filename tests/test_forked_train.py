"""``helpers.run_train``'s forked train.py (tests/forked_train.py) tells what a process of its own
tells: the same exit status, stdout and stderr, for a refusal and for a run; and when a server
is started (``server_for``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT

FAST = ["debug=fast", "data.len=4", "eval.factors=[1,2]", "eval.diagnostics=false", "logger=csv"]


def forked(server, tmp_path, *arguments: str, timeout: int = 300) -> subprocess.CompletedProcess:
    out, err = tmp_path / "forked.out", tmp_path / "forked.err"
    answer = server.run(arguments, ROOT, timeout, out, err)
    return subprocess.CompletedProcess(arguments, answer["returncode"], out.read_text(),
                                       err.read_text())  # fmt: skip


def both_ways(server, tmp_path, *arguments: str) -> tuple:
    """(the case forked from ``server``, the case in a process of its own with its environment);
    the last argument, the run folder, suffixed _forked and _fresh."""
    fork = forked(server, tmp_path, *arguments[:-1], arguments[-1] + "_forked")
    fresh = subprocess.run([sys.executable, str(ROOT / "train.py"), *arguments[:-1],
                            arguments[-1] + "_fresh"], cwd=ROOT, env=server.env,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    return fork, fresh


def same_but_the_folder(text: str) -> str:
    text = re.sub(r"_(forked|fresh)\b", "", text)
    return re.sub(r"estimate: .*", "estimate: …", text)  # this machine's timings, updated by each


class StandIn:
    """A server that starts nothing (``forked_train.Server``'s place in the policy tests)."""

    def __init__(self, env):
        self.env, self.ready = env, True


@pytest.fixture
def no_servers(monkeypatch):
    import forked_train

    monkeypatch.setattr(forked_train, "Server", StandIn)
    monkeypatch.setattr(forked_train, "_SERVERS", {})
    monkeypatch.setattr(forked_train, "_SEEN", set())
    return forked_train


def test_an_environments_first_case_gets_no_server(no_servers):
    assert no_servers.server_for({"A": "1"}) is None


def test_an_environments_second_case_starts_its_server(no_servers):
    no_servers.server_for({"A": "1"})
    assert no_servers.server_for({"A": "1"}).env == {"A": "1"}


def test_no_more_than_max_servers_start(no_servers):
    envs = [{"A": str(i)} for i in range(no_servers.MAX_SERVERS + 1)]
    started = [[no_servers.server_for(env) for _ in range(2)][1] for env in envs]
    assert [s is not None for s in started] == [True] * no_servers.MAX_SERVERS + [False]


@pytest.fixture(scope="module")
def server():
    """A real server with this process's environment, OMP_NUM_THREADS=1 and a probe variable."""
    import forked_train

    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    started = forked_train.Server({**env, "OMP_NUM_THREADS": "1", "LENGEN_FORK_PROBE": "1"})
    yield started
    started.close()


def test_a_case_sees_the_servers_environment(server, tmp_path):
    probe = tmp_path / "probe.py"  # train.py's place: a script that prints what it was given
    probe.write_text("import os, sys; print(os.environ['LENGEN_FORK_PROBE'], sys.argv[1:])")
    out, err = tmp_path / "out", tmp_path / "err"
    answer = server.run(["x=1"], tmp_path, 60, out, err, script=str(probe))
    assert answer == {"returncode": 0} and out.read_text() == "1 ['x=1']\n", err.read_text()


def test_a_refusal_reads_the_same_forked_and_fresh(server, tmp_path):
    fork, fresh = both_ways(server, tmp_path, "pe=no_such_encoding", f"hydra.run.dir={tmp_path}/r")
    assert (fork.returncode, fork.stdout, fork.stderr) == (2, "", fresh.stderr)
    assert fresh.returncode == 2 and "pe=no_such_encoding" in fresh.stderr


def test_a_run_reads_the_same_forked_and_fresh(server, tmp_path):
    # stderr too: Lightning's "GPU available" lines stay filtered, as in a process of its own
    fork, fresh = both_ways(server, tmp_path, *FAST, "seed=5", f"hydra.run.dir={tmp_path}/run")
    assert fork.returncode == fresh.returncode == 0, fork.stderr[-2000:]
    assert same_but_the_folder(fork.stdout) == same_but_the_folder(fresh.stdout)
    assert same_but_the_folder(fork.stderr) == same_but_the_folder(fresh.stderr)
    assert "results:" in fork.stdout


def test_a_case_past_its_timeout_is_killed_and_the_server_serves_on(server, tmp_path):
    out, err = tmp_path / "out", tmp_path / "err"
    stuck = ["debug=fast", "trainer.max_steps=100000", f"hydra.run.dir={tmp_path}/run"]
    assert server.run(stuck, ROOT, 5, out, err) == {"timed_out": True}
    assert forked(server, tmp_path, "pe=no_such_encoding").returncode == 2
