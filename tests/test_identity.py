"""When two configurations are the same (lengen.identity): what a run trains (run ids, resume
and checkpoints) and what runs measure (aggregation), and where the two rules part."""

from __future__ import annotations

from helpers import compose_train
from lengen.identity import config_differences, measured_identity, run_id
from lengen.rundir import resolved_config


def resolved(*overrides: str) -> dict:
    return resolved_config(compose_train(*overrides))


def test_run_id_ignores_the_seed_and_resume_settings():
    assert run_id(compose_train()) == run_id(compose_train("seed=3", "resume=auto"))


def test_run_id_names_what_is_trained():
    assert run_id(compose_train()) != run_id(compose_train("pe=alibi"))


def test_a_resumed_run_may_change_how_it_runs_and_what_it_evaluates():
    changed = ("resume=true", "trainer.log_every_n_steps=7", "eval.decoding=greedy")
    assert config_differences(resolved(), resolved(*changed)) == []
    assert run_id(compose_train()) == run_id(compose_train(*changed))


def test_a_resumed_run_may_not_change_its_seed():
    # run_id leaves the seed out (a directory's name carries it); resuming does not
    assert config_differences(resolved(), resolved("seed=3")) == ["seed (0 -> 3)"]


def test_aggregation_splits_on_evaluation_settings_that_resuming_ignores():
    plain, greedy = resolved(), resolved("eval.decoding=greedy")
    assert measured_identity(plain) != measured_identity(greedy)


def test_aggregation_leaves_out_the_seed_the_lengths_and_null_keys():
    assert measured_identity(resolved()) == measured_identity(
        resolved("seed=3", "eval.lengths=[8]")
    )
    assert measured_identity({"seed": 0, "pe": {"name": "rope", "base": None}}) == {
        "pe.name": "rope"
    }


def test_init_from_counts_by_its_base_run_where_the_caller_finds_it():
    config = {"init_from": "runs/a"}
    assert measured_identity(config, base_hash=lambda path: "h")["init_from"] == "run:h"
    assert measured_identity(config, base_hash=lambda path: None)["init_from"] == "runs/a"


def test_a_resumed_run_may_change_its_data_workers():
    # the batches are a function of (seed, step) whatever builds them (docs/config.md)
    before, after = resolved("data=text"), resolved("data=text", "data.num_workers=2")
    assert config_differences(before, after) == []


def test_data_workers_still_name_sweep_directories():
    # existing sweeps' directory names hash data.num_workers: the id keeps its form
    assert run_id(compose_train("data=text")) != run_id(
        compose_train("data=text", "data.num_workers=2")
    )


# -- keys added after runs existed (IMPLIED_BEFORE) ----------------------------------------------
#: run ids of lengen 5ca1449, before pe.start_offset and data.task.positions existed: the
#: directory names of sweeps written then (results/, a running recipe's resume=auto)
IDS_BEFORE_THE_KEYS = {
    (): "ba903168",
    ("data=addition",): "0350a2d3",
    ("experiment=schedules_small", "data=passkey", "pe=rope"): "76767755",
}


def test_a_key_at_the_value_older_runs_implied_keeps_their_run_id():
    ids = {
        overrides: run_id(compose_train(*overrides, fast=False))
        for overrides in IDS_BEFORE_THE_KEYS
    }
    assert ids == IDS_BEFORE_THE_KEYS


def test_a_key_at_another_value_enters_the_run_id():
    plain = run_id(compose_train("data=addition", "pe=learned"))
    coupled = run_id(compose_train("data=addition", "pe=learned", "data.task.positions=coupled"))
    assert plain != coupled


def test_a_run_written_before_a_key_resumes_at_its_implied_value():
    current = resolved("data=addition")
    older = resolved("data=addition")
    del older["data"]["task"]["positions"], older["pe"]["start_offset"]
    assert config_differences(older, current) == []
    assert measured_identity(older) == measured_identity(current)
