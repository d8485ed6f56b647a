"""Bad text input is refused in one line naming the key, before datasets prints anything."""

from __future__ import annotations

import pytest

from helpers import compose_train, run_train
from lengen.checks import ConfigError
from lengen.preflight import validate


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"", "is empty"), (b"caf\xe9 au lait\n", "is not UTF-8"), (b"text\x00\x01\x02", "NUL bytes")],
)
def test_unreadable_text_files_name_the_key(tmp_path, content, reason):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    cfg = compose_train("data=text", f"data.files.train={corpus}")
    with pytest.raises(ConfigError, match=rf"^data.files.train: .* {reason}"):
        validate(cfg)


def test_an_uncached_hub_dataset_offline_is_one_line(tmp_path):
    # tests run with HF_HUB_OFFLINE=1 (conftest): the hub cannot be reached
    result = run_train("data=text", "data.dataset=someone/no_such_dataset_xyz",
                       f"hydra.run.dir={tmp_path / 'run'}")  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith("error: data.dataset=someone/no_such_dataset")
    assert "Traceback" not in result.stderr
