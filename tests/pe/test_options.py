"""lengen.pe.config: every encoding's typed config and its checks, without torch.

The early layer refuses a bad command line with ``check_encoding`` before torch is imported; the
encodings build the same config (``self.cfg``), so there is one check to test. Glob-driven over
configs/pe: a new yaml is covered with no test edit.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import subprocess
import sys

import pytest
from hydra.utils import get_class
from omegaconf import OmegaConf

import lengen.pe
from helpers import CONFIG_DIR, yaml_choices
from lengen.pe.config import check_encoding, config_of
from lengen.pe.config.base import FACTS, grid_encodings

pytestmark = pytest.mark.usefixtures("single_thread")

#: a typical run: what lengen.build and the model pass to the encoding
RUN = dict(d_model=64, n_heads=4, causal=True, train_positions=16, max_positions=64)


def yaml_node(name: str) -> dict:
    """configs/pe/<name>.yaml as the plain dict the early layer passes."""
    return OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "pe" / f"{name}.yaml"), resolve=True)


def constructor_keys(node: dict) -> dict:
    """The yaml's keys that reach the constructor (Hydra's and lengen's own removed)."""
    return {
        key: value for key, value in node.items() if key not in ("_target_", "_partial_", "name")
    }


def refusal(call) -> ValueError:
    with pytest.raises(ValueError) as caught:
        call()
    return caught.value


