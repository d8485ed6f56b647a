"""Every yaml of every config group composes and instantiates (glob-driven: a new PE, task or
recipe is covered without editing this file)."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from helpers import CONFIG_DIR, compose_train, yaml_choices
from lengen.build import build, instantiate_named, model_kind
from lengen.config import ConfigError, eval_lengths
from lengen.options import EvalConfig, OptimConfig, RunConfig, TrainerConfig
from lengen.pe.base import PositionalEncoding
from lengen.preflight import config_axes, validate
from lengen.schema import node_options

GROUPS = sorted(p.name for p in CONFIG_DIR.iterdir() if p.is_dir() and p.name != "hydra")
CHOICES = [(group, name) for group in GROUPS for name in yaml_choices(group)]


def is_grid_data(name: str) -> bool:
    """configs/data/<name>.yaml is a grid or volume task (positions on several axes)."""
    from omegaconf import OmegaConf

    data = OmegaConf.load(CONFIG_DIR / "data" / f"{name}.yaml")
    return config_axes(OmegaConf.create({"data": data})) > 1


GRID_DATA = [name for name in yaml_choices("data") if is_grid_data(name)]


def test_every_group_has_choices():
    assert {"pe", "model", "data", "trainer", "logger", "eval"} <= set(GROUPS)
    assert all(yaml_choices(group) for group in GROUPS)


def compose_choice(group: str, name: str, tmp_path) -> DictConfig:
    """The choice's config; text data reads a tiny local corpus instead of its own (which may
    need ../shared or the network), tokenised by bytes, cached under tmp_path, in windows of
    64 tokens (the GPU recipe's 512 make its forward pass slow on a CPU). Grid tasks compose
    with model=encoder, the one kind that runs them (the others: test_grid_data_refuses_…)."""
    if group == "data" and name in GRID_DATA:
        # volumes: the default pe=rope splits each head's rotary pairs evenly between 3 axes,
        # which the encoder's default head dimension (128 / 4 = 32) does not allow
        sizes = ["model.d_model=96"] if config_axes(compose_train(f"data={name}")) == 3 else []
        return compose_train(f"data={name}", "model=encoder", *sizes)
    cfg = compose_train(f"{group}={name}")
    if cfg.data.get("_target_") != "lengen.data.text.TextData":
        return cfg
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i} of a tiny corpus for config tests\n" for i in range(800)))
    return compose_train(
        f"{group}={name}",
        "data.dataset=null",
        f"data.files.train={corpus}",
        "data.files.validation=null",
        "data.tokenizer=byte",
        "data.len=64",
        "eval.lengths=[64,128]",  # within the tiny corpus's validation split
        f"data.cache_dir={tmp_path / 'cache'}",
    )


@pytest.mark.parametrize(("group", "name"), CHOICES, ids=[f"{g}={n}" for g, n in CHOICES])
def test_choice_composes_and_validates(group, name, tmp_path):
    cfg = compose_choice(group, name, tmp_path)
    validate(cfg)
    for key in ("pe", "model", "data", "trainer", "logger", "eval"):
        assert isinstance(cfg[key].name, str) and cfg[key].name, f"{key} yaml lacks name:"


@pytest.mark.parametrize(("group", "name"), CHOICES, ids=[f"{g}={n}" for g, n in CHOICES])
def test_choice_instantiates(group, name, tmp_path):
    cfg = compose_choice(group, name, tmp_path)
    data, model, lengths = build(cfg)
    assert model.kind == model_kind(cfg) == data.model_kind
    logits = model(**data.train_batch(0)["inputs"])
    assert torch.isfinite(logits).all()
    logger = instantiate_named(cfg.logger, save_dir=str(tmp_path))
    trainer = instantiate_named(cfg.trainer, logger=logger, default_root_dir=str(tmp_path))
    assert trainer.max_steps == cfg.trainer.max_steps
    if logger:
        logger.finalize("success")


def test_grid_tasks_are_found():
    assert {"grid_transpose", "grid_locate", "volume_locate", "shapes"} <= set(GRID_DATA)


@pytest.mark.parametrize("model", [m for m in yaml_choices("model") if m != "encoder"])
@pytest.mark.parametrize("name", GRID_DATA)
def test_grid_data_refuses_other_model_kinds_in_one_line_naming_model(name, model):
    with pytest.raises(ConfigError) as error:
        build(compose_train(f"data={name}", f"model={model}"), meta=True)
    message = str(error.value)
    assert message.startswith(f"model={model}: task {name}") and "\n" not in message
    assert message.endswith("allowed: model=encoder")


@pytest.mark.parametrize("name", yaml_choices("pe"))
def test_pe_yaml_is_a_partial_of_a_positional_encoding(name):
    cfg = compose_train(f"pe={name}")
    pe = instantiate_named(cfg.pe)(d_model=32, n_heads=4, causal=True, max_positions=64)
    assert isinstance(pe, PositionalEncoding)


@pytest.mark.parametrize("name", yaml_choices("pe"))
def test_pe_name_matches_file(name):
    assert compose_train(f"pe={name}").pe.name == name


def test_default_config_is_the_demo():
    cfg = compose_train(fast=False)
    assert (cfg.pe.name, cfg.model.name, cfg.data.name, cfg.logger.name) == (
        "rope",
        "decoder",
        "copy",
        "csv",
    )
    assert cfg.resume is False and cfg.eval.lengths is None


def test_eval_lengths_from_factors():
    cfg = compose_train("data.len=12", "eval.factors=[1,2,4.5]")
    assert eval_lengths(cfg) == [12, 24, 54]


def test_eval_lengths_explicit_list_used_exactly_sorted():
    cfg = compose_train("data.len=12", "eval.lengths=[40,7,12,40]", "eval.factors=[1,3]")
    assert eval_lengths(cfg) == [7, 12, 40]


def test_eval_factors_must_give_whole_lengths():
    cfg = compose_train("data.len=15", "eval.factors=[0.5]")
    with pytest.raises(ConfigError, match=r"^eval\.factors"):
        eval_lengths(cfg)


@pytest.mark.parametrize(
    "recipe",
    ["mcgill_small", "mcgill_paper", "chomsky_small", "schedules_small", "addition_positions",
     "flip_flop_small", "state_tracking_small", "indirect_indexing_small"],
)  # fmt: skip
def test_task_recipes_compare_encodings_by_generated_answers(recipe):
    # the cited papers compare encodings by exact match on generated answers
    assert compose_train(f"experiment={recipe}").eval.decoding == "greedy"


def test_chomsky_recipe_evaluates_at_evenly_spaced_lengths_up_to_8x():
    # scripts/chomsky_scores.py averages over them: the papers' score is a uniform average
    lengths = eval_lengths(compose_train("experiment=chomsky_small", fast=False))
    steps = {b - a for a, b in zip(lengths, lengths[1:], strict=False)}
    assert len(steps) == 1 and lengths[0] == 16 and lengths[-1] == 8 * 16


def test_chomsky_recipe_draws_randomized_positions_beyond_its_longest_sequence():
    cfg = compose_train("experiment=chomsky_small", "data=reverse", fast=False)
    assert cfg.pe.max_position >= 2 * max(eval_lengths(cfg))  # symbols + answer slots


def test_mcgill_paper_recipe_has_the_papers_table_2_settings():
    # Kazemnejad et al. 2023, Table 2 (App. D.2): T5-base-sized decoder, AdamW 3e-5, weight
    # decay 0.05, batch 64, 40K steps with 6% warm-up; L = 20, tested up to 2L
    cfg = compose_train("experiment=mcgill_paper", fast=False)
    model = (cfg.model.n_layers, cfg.model.d_model, cfg.model.n_heads, cfg.model.d_ff)
    assert model == (12, 768, 12, 3072) and cfg.model.dropout == 0.1
    assert (cfg.optim.lr, cfg.optim.weight_decay, cfg.data.batch_size) == (3e-5, 0.05, 64)
    assert cfg.trainer.max_steps == 40000 and cfg.optim.warmup_steps == 0.06 * 40000
    assert cfg.data.len == 20 and max(eval_lengths(cfg)) == 2 * cfg.data.len


# -- the yamls show their config classes' defaults (lengen.schema) -----------------------------
#: group -> the config class of its yamls, where one class serves the whole group
GROUP_OPTIONS = {"eval": EvalConfig, "trainer": TrainerConfig}
#: the groups whose yamls are one component's config each (data: tests/data/test_options.py)
TYPED_GROUPS = ("pe", "model", "eval", "trainer", "logger")


def composed_node(group: str, name: str) -> dict:
    """The group's node as ``group=name`` composes it (pe: over train.yaml's shared options),
    its options only (``lengen.schema.node_options``), tuples as lists."""
    node = OmegaConf.to_container(compose_train(f"{group}={name}", fast=False)[group])
    return {key: plain(value) for key, value in node_options(node).items()}


def plain(value):
    return list(value) if isinstance(value, tuple) else value


def options_class(group: str, name: str):
    """The config class of ``group=name``: the group's, or its ``_target_``'s ``Options`` (a
    class, or a factory function such as a logger's)."""
    if group in GROUP_OPTIONS:
        return GROUP_OPTIONS[group]
    return get_object(OmegaConf.load(CONFIG_DIR / group / f"{name}.yaml")._target_).Options


def is_base_yaml(group: str, name: str) -> bool:
    """A yaml that inherits none (a variant, e.g. trainer/cpu.yaml, names its base in a
    defaults list and sets only what differs)."""
    return "defaults" not in OmegaConf.load(CONFIG_DIR / group / f"{name}.yaml")


TYPED = [(group, name) for group in TYPED_GROUPS for name in yaml_choices(group)]


@pytest.mark.parametrize(("group", "name"), TYPED, ids=[f"{g}={n}" for g, n in TYPED])
def test_yaml_holds_every_option_of_its_config_class_and_no_other(group, name):
    assert sorted(composed_node(group, name)) == sorted(options_class(group, name).defaults())


BASES = [(group, name) for group, name in TYPED if is_base_yaml(group, name)]


@pytest.mark.parametrize(("group", "name"), BASES, ids=[f"{g}={n}" for g, n in BASES])
def test_yaml_shows_its_config_classes_defaults(group, name):
    defaults = {k: plain(v) for k, v in options_class(group, name).defaults().items()}
    shown = composed_node(group, name)
    assert shown == {key: defaults[key] for key in shown}


def test_train_yaml_shows_the_run_and_optimiser_defaults():
    cfg = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "train.yaml"))
    run = {key: plain(value) for key, value in RunConfig.defaults().items()}
    optim = {key: plain(value) for key, value in OptimConfig.defaults().items()}
    assert {key: cfg[key] for key in run} == run
    assert cfg["optim"] == optim
