"""The recurrent mixers' training interventions on their state (``lengen.model.mixers.state``,
Buitrago Ruiz & Gu 2025; docs/models.md "Training the state"): each re-derived in float64 from
the mixer's own ``mix`` started from the state the paper defines; off by default, exactly as
before; only in training; truncation stops the gradient and nothing else; the refusals; and a
``debug=fast`` run end to end with each option."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from helpers import compose_train
from lengen.errors import ConfigError
from lengen.model.mixers.build import build_mixer
from lengen.model.mixers.config.base import mixer_label, plan_entry

# its runs are read for numbers and files, never figures: each is built, not rasterised
pytestmark = pytest.mark.usefixtures("single_thread", "unsaved_run_figures")

RECURRENT = ["gla", "deltanet", "gated_deltanet", "lstm"]
D_MODEL, HEADS, BATCH, LENGTH = 8, 2, 3, 7


def mixer(name: str, **options):
    torch.manual_seed(0)
    plan = plan_entry({"mixer": name, **options}, "model.mixer")
    built = build_mixer(plan, d_model=D_MODEL, n_heads=HEADS, dropout=0.0, causal=True,
                        kernel="auto")  # fmt: skip
    return built.double().train()


def sequence(seed: int = 1, length: int = LENGTH) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(BATCH, length, D_MODEL, generator=generator, dtype=torch.float64)


def from_state(module, x, memory):
    """The mixer's own recurrence over x from a given state: the re-derivation's reference."""
    start = None if memory is None else module.with_memory(memory)
    return module.mix(x, start, decoding=False)


# -- off by default: the mixer as before ---------------------------------------------------------
@pytest.mark.parametrize("name", RECURRENT)
def test_by_default_training_is_the_zero_state_full_pass_exactly(name):
    module = mixer(name)
    x = sequence()
    assert torch.equal(module(x), from_state(module, x, None)[0])


@pytest.mark.parametrize("name", RECURRENT)
def test_the_options_add_no_parameters_or_buffers(name):
    assert mixer(name).state_dict().keys() == mixer(name, state_init="passing").state_dict().keys()


@pytest.mark.parametrize("name", RECURRENT)
def test_a_mixer_at_its_defaults_is_named_as_before(name):
    assert mixer_label(plan_entry(name, "model.mixer")) == name


def test_a_run_id_without_the_options_is_unchanged():
    from lengen.identity import run_id

    cfg = compose_train("model.mixer=gla")
    assert "state_init" not in str(cfg.model)  # the options live in the mixer's yaml only
    assert run_id(cfg) == run_id(compose_train("model.mixer=gla"))


# -- Random Noise ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", RECURRENT)
def test_noise_starts_training_from_sigma_times_a_standard_normal_draw(name):
    module = mixer(name, state_init="noise", state_noise_std=0.3)
    x = sequence()
    torch.manual_seed(5)
    y = module(x)
    torch.manual_seed(5)
    drawn = tuple(0.3 * torch.randn(shape, dtype=torch.float64)
                  for shape in module.memory_shapes(BATCH))  # fmt: skip
    assert_close(y, from_state(module, x, drawn)[0])


@pytest.mark.parametrize("name", RECURRENT)
def test_noise_is_only_in_training_evaluation_starts_from_zero(name):
    module = mixer(name, state_init="noise", state_noise_std=0.3)
    x = sequence()
    module.eval()
    first, second = module(x), module(x)
    assert torch.equal(first, second)  # deterministic
    assert torch.equal(first, from_state(module, x, None)[0])
    module.train()
    assert not torch.allclose(module(x), first)


# -- State Passing --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", RECURRENT)
def test_passing_starts_each_batch_from_the_previous_batchs_final_states(name):
    module = mixer(name, state_init="passing")
    x1, x2 = sequence(1), sequence(2)
    y1 = module(x1)
    assert torch.equal(y1, from_state(module, x1, None)[0])  # the first batch: from zero
    final = module.memory_of(from_state(module, x1, None)[1])
    assert_close(module(x2), from_state(module, x2, final)[0])


@pytest.mark.parametrize("name", RECURRENT)
def test_a_passed_state_carries_no_gradient_into_the_previous_batch(name):
    module = mixer(name, state_init="passing")
    x1 = sequence(1).requires_grad_()
    module(x1)
    y2 = module(sequence(2))
    assert torch.autograd.grad(y2.sum(), x1, allow_unused=True) == (None,)


def test_passing_cycles_rows_when_the_batch_shrinks():
    module = mixer("gla", state_init="passing")
    module(sequence(1))
    final = module.interventions.passed[0]
    smaller = sequence(2)[:2]
    assert_close(module(smaller), from_state(module, smaller, (final[:2],))[0])


def test_evaluation_neither_uses_nor_records_a_passed_state():
    module = mixer("gla", state_init="passing")
    x = sequence(1)
    module.eval()
    module(x)
    assert module.interventions.passed is None
    module.train()
    module(x)
    module.eval()
    assert torch.equal(module(sequence(2)), from_state(module, sequence(2), None)[0])


# -- Fitted Noise ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", RECURRENT)
def test_fitted_noise_draws_per_head_with_the_last_batchs_mean_and_std(name):
    module = mixer(name, state_init="fitted_noise")
    x1, x2 = sequence(1), sequence(2)
    assert torch.equal(module(x1), from_state(module, x1, None)[0])  # nothing fitted yet
    finals = module.memory_of(from_state(module, x1, None)[1])
    torch.manual_seed(9)
    y2 = module(x2)
    torch.manual_seed(9)
    drawn = []
    for final in finals:  # (B, H, …): statistics over everything but the head
        heads = final.shape[1]
        per_head = final.transpose(0, 1).reshape(heads, -1)
        mean, std = per_head.mean(1), per_head.std(1)
        shape = (1, heads) + (1,) * (final.ndim - 2)
        noise = torch.randn(final.shape, dtype=torch.float64)
        drawn.append(mean.view(shape) + std.view(shape) * noise)
    assert_close(y2, from_state(module, x2, tuple(drawn))[0])


# -- Truncated BPTT -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", RECURRENT)
def test_truncation_leaves_the_forward_values_as_the_full_pass(name):
    module = mixer(name, tbptt=3)
    x = sequence()
    assert_close(module(x), from_state(module, x, None)[0])


@pytest.mark.parametrize("name", RECURRENT)
def test_truncation_stops_the_gradient_at_every_segment_border(name):
    module = mixer(name, tbptt=3)
    x = sequence().requires_grad_()
    y = module(x)  # segments [0, 3), [3, 6), [6, 7)
    (grad,) = torch.autograd.grad(y[:, 4].sum(), x)
    assert torch.count_nonzero(grad[:, :3]) == 0  # the segment before: no gradient
    assert torch.count_nonzero(grad[:, 3]) > 0  # its own segment: gradient


@pytest.mark.parametrize("name", RECURRENT)
def test_without_truncation_the_gradient_reaches_the_start(name):
    module = mixer(name)
    x = sequence().requires_grad_()
    (grad,) = torch.autograd.grad(module(x)[:, 4].sum(), x)
    assert torch.count_nonzero(grad[:, 0]) > 0


def test_truncation_composes_with_passing():
    module = mixer("gated_deltanet", state_init="passing", tbptt=2)
    x1, x2 = sequence(1), sequence(2)
    module(x1)
    final = module.memory_of(from_state(module, x1, None)[1])
    assert_close(module(x2), from_state(module, x2, final)[0])


# -- refusals, before torch ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "fragment"),
    [({"state_init": "noise"}, "model.mixer.state_noise_std: state_init=noise"),
     ({"state_noise_std": 0.1}, "model.mixer.state_noise_std=0.1 would change nothing"),
     ({"state_init": "warm"}, "model.mixer.state_init must be one of zero, noise, fitted_noise"),
     ({"tbptt": 0}, "model.mixer.tbptt must be"),
     ({"state_init": "noise", "state_noise_std": 0}, "model.mixer.state_noise_std must be")],
)  # fmt: skip
def test_bad_state_options_are_refused_in_one_line(options, fragment):
    with pytest.raises(ValueError) as refused:
        plan_entry({"mixer": "gla", **options}, "model.mixer")
    assert str(refused.value).startswith(fragment) and "\n" not in str(refused.value)


def test_attention_takes_no_state_options():
    with pytest.raises(ValueError, match="model.mixer.tbptt: Attention takes no options"):
        plan_entry({"mixer": "attention", "tbptt": 4}, "model.mixer")


def test_the_run_refuses_a_bad_option_before_writing(tmp_path):
    from lengen.preflight import validate

    with pytest.raises(ConfigError, match="model.mixers.0.state_noise_std"):
        validate(compose_train("model.mixers=[{mixer:gla,state_init:noise},attention]"))
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("init", ["passing", "fitted_noise"])
def test_a_state_kept_between_batches_is_refused_in_a_looped_stack(init):
    from lengen.preflight import validate

    with pytest.raises(ConfigError) as refused:
        validate(compose_train(f"model.mixers=[{{mixer:gla,state_init:{init}}}]", "model.loops=2",
                               "pe=nope"))  # fmt: skip
    message = str(refused.value)
    assert message.startswith(f"model.mixers: state_init={init} (gla)") and "\n" not in message


def test_noise_and_truncation_serve_a_looped_stack():
    from lengen.model.config import DecoderOnlyConfig

    DecoderOnlyConfig.from_keys({"mixer": {"mixer": "gla", "tbptt": 2}, "loops": 2}).check()


# -- end to end through Hydra keys ---------------------------------------------------------------
@pytest.mark.parametrize(
    "mixer_key",
    ["{mixer:gla,state_init:noise,state_noise_std:0.1}", "{mixer:deltanet,state_init:passing}",
     "{mixer:gated_deltanet,state_init:fitted_noise}", "{mixer:lstm,tbptt:4}"],
)  # fmt: skip
def test_a_debug_fast_run_trains_and_evaluates_with_each_option(tmp_path, mixer_key):
    from lengen.train import run

    cfg = compose_train(f"model.mixer={mixer_key}", "pe=nope", "eval.factors=[1,2]",
                        "logger=none")  # fmt: skip
    results = run(cfg, run_dir=tmp_path)
    assert [row["length"] for row in results["eval"]] == [cfg.data.len, 2 * cfg.data.len]
    assert all(row["loss"] is not None for row in results["eval"])


# -- what packs ask (lengen.packable): an entry with a drawn or kept initial state ---------------
@pytest.mark.parametrize(
    ("mixer_key", "mixers", "found"),
    [("gla", None, None), ({"mixer": "gla", "tbptt": 4}, None, None),
     ({"mixer": "gla", "state_init": "noise"}, None, ("model.mixer", "noise")),
     ("attention", ["gla", {"mixer": "lstm", "state_init": "passing"}],
      ("model.mixers.1", "passing"))],
)  # fmt: skip
def test_kept_state_entry_names_the_first_entry_with_a_state_init(mixer_key, mixers, found):
    from lengen.model.mixers.config.state import kept_state_entry

    assert kept_state_entry(mixer_key, mixers) == found