# -- no torch ----------------------------------------------------------------------------------
def test_checking_every_yaml_imports_no_torch():
    script = f"""
import sys
from pathlib import Path
from omegaconf import OmegaConf
from lengen.pe.config import check_encoding
for path in sorted(Path({str(CONFIG_DIR / "pe")!r}).glob("*.yaml")):
    node = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    assert check_encoding(node, **{RUN!r}), path
print("torch" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# -- what is checked ---------------------------------------------------------------------------
#: the yamls of encodings shipped with lengen (a user's may sit beside them: LENGEN_CONFIG_DIR)
SHIPPED = [n for n in yaml_choices("pe") if yaml_node(n)["_target_"].startswith("lengen.pe.")]


@pytest.mark.parametrize("name", yaml_choices("pe"))
def test_every_yaml_passes_with_a_typical_run(name):
    assert check_encoding(yaml_node(name), **RUN) is True


#: the shipped encodings the package names itself (``lengen.pe.RoPE``, importable by Hydra)
EXPORTED = [n for n in SHIPPED if yaml_node(n)["_target_"].rpartition(".")[2] in lengen.pe.__all__]


@pytest.mark.parametrize("name", EXPORTED)
def test_a_shipped_encoding_is_found_by_its_package_name_too(name):
    node = yaml_node(name)
    node["_target_"] = "lengen.pe." + node["_target_"].rpartition(".")[2]  # lengen.pe.RoPE
    assert check_encoding(node, **RUN) is True


def test_a_key_the_encoding_does_not_take_is_named_with_the_allowed_ones():
    node = {**yaml_node("rope"), "bse": 500}
    with pytest.raises(ValueError, match=r"^pe\.bse: RoPE takes no such key; allowed: base, "):
        check_encoding(node, **RUN)


class OwnConstructor(lengen.pe.PositionalEncoding):
    """An encoding written before config classes: it takes its options as keywords."""

    def __init__(self, *, scale: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale


def test_an_encoding_with_a_constructor_of_its_own_is_left_to_it():
    node = {"_target_": f"{__name__}.OwnConstructor", "_partial_": True, "scale": -1}
    assert check_encoding(node, **RUN) is False
    assert OwnConstructor(**RUN, scale=2.0).scale == 2.0


# -- the same refusal as building the encoding -------------------------------------------------
#: (yaml, run keywords over RUN, keys over the yaml's, the message): every check the
#: constructors make of the user's input, at least one bad value each
BAD = [
    # shared by every encoding (PositionalEncoding)
    ("nope", {"n_heads": 5}, {}, r"^model\.d_model must be divisible by model\.n_heads, got 64 and 5$"),
    ("nope", {"axes": 4}, {}, r"^pe\.axes must be an integer 1, 2 or 3 \(sequence, grid, volume\); got 4$"),
    # the allowed list is every encoding with a grid form, whatever a new one adds to it
    ("t5", {"axes": 2}, {}, rf"^pe: T5RelativeBias has no form for positions on 2 axes .*; allowed: {re.escape(', '.join(grid_encodings()))}$"),
    ("rope", {"axes": 2}, {"randomized": True, "max_position": 64}, r"^pe\.randomized=true has no form for positions on 2 axes .*allowed: pe\.randomized=false$"),
    ("nope", {"n_layers": 0}, {}, r"^model\.n_layers must be a positive integer, got 0$"),
    ("cope", {"causal": False}, {}, r"^pe: CoPE is defined for causal attention only; allowed: model=decoder \(a bidirectional stack was requested\)$"),
    ("xpos", {"causal": False}, {}, r"^pe: XPos is defined for causal attention only; allowed: model=decoder"),
    ("nope", {}, {"randomized": "yes"}, r"^pe\.randomized must be true or false, got 'yes'$"),
    ("nope", {}, {"randomized_eval": 1}, r"^pe\.randomized_eval must be true or false, got 1$"),
    ("nope", {}, {"log_length_scale": "no"}, r"^pe\.log_length_scale must be true or false, got 'no'$"),
    ("rope", {}, {"randomized": True}, r"^pe\.max_position must be an integer >= 64 \(the longest sequence this run sees\) when pe\.randomized=true, got None$"),
    ("rope", {"max_positions": 257}, {"randomized": True, "max_position": 100}, r"^pe\.max_position must be an integer >= 257 .*got 100$"),
    ("rope", {}, {"randomized_relative": "distances"}, r"^pe\.randomized_relative: RoPE takes no such key; allowed: base, "),
    ("alibi", {}, {"randomized_relative": "offsets"}, r"^pe\.randomized_relative must be one of distances, positions; got 'offsets'$"),
    # rope
    ("rope", {}, {"base": 0.5}, r"^pe\.base must be > 1, got 0\.5$"),
    ("rope", {}, {"base": "far"}, r"^pe\.base must be > 1, got far$"),
    ("rope", {}, {"layout": "spiral"}, r"^pe\.layout must be one of interleaved, half; got 'spiral'$"),
    ("rope", {"d_model": 36}, {}, r"^pe=rope needs an even head dimension; model\.d_model / model\.n_heads = 36 / 4 = 9$"),
    ("rope", {}, {"fraction": 0}, r"^pe\.fraction must be a number in \(0, 1\], got 0$"),
    ("rope", {"d_model": 40, "axes": 2}, {}, r"^pe=rope: the rotated head dimension \(model\.d_model / model\.n_heads × pe\.fraction\) = 10 must be divisible by 2 × 2"),
    ("rope", {}, {"p": 1.5}, r"^pe\.p must be a number in \[0, 1\], got 1\.5$"),
    ("rope", {}, {"scaling": "zoom"}, r"^pe\.scaling must be one of none, pi, ntk, dynamic_ntk, yarn; got 'zoom'$"),
    ("rope", {}, {"scaling": "pi", "scaling_factor": 0.5}, r"^pe\.scaling_factor must be a number >= 1, got 0\.5$"),
    ("rope", {}, {"original_max_position": 0}, r"^pe\.original_max_position must be a positive integer, got 0$"),
    ("rope", {}, {"yarn_alpha": -1.0}, r"^pe\.yarn_alpha must be a number >= 0, got -1\.0$"),
    ("rope", {}, {"yarn_beta": "fast"}, r"^pe\.yarn_beta must be a number >= 0, got 'fast'$"),
    ("rope", {}, {"yarn_alpha": 2.0, "yarn_beta": 1.0}, r"^pe\.yarn_beta must be > pe\.yarn_alpha, got 1\.0 and 2\.0$"),
    ("rope", {}, {"yarn_ramp": "cubic"}, r"^pe\.yarn_ramp must be one of dimension, rotations; got 'cubic'$"),
    ("rope", {}, {"scaling": "yarn", "scaling_factor": 2.0, "yarn_alpha": 0.0}, r"^pe\.yarn_alpha must be > 0 with pe\.yarn_ramp=dimension .*got 0\.0$"),
    ("rope", {}, {"yarn_truncate": "yes"}, r"^pe\.yarn_truncate must be true or false, got 'yes'$"),
    ("rope", {"train_positions": None}, {"scaling": "yarn", "scaling_factor": 2.0}, r"^pe\.original_max_position must be set for pe\.scaling=yarn: the training length is unknown here$"),
    # learned
    ("learned", {}, {"policy": "wrap"}, r"^pe\.policy must be one of extend, error, interpolate; got 'wrap'$"),
    ("learned", {}, {"table": "diagonal"}, r"^pe\.table must be one of axial, full; got 'diagonal'$"),
    ("learned", {}, {"policy": "interpolate", "randomized": True, "max_position": 64}, r"^pe\.policy=interpolate resizes the trained table past training; .*allowed: extend, error$"),
    ("learned", {}, {"table_size": 0}, r"^pe\.table_size must be a positive integer, got 0$"),
    ("learned", {"max_positions": 257}, {"policy": "error", "table_size": 33}, r"^pe\.policy=error: evaluation needs 257 positions but the learned table holds 33; allowed: "),
    ("learned", {}, {"policy": "error"}, r"^pe\.policy=error: evaluation needs 64 positions but the learned table holds 16; "),
    ("learned", {"axes": 2}, {"policy": "error"}, r"^pe\.policy=error: evaluation needs 64 positions per axis but the learned table holds 16; "),
    ("learned", {"d_model": 30, "n_heads": 3, "axes": 2}, {}, r"^pe=learned: model\.d_model = 30 must be divisible by 2 × 2"),
    # alibi
    ("alibi", {}, {"grid_distance": "chebyshev"}, r"^pe\.grid_distance must be one of euclidean, manhattan; got 'chebyshev'$"),
    ("alibi", {"causal": False, "axes": 2}, {"bidirectional": "separate"}, r"^pe\.bidirectional=separate has no form on a grid \(no cell is before another\); allowed: symmetric$"),
    ("alibi", {}, {"bidirectional": "both"}, r"^pe\.bidirectional must be one of symmetric, asymmetric_offset, separate; got 'both'$"),
    ("alibi", {}, {"learnable_slopes": "yes"}, r"^pe\.learnable_slopes must be true or false, got 'yes'$"),
    # sinusoidal
    ("sinusoidal", {}, {"base": 1.0}, r"^pe\.base must be > 1, got 1\.0$"),
    ("sinusoidal", {}, {"layout": "half"}, r"^pe\.layout must be one of interleaved, concatenated; got 'half'$"),
    ("sinusoidal", {"d_model": 63, "n_heads": 3}, {}, r"^pe=sinusoidal needs an even model\.d_model, got 63$"),
    ("sinusoidal", {"d_model": 66, "n_heads": 3, "axes": 2}, {}, r"^pe=sinusoidal: model\.d_model = 66 must be divisible by 2 × 2"),
    # xpos
    ("xpos", {}, {"base": 1}, r"^pe\.base must be a number > 1, got 1$"),
    ("xpos", {}, {"scale_base": 0}, r"^pe\.scale_base must be a number > 0, or null for a default .*; got 0$"),
    ("xpos", {}, {"gamma": 0.0}, r"^pe\.gamma must be a number > 0, got 0\.0$"),
    ("xpos", {}, {"layout": "concatenated"}, r"^pe\.layout must be one of interleaved, half; got 'concatenated'$"),
    ("xpos", {"d_model": 36}, {}, r"^pe=xpos needs an even head dimension; model\.d_model / model\.n_heads = 36 / 4 = 9$"),
    # rope_mixed
    ("rope_mixed", {}, {"base": 1}, r"^pe\.base must be > 1, or null for the default, got 1$"),
    ("rope_mixed", {}, {"per_layer": "yes"}, r"^pe\.per_layer must be true or false, got 'yes'$"),
    ("rope_mixed", {"d_model": 36}, {}, r"^pe=rope_mixed needs an even head dimension; "),
    ("rope_mixed", {"d_model": 40, "axes": 2}, {}, r"^pe=rope_mixed: the head dimension \(model\.d_model / model\.n_heads\) = 10 must be divisible by 2 × 2"),
    # t5 (the last: the default max_distance, T5's 128, is checked too)
    ("t5", {}, {"num_buckets": 3}, r"^pe\.num_buckets must be an integer >= 4, got 3$"),
    ("t5", {}, {"max_distance": 16}, r"^pe\.max_distance must be an integer > pe\.num_buckets // 2 = 16 .*got 16$"),
    ("t5", {"train_positions": None}, {"num_buckets": 300}, r"^pe\.max_distance must be an integer > pe\.num_buckets // 2 = 150 .*got 128$"),
    # sandwich
    ("sandwich", {}, {"dim": 3}, r"^pe\.dim must be an even integer >= 2, got 3$"),
    ("sandwich", {}, {"base": 0.5}, r"^pe\.base must be > 1, got 0\.5$"),
    # kerple
    ("kerple", {}, {"variant": "cubic"}, r"^pe\.variant must be one of log, power; got 'cubic'$"),
    # fire
    ("fire", {}, {"mlp_width": 0}, r"^pe\.mlp_width must be a positive integer, got 0$"),
    ("fire", {}, {"init_c": 0}, r"^pe\.init_c must be a number > 0, got 0$"),
    ("fire", {}, {"init_threshold": -1}, r"^pe\.init_threshold must be a number > 0, or null for a default .*; got -1$"),
    # cope
    ("cope", {}, {"npos_max": 1}, r"^pe\.npos_max must be an integer >= 2, got 1$"),
]  # fmt: skip


def bad_id(case) -> str:
    name, run, keys, _ = case
    return "-".join([name, *(f"{k}={v}" for k, v in {**run, **keys}.items())])


@pytest.mark.parametrize(("name", "run", "keys", "message"), BAD, ids=[bad_id(c) for c in BAD])
def test_bad_input_is_refused_with_the_documented_message(name, run, keys, message):
    node = {**yaml_node(name), **keys}
    with pytest.raises(ValueError, match=message):
        check_encoding(node, **{**RUN, **run})


def test_building_an_encoding_refuses_as_its_config_does():
    # the constructor consumes the same config: one representative refusal through it
    node = yaml_node("rope")
    with pytest.raises(ValueError, match=r"^pe\.base must be > 1, got 0\.5$"):
        get_class(node["_target_"])(**RUN, **{**constructor_keys(node), "base": 0.5})


def option_rules(name: str) -> list[str]:
    """The options of configs/pe/<name>.yaml's config class that carry a rule."""
    cls = get_class(yaml_node(name)["_target_"]).Options
    return [f.name for f in dataclasses.fields(cls) if f.metadata.get("rule") is not None]


