"""A run resumed from a checkpoint written before its first CSV row (logs/ holds only
hparams.yaml) is not told by Lightning that "previous log files … will be deleted": there are
none to lose (seen on the extension-arms recipe, 2026-12-02, a run stopped at step 1)."""

from __future__ import annotations

import warnings

from pytorch_lightning.loggers import CSVLogger

from lengen.loggers import continue_csv_log


def test_a_resume_before_the_first_row_warns_of_no_deletion(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "hparams.yaml").write_text("{}\n")
    logger = CSVLogger(save_dir=str(tmp_path), name="logs", version="")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        continue_csv_log(logger, step=1)
        logger.log_hyperparams({"seed": 0})
        logger.log_metrics({"train/loss": 1.0}, step=1)
        logger.save()
    assert not [w for w in caught if "exists and is not empty" in str(w.message)]
    assert (tmp_path / "logs" / "metrics.csv").read_text().splitlines()[1].startswith("1")
