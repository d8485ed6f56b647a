"""scripts/plot.py's input checks: ``pe-analysis --base`` must be a finite number > 1, refused
in one line before any figure (issue #51 item 9: PA12, ``--base nan`` drew figures of NaN and
exited 0)."""

from __future__ import annotations

import pytest

from helpers import load_script


@pytest.mark.parametrize("base", ["nan", "inf", "1", "-3", "ten"])
def test_a_base_that_is_no_sinusoid_base_is_refused(tmp_path, capsys, base):
    main = load_script("plot").main
    with pytest.raises(SystemExit) as stopped:
        main(["pe-analysis", "--base", base, "--out", str(tmp_path / "out")])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --base: must be a finite number > 1, got '{base}'" in err
    assert not (tmp_path / "out").exists()
