"""Issue #51's hostile trial (../shared/trials/hostile-2026-11-28.md), the cases left after
round three (tests/test_faults_round3.py): memory limits the size check could not see
(E13b), ..."""

from __future__ import annotations

import resource

import pytest

from helpers import compose_train
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
