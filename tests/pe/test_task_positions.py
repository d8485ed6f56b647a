"""Task-supplied positions (``inputs["positions"]`` (T,): position coupling, Abacus) reach every
encoding that reads positions, in training, teacher-forced evaluation and cached decoding.

Every encoding yaml is built as a run builds it with ``data=addition_reversed
data.task.positions=coupled`` (whose positions are not 0 … T−1: they repeat, jump back and
start at 0 for BOS), so each property is checked on positions no index could give. Encodings
that read no positions are refused (``test_refusals``).
"""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf

from helpers import CONFIG_DIR, TINY, compose_train, pe_factory, sharpen, yaml_choices
from lengen.build import build
from lengen.model.kernels import attend
from lengen.pe import PositionalEncoding
from lengen.pe.alibi import ALiBi
from lengen.pe.learned import Learned
from lengen.pe.rope import RoPE

pytestmark = pytest.mark.usefixtures("single_thread")

COUPLED = ("data=addition_reversed", "data.task.positions=coupled")
#: training on lengths <= 5, evaluation at 9 (answers of 5 digits)
TRAIN_LEN, LENGTH = 5, 9


def built(pe: str, model: str = "decoder", *overrides: str):
    """(data, sharpened model) of a run with coupled task positions."""
    cfg = compose_train(
        f"pe={pe}",
        f"model={model}",
        *COUPLED,
        f"data.len={TRAIN_LEN}",
        f"eval.lengths=[{LENGTH}]",
        *TINY,
        *overrides,
    )
    data, model, _ = build(cfg)
    return data, sharpen(model)


def eval_batch(data, length: int = LENGTH, samples: int = 3) -> dict:
    inputs = data.held_out_inputs(length, samples, data.eval_seed)
    return next(iter(data.batches_of(inputs, samples)))


# READING and BLIND are computed at collection, in every xdist worker: from the yaml (as
# helpers.pe_factory reads it), not from a composed train config and a built model (~0.5 s each)
def reads_positions(pe: str) -> bool:
    """Whether the encoding's hooks read positions (others are refused with task positions),
    built as TINY's model builds it (its two layers: a schedule reads per layer)."""
    return pe_factory(pe)(d_model=16, n_heads=2, causal=True, n_layers=2).reads_positions


def takes_task_positions(pe: str) -> bool:
    """Whether the encoding's config takes task positions: those that draw their own training
    positions (Random Float Sampling, Randomized YaRN) refuse them in one line."""
    from lengen.pe.config import check_encoding

    node = OmegaConf.load(CONFIG_DIR / "pe" / f"{pe}.yaml")
    try:
        check_encoding(node, d_model=32, n_heads=4, train_positions=8, task_positions=True)
    except ValueError as error:
        return "data.task.positions" not in str(error)
    return True


READING = [pe for pe in yaml_choices("pe") if reads_positions(pe) and takes_task_positions(pe)]
BLIND = [pe for pe in yaml_choices("pe") if pe not in READING]


def test_the_coupled_batch_has_positions_no_index_gives():
    data, _ = built("rope")
    positions = eval_batch(data)["inputs"]["positions"]
    assert not bool((positions.diff() == 1).all())  # so no test below passes on an index


# -- every reading encoding uses the given positions ---------------------------------------
@pytest.mark.parametrize("pe", READING)
def test_logits_depend_on_the_given_positions(pe):
    data, model = built(pe)
    batch = eval_batch(data)
    tokens, positions = batch["inputs"]["tokens"], batch["inputs"]["positions"]
    with torch.no_grad():
        given = model(tokens, positions)
        other = model(tokens, positions.flip(0))  # the same values, elsewhere
    assert not torch.allclose(given, other, atol=1e-5)