@pytest.mark.parametrize(
    ("name", "key"), [(name, key) for name in yaml_choices("pe") for key in option_rules(name)]
)
def test_every_option_with_a_rule_refuses_a_value_of_no_allowed_kind(name, key):
    node = {**yaml_node(name), key: "no-such-value"}
    with pytest.raises(ValueError, match=rf"^pe\.{key} "):
        check_encoding(node, **RUN)


# -- one source: the classes read their config -------------------------------------------------
@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_class_consumes_the_config_found_without_torch(name):
    target = yaml_node(name)["_target_"]
    assert get_class(target).Options is config_of(target)


@pytest.mark.parametrize("name", yaml_choices("pe"))
def test_class_facts_are_its_configs(name):
    cls = get_class(yaml_node(name)["_target_"])
    assert all(getattr(cls, fact) == getattr(cls.Options, fact) for fact in FACTS)


def test_a_class_declaring_a_fact_itself_is_checked_by_it():
    class Mine(lengen.pe.PositionalEncoding):
        causal_only = True

    with pytest.raises(ValueError, match=r"^pe: Mine is defined for causal attention only"):
        Mine(**{**RUN, "causal": False})


# -- the package's names, resolved lazily ------------------------------------------------------
def test_every_public_name_of_the_package_is_resolved_from_its_module():
    assert sorted(lengen.pe._SOURCE) == sorted(lengen.pe.__all__)
    for name in lengen.pe.__all__:
        module = importlib.import_module(lengen.pe._SOURCE[name])
        assert getattr(lengen.pe, name) is getattr(module, name)


def test_the_package_lists_its_public_names():
    assert set(lengen.pe.__all__) <= set(dir(lengen.pe))


def test_an_unknown_package_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Rope'"):
        lengen.pe.Rope  # noqa: B018
