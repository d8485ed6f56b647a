"""A configuration's settings label names only the keys it has: a model whose mixer is a plain
name was labelled ``model.mixer.mixer=null, model.mixer.negative_eigenvalues=null`` beside one
whose mixer has options (#49's flip-flop summary, 2026-12-02)."""

from __future__ import annotations

from pathlib import Path

from lengen.aggregate.load import RunRecord
from lengen.aggregate.stats import distinguishing

COMMON = {"data": {"name": "flip_flop"}, "model": {"name": "decoder"}, "pe": {"name": "nope"}}


def record(digest: str, mixer) -> RunRecord:
    config = {**COMMON, "model": {**COMMON["model"], "mixer": mixer}}
    return RunRecord(path=Path(digest), name=digest, config=config, config_hash=digest)


def labels() -> dict[str, str]:
    runs = [
        record("a", "gla"),
        record("b", {"mixer": "gated_deltanet", "negative_eigenvalues": True}),
    ]
    return distinguishing(runs, ["data.name", "model.name"])


def test_a_plain_mixer_is_labelled_by_its_name_alone():
    assert labels()["a"] == "model.mixer=gla"


def test_a_mixer_with_options_is_labelled_by_them_alone():
    assert (
        labels()["b"] == "model.mixer.mixer=gated_deltanet, model.mixer.negative_eigenvalues=true"
    )