@pytest.mark.parametrize("pe", READING)
def test_causal_prefix_invariant_with_task_positions(pe):
    data, model = built(pe)
    inputs = eval_batch(data)["inputs"]
    tokens, positions = inputs["tokens"], inputs["positions"]
    cut = tokens.shape[1] // 2 + 1
    with torch.no_grad():
        full = model(tokens, positions)
        prefix = model(tokens[:, :cut], positions[:cut])
    torch.testing.assert_close(prefix, full[:, :cut], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pe", READING)
def test_cached_decoding_equals_full_forward_with_task_positions(pe):
    data, model = built(pe)
    inputs = eval_batch(data)["inputs"]
    tokens, positions = inputs["tokens"], inputs["positions"]
    prompt = LENGTH + 2  # BOS x SEP
    assert_cache_equals_full_forward(model, tokens, positions, prompt)


def test_greedy_decoding_reads_the_task_positions():
    """Greedy answers equal a loop of full forward passes at the task's positions."""
    from lengen.evaluation.tasks import greedy_generate

    data, model = built("learned")
    batch = eval_batch(data)
    tokens, positions = batch["inputs"]["tokens"], batch["inputs"]["positions"]
    start = LENGTH + 1  # the SEP token predicts the first answer digit
    with torch.no_grad():
        generated = greedy_generate(model, batch["inputs"], batch["targets"])
        sequence = tokens[:, : start + 1]
        expected = []
        for step in range(generated.shape[1]):
            width = sequence.shape[1]
            token = model(sequence, positions[:width])[:, -1].argmax(-1)
            expected.append(token)
            sequence = torch.cat([sequence, token[:, None]], dim=1)
            del step
    assert torch.equal(generated, torch.stack(expected, dim=1))


# -- re-derivations of single encodings at given positions ---------------------------------
def test_learned_table_is_read_at_the_given_positions():
    data, model = built("learned")
    pe = model.stack.pe
    assert isinstance(pe, Learned)
    positions = eval_batch(data)["inputs"]["positions"]
    x = torch.zeros(1, len(positions), pe.d_model)
    rows = torch.cat([pe.table.weight, pe.extension])  # trained rows, then untrained ones
    expected = torch.stack([pe.scale * rows[int(p)] for p in positions])  # row by row
    torch.testing.assert_close(pe.embed(x, positions)[0], expected.to(x.dtype))


def test_learned_table_covers_the_training_offset():
    data, model = built("learned", "decoder", "pe.start_offset=30")
    largest_eval = data.max_position(LENGTH) - 1
    largest_train = data.max_position(TRAIN_LEN) - 1 + 30
    pe = model.stack.pe
    assert pe.rows == max(largest_eval, largest_train) + 1
    assert pe.trained_rows == largest_train + 1  # every row training reaches is a parameter


def test_rope_logits_at_given_positions_equal_a_rotation_by_their_difference():
    """q·k after RoPE at positions p_i, p_j = Re Σ_pairs q̂ conj(k̂) e^{i (p_i − p_j) θ}
    (RoFormer's interleaved pairs, θ_t = 10000^(−2t/d)), written with Python complex numbers."""
    data, model = built("rope")
    pe = model.stack.pe
    assert isinstance(pe, RoPE)
    positions = eval_batch(data)["inputs"]["positions"]
    generator = torch.Generator().manual_seed(0)
    dim, count = pe.head_dim, len(positions)
    q = torch.randn(1, 1, count, dim, generator=generator)
    k = torch.randn(1, 1, count, dim, generator=generator)
    rq, rk = pe.rotate(q, k, positions, positions)
    logits = (rq @ rk.transpose(-1, -2))[0, 0]
    theta = [10000.0 ** (-2 * t / dim) for t in range(dim // 2)]
    for i in (0, 3, count - 1):
        for j in (0, 2, count - 2):
            total = 0.0
            for t, frequency in enumerate(theta):
                qc = complex(q[0, 0, i, 2 * t], q[0, 0, i, 2 * t + 1])
                kc = complex(k[0, 0, j, 2 * t], k[0, 0, j, 2 * t + 1])
                angle = (int(positions[i]) - int(positions[j])) * frequency
                total += (qc * kc.conjugate() * complex(math.cos(angle), math.sin(angle))).real
            assert abs(float(logits[i, j]) - total) < 1e-4


def test_alibi_bias_of_given_positions():
    """ALiBi (causal): −m_h · |p_i − p_j| of the given positions, not of the indices."""
    data, model = built("alibi")
    pe = model.stack.pe
    assert isinstance(pe, ALiBi)
    positions = eval_batch(data)["inputs"]["positions"]
    slopes = [2.0 ** (-8 * (h + 1) / pe.n_heads) for h in range(pe.n_heads)]  # Press et al.
    bias = pe.attention_bias(positions, positions)
    expected = [
        [[-slopes[h] * abs(int(pi) - int(pj)) for pj in positions] for pi in positions]
        for h in range(pe.n_heads)
    ]
    torch.testing.assert_close(bias, torch.tensor(expected, dtype=torch.float32))


@pytest.mark.parametrize("pe", ["alibi", "t5", "kerple", "sandwich", "fire"])
def test_bias_attention_at_given_positions_equals_a_dense_reference(pe):
    """The kernel must not read a relative bias by index offset (positions not contiguous):
    attention equals softmax(q·k/√d + bias(p_i, p_j) + causal mask) · v."""
    data, model = built(pe)
    encoding = model.stack.pe
    positions = eval_batch(data)["inputs"]["positions"]
    generator = torch.Generator().manual_seed(1)
    count, heads, dim = len(positions), encoding.n_heads, encoding.head_dim
    q, k, v = (torch.randn(2, heads, count, dim, generator=generator) for _ in range(3))
    with torch.no_grad():
        out = attend(
            q, k, v, causal=True, pe=encoding, q_positions=positions, k_positions=positions
        )
        logits = q @ k.transpose(-1, -2) / math.sqrt(dim) + encoding.attention_bias(
            positions, positions
        )
        hidden = torch.ones(count, count, dtype=torch.bool).triu(1)
        expected = logits.masked_fill(hidden, float("-inf")).softmax(-1) @ v
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


# -- the random start offset ---------------------------------------------------------------
def offset_encoding(start_offset: int = 7) -> PositionalEncoding:
    _, model = built("learned", "decoder", f"pe.start_offset={start_offset}")
    return model.stack.pe


def test_offset_shifts_positions_from_one_by_one_k_in_training():
    pe = offset_encoding().train()
    positions = torch.tensor([0, 3, 2, 4, 3, 2, 4, 3, 2])
    torch.manual_seed(3)
    shifted = pe.shift_task_positions(positions)
    k = shifted - positions
    assert int(k[0]) == 0  # BOS keeps position 0
    assert len(set(k[1:].tolist())) == 1  # one k for every position >= 1


def test_offset_is_drawn_from_zero_to_start_offset():
    pe = offset_encoding(start_offset=3).train()
    positions = torch.tensor([0, 1])
    torch.manual_seed(0)
    drawn = {int(pe.shift_task_positions(positions)[1]) - 1 for _ in range(200)}
    assert drawn == {0, 1, 2, 3}


def test_no_offset_at_evaluation():
    pe = offset_encoding().eval()
    positions = torch.tensor([0, 3, 2, 4])
    assert torch.equal(pe.shift_task_positions(positions), positions)


def test_offset_is_shared_by_the_batch_rows_in_training():
    """Two equal rows of one training batch get equal logits (one k for the batch)."""
    data, model = built("learned", "decoder", "pe.start_offset=50")
    model.train()
    inputs = eval_batch(data, samples=1)["inputs"]
    tokens = inputs["tokens"].repeat(2, 1)
    torch.manual_seed(0)
    logits = model(tokens, inputs["positions"])
    torch.testing.assert_close(logits[0], logits[1])


def test_offset_changes_training_logits_but_not_evaluation_logits():
    data, model = built("learned", "decoder", "pe.start_offset=50")
    inputs = eval_batch(data, samples=1)["inputs"]
    with torch.no_grad():
        model.eval()
        evaluated = model(**inputs)
        model.train()
        torch.manual_seed(0)
        trained = model(**inputs)
        model.eval()
        again = model(**inputs)
    assert torch.equal(evaluated, again)
    assert not torch.allclose(evaluated, trained)


# -- refusals: one line naming the key -----------------------------------------------------
def refusal(*overrides: str) -> str:
    from lengen.checks import ConfigError

    cfg = compose_train(*overrides)
    with pytest.raises(ConfigError) as caught:
        build(cfg)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_randomized_positions_are_refused_with_task_positions():
    message = refusal("pe=rope", *COUPLED, "pe.randomized=true", "pe.max_position=64")
    assert "pe.randomized" in message


def test_start_offset_is_refused_without_task_positions():
    message = refusal("pe=learned", "data=addition_reversed", "pe.start_offset=5")
    assert "pe.start_offset" in message


@pytest.mark.parametrize("pe", BLIND)
def test_an_encoding_that_reads_no_positions_is_refused(pe):
    assert "data.task.positions" in refusal(f"pe={pe}", *COUPLED)


def test_encoder_decoder_is_refused_with_task_positions():
    message = refusal("pe=learned", "model=encoder_decoder", *COUPLED)
    assert "data.task.positions" in message and "model=encoder_decoder" in message


# -- Abacus: the table reads the task's positions, the base encoding the token index --------
ABACUS = ("data.task.positions=abacus",)


def abacus_built(base: str, *overrides: str):
    return built("abacus", "decoder", *ABACUS, f"pe.base={base}", *overrides)


@pytest.mark.parametrize("base", ["fire", "rope", "alibi", "t5"])
def test_abacus_attention_reads_token_indices(base):
    data, model = abacus_built(base)
    positions = eval_batch(data)["inputs"]["positions"]
    attention = model.stack.pe.attention_positions(positions)
    assert torch.equal(attention, torch.arange(len(positions)))


@pytest.mark.parametrize("base", ["fire", "rope", "alibi"])
def test_abacus_cached_decoding_equals_full_forward(base):
    data, model = abacus_built(base)
    inputs = eval_batch(data)["inputs"]
    tokens, positions = inputs["tokens"], inputs["positions"]
    prompt = LENGTH + 2
    assert_cache_equals_full_forward(model, tokens, positions, prompt)


@pytest.mark.parametrize("base", ["fire", "rope"])
def test_abacus_prefix_invariant(base):
    data, model = abacus_built(base)
    inputs = eval_batch(data)["inputs"]
    tokens, positions = inputs["tokens"], inputs["positions"]
    cut = tokens.shape[1] // 2
    with torch.no_grad():
        full = model(tokens, positions)
        prefix = model(tokens[:, :cut], positions[:cut])
    torch.testing.assert_close(prefix, full[:, :cut], rtol=1e-4, atol=1e-5)


def test_abacus_over_rope_differs_from_rope_at_the_task_positions():
    """The base rotates by index, so the logits are not RoPE's at the digit offsets."""
    data, model = abacus_built("rope")
    inputs = eval_batch(data)["inputs"]
    pe = model.stack.pe
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, pe.n_heads, len(inputs["positions"]), pe.head_dim, generator=generator)
    index = pe.attention_positions(inputs["positions"])
    by_index = pe.rotate(q, q, index, index)[0]
    by_task = pe.base_encoding.rotate(q, q, inputs["positions"], inputs["positions"])[0]
    assert torch.allclose(by_index, pe.base_encoding.rotate(q, q, index, index)[0])
    assert not torch.allclose(by_index, by_task)


def test_abacus_over_nope_is_the_learned_table_at_the_digit_offsets():
    data, abacus = abacus_built("nope")
    _, learned = built("learned", "decoder", *ABACUS)
    table = learned.stack.pe
    with torch.no_grad():
        abacus.stack.pe.table.weight.copy_(torch.cat([table.table.weight, table.extension]))
        parameters = dict(abacus.named_parameters())
        for name, parameter in learned.named_parameters():
            if not name.startswith("stack.pe."):
                parameters[name].copy_(parameter)
        inputs = eval_batch(data)["inputs"]
        torch.testing.assert_close(abacus(**inputs), learned(**inputs))


def test_abacus_refuses_an_unknown_base_naming_the_key():
    assert "pe.base" in refusal("pe=abacus", "pe.base=xpos_maybe", *COUPLED)


def test_abacus_refuses_a_shared_key_in_base_options():
    message = refusal("pe=abacus", "pe.base_options={randomized: true}")
    assert "pe.base_options.randomized" in message


def assert_cache_equals_full_forward(model, tokens, positions, prompt: int) -> None:
    """The prompt in one step, then a token at a time through the KV cache with the task's
    positions: the logits of one full forward pass."""
    with torch.no_grad():
        full = model(tokens, positions)
        cache = model.new_cache(tokens.shape[1], positions=positions)
        pieces = [model.decode(tokens[:, :prompt], cache)]
        pieces += [
            model.decode(tokens[:, t : t + 1], cache) for t in range(prompt, tokens.shape[1])
        ]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-4, atol=1e-5)
