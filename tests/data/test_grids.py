"""Grid and volume tasks (``lengen.data.tasks.grids``): every generator against a slow reference
in plain Python loops, the row-major positions of the layout, the shapes of inputs, answers and
batches at several sides, held-out disjointness, refusals, what TaskData reports for grids, and
short end-to-end runs scored at the training side and twice it."""

from __future__ import annotations

import itertools
import json
import random

import pytest
import torch

from helpers import compose_train, load_task, task_data, unsaved_figures
from lengen.build import build
from lengen.checks import ConfigError
from lengen.data.task_data import IGNORE, N_SPECIAL, SLOT, TaskData, held_out
from lengen.data.tasks import GridLocate, GridTranspose, Shapes, VolumeLocate
from lengen.data.tasks.grids import SHAPE_CLASSES
from lengen.evaluation.tasks import score_lengths
from lengen.lit import shard
from lengen.pe.config import grid_encodings
from lengen.preflight import check_memory

GRID_TASKS = ["grid_transpose", "grid_locate", "volume_locate", "shapes"]
SIDES = [2, 3, 5, 8]

pytestmark = pytest.mark.usefixtures("single_thread")


def test_grid_tasks_are_every_task_with_several_axes():
    """The glob-driven list: a new grid yaml must get a slow reference here."""
    from helpers import CONFIG_DIR, yaml_choices

    names = [
        n for n in yaml_choices("data") if "task" in (CONFIG_DIR / "data" / f"{n}.yaml").read_text()
    ]
    assert sorted(GRID_TASKS) == sorted(n for n in names if load_task(n).axes > 1)


def sides_for(task) -> list[int]:
    """SIDES that the task can be generated at (shapes: whole patches, boxes of 4 pixels)."""
    candidates = SIDES if task.length_step == 1 else [4, 6, 8, 12]
    return [s for s in candidates if s >= task.min_length and s % task.length_step == 0]


def encoder_data(name: str, **overrides) -> TaskData:
    return task_data(name, model_kind="encoder", **overrides)


# -- slow references: Python lists and loops -------------------------------------------------


def ref_coordinates(side: int, axes: int) -> list[tuple[int, ...]]:
    """Row-major coordinates of an L^A grid, axis 0 slowest, by nested loops."""
    return list(itertools.product(range(side), repeat=axes))


def ref_transpose(cells: list[int], side: int) -> list[int]:
    grid = [cells[row * side : (row + 1) * side] for row in range(side)]
    return [grid[column][row] for row in range(side) for column in range(side)]


def ref_locate(cells: list[int], side: int, axes: int, mark: int) -> list[int]:
    """Per cell the bitmask of the coordinates it shares with the mark (bit a: axis a)."""
    coordinates = ref_coordinates(side, axes)
    mark_at = coordinates[cells.index(mark)]
    answer = []
    for cell in coordinates:
        mask = 0
        for axis in range(axes):
            if cell[axis] == mark_at[axis]:
                mask += 2**axis
        answer.append(mask)
    return answer


def ref_draw(shape: str, top: int, left: int, height: int, width: int, side: int) -> list:
    """The image (side × side lists of 0/1) of one shape, pixel by pixel, as docs/tasks.md
    describes it."""
    thick = max(1, min(height, width) // 4)
    image = [[0] * side for _ in range(side)]
    for row in range(top, top + height):
        for column in range(left, left + width):
            u, v = row - top, column - left
            if shape == "rectangle":
                on = True
            elif shape == "frame":
                on = min(u, height - 1 - u, v, width - 1 - v) < thick
            elif shape == "cross":
                band_row = (height - thick) // 2 <= u < (height - thick) // 2 + thick
                band_column = (width - thick) // 2 <= v < (width - thick) // 2 + thick
                on = band_row or band_column
            elif shape == "ellipse":  # centre ((h−1)/2, (w−1)/2), semi-axes h/2, w/2
                dy = (u - (height - 1) / 2) / (height / 2)
                dx = (v - (width - 1) / 2) / (width / 2)
                on = dy * dy + dx * dx <= 1 + 1e-12
            elif shape == "triangle":  # lower left: column < (row + 1) · w / h
                on = v < (u + 1) * width / height
            else:  # stripes: bands of thick rows from the top and from the bottom
                on = (min(u, height - 1 - u) // thick) % 2 == 0
            image[row][column] = int(on)
    return image


def ref_patches(image: list, patch: int) -> list[int]:
    """Patch symbols, patches row-major, bit k of a symbol = pixel (k // P, k % P)."""
    grid = len(image) // patch
    symbols = []
    for patch_row in range(grid):
        for patch_column in range(grid):
            symbol = 0
            for k in range(patch * patch):
                pixel = image[patch_row * patch + k // patch][patch_column * patch + k % patch]
                symbol += pixel << k
            symbols.append(symbol)
    return symbols


def ref_box(image: list) -> tuple[int, int, int, int]:
    """(top, left, height, width) of the set pixels, by loops."""
    rows = [r for r, line in enumerate(image) if any(line)]
    columns = [c for c in range(len(image)) if any(line[c] for line in image)]
    return rows[0], columns[0], rows[-1] - rows[0] + 1, columns[-1] - columns[0] + 1


# -- generators against the references -------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("side", SIDES)
def test_grid_transpose_matches_reference(side, seed):
    task = GridTranspose(n_symbols=5)
    inputs = task.sample_inputs(side, 24, torch.Generator().manual_seed(seed))
    answers = task.solve(inputs)
    for row, answer in zip(inputs.tolist(), answers.tolist(), strict=True):
        assert answer == ref_transpose(row, side)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("task_class", [GridLocate, VolumeLocate])
def test_locate_matches_reference(task_class, side, seed):
    task = task_class(n_symbols=3)
    inputs = task.sample_inputs(side, 24, torch.Generator().manual_seed(seed))
    answers = task.solve(inputs) - task.answer_symbols[0]
    for row, answer in zip(inputs.tolist(), answers.tolist(), strict=True):
        assert row.count(task.mark) == 1  # exactly one marked cell
        assert answer == ref_locate(row, side, task.axes, task.mark)


def test_locate_answer_names_say_which_coordinates_are_shared():
    names = [GridLocate().vocab[s] for s in GridLocate().answer_symbols]
    assert names == ["none", "row", "column", "row+column"]
    volume = VolumeLocate()
    assert [volume.vocab[s] for s in volume.answer_symbols][-1] == "depth+row+column"


@pytest.mark.parametrize("patch", [1, 2, 3])
def test_shapes_solve_classifies_reference_drawings(patch):
    # images drawn by the slow reference, patched by loops: solve names the class drawn
    task, rng = Shapes(patch=patch), random.Random(patch)
    for side in (12, 18, 24):
        if side % patch:
            continue
        rows, classes = [], []
        for _ in range(40):
            height, width = rng.randint(4, side), rng.randint(4, side)
            top, left = rng.randint(0, side - height), rng.randint(0, side - width)
            index = rng.randrange(len(SHAPE_CLASSES))
            image = ref_draw(SHAPE_CLASSES[index], top, left, height, width, side)
            rows.append(ref_patches(image, patch))
            classes.append(index)
        answers = task.solve(torch.tensor(rows))[:, 0] - task.patch_symbols
        assert answers.tolist() == classes


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("side", [4, 8, 12, 16])
def test_shapes_generator_draws_one_reference_shape_in_its_box(side, seed):
    task = Shapes(patch=2)
    inputs = task.sample_inputs(side, 32, torch.Generator().manual_seed(seed))
    answers = task.solve(inputs)[:, 0] - task.patch_symbols
    images = task.to_images(inputs).long().tolist()
    for row, image, index in zip(inputs.tolist(), images, answers.tolist(), strict=True):
        assert ref_patches(image, 2) == row  # to_images inverts the patching
        top, left, height, width = ref_box(image)
        assert min(height, width) >= max(4, side // 4)  # boxes grow with the side
        assert image == ref_draw(SHAPE_CLASSES[index], top, left, height, width, side)


def test_shape_classes_differ_at_every_box_and_fill_it():
    # solve identifies a class by its drawing in the bounding box: no two classes may draw the
    # same image, and each must touch all four sides of its box
    for height, width in itertools.product(range(4, 13), repeat=2):
        drawings = [ref_draw(name, 0, 0, height, width, 12) for name in SHAPE_CLASSES]
        assert all(ref_box(d) == (0, 0, height, width) for d in drawings), (height, width)
        assert len({str(d) for d in drawings}) == len(SHAPE_CLASSES), (height, width)


def test_shapes_draws_every_class_about_equally():
    task = Shapes(patch=2)
    inputs = task.sample_inputs(16, 3000, torch.Generator().manual_seed(0))
    counts = torch.bincount(task.solve(inputs)[:, 0] - task.patch_symbols, minlength=6)
    assert counts.min() > 0.8 * 3000 / 6 and counts.max() < 1.2 * 3000 / 6


# -- layout: shapes, positions ---------------------------------------------------------------


@pytest.mark.parametrize("name", GRID_TASKS)
def test_inputs_answers_and_batches_have_the_documented_shapes(name):
    task = load_task(name)
    for side in sides_for(task):
        tokens_per_axis = side // task.length_step
        cells = tokens_per_axis**task.axes
        inputs = task.sample_inputs(side, 6, torch.Generator().manual_seed(side))
        answers = task.solve(inputs)
        assert inputs.shape == (6, cells) == (6, task.input_length(side))
        assert answers.shape == (6, cells if task.dense else 1)
        batch = task.format(inputs, answers, "encoder")
        readout = 0 if task.dense else 1
        assert batch["inputs"]["tokens"].shape == (6, cells + readout)
        assert batch["inputs"]["positions"].shape == (cells + readout, task.axes)
        assert batch["targets"].shape == (6, cells + readout)
        assert task.grid_shape(side) == (tokens_per_axis,) * task.axes


@pytest.mark.parametrize("name", GRID_TASKS)
def test_positions_are_row_major_coordinates_and_the_slot_has_none(name):
    task = load_task(name)
    side = sides_for(task)[-1]
    inputs = task.sample_inputs(side, 2, torch.Generator().manual_seed(0))
    positions = task.format(inputs, task.solve(inputs), "encoder")["inputs"]["positions"]
    grid = side // task.length_step
    expected = [list(c) for c in ref_coordinates(grid, task.axes)]
    if not task.dense:
        expected.append([-1] * task.axes)  # the readout slot: no grid position
    assert positions.tolist() == expected
    assert positions.dtype == torch.long


def test_dense_tasks_score_every_cell_and_shapes_only_its_slot():
    locate = GridLocate()
    inputs = locate.sample_inputs(4, 3, torch.Generator().manual_seed(0))
    batch = locate.format(inputs, locate.solve(inputs), "encoder")
    torch.testing.assert_close(batch["inputs"]["tokens"], inputs + N_SPECIAL)
    torch.testing.assert_close(batch["targets"], locate.solve(inputs) + N_SPECIAL)
    shapes = Shapes(patch=2)
    inputs = shapes.sample_inputs(8, 3, torch.Generator().manual_seed(0))
    batch = shapes.format(inputs, shapes.solve(inputs), "encoder")
    assert (batch["inputs"]["tokens"][:, -1] == SLOT).all()
    assert (batch["targets"][:, :-1] == IGNORE).all()
    torch.testing.assert_close(batch["targets"][:, -1:], shapes.solve(inputs) + N_SPECIAL)


# -- TaskData for grids ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "side", "extent", "tokens"),
    [
        ("grid_transpose", 8, 8, 64),
        ("grid_locate", 8, 8, 64),
        ("volume_locate", 4, 4, 64),
        ("shapes", 16, 8, 65),  # 8×8 patches of 2 pixels + the readout slot
    ],
)
def test_task_data_reports_axes_extent_per_axis_and_tokens(name, side, extent, tokens):
    data = encoder_data(name, len=side)
    assert data.axes == load_task(name).axes
    assert data.max_position(side) == extent
    assert data.sequence_length(side) == tokens
    assert data.max_position(2 * side) == 2 * extent  # the side scales, not the token count
    assert data.grid_shape(side) == [extent] * data.axes
    batch = data.train_batch(0)
    assert batch["inputs"]["positions"].shape[1] == data.axes


def test_sequence_tasks_report_one_axis_and_tokens_equal_positions():
    data = task_data("copy")
    assert data.axes == 1 and data.grid_shape(16) is None
    assert data.sequence_length(16) == data.max_position(16) == 2 * 16 + 1


@pytest.mark.parametrize("name", GRID_TASKS)
def test_training_and_evaluation_grids_are_disjoint(name):
    data = encoder_data(name, curriculum="fixed")
    side = data.train_len
    train = torch.cat([data.train_inputs(side, 256, torch.Generator().manual_seed(s))
                       for s in range(4)])  # fmt: skip
    evaluation = data.held_out_inputs(side, 128, seed=1234)
    assert not held_out(train).any() and held_out(evaluation).all()
    seen = {tuple(row) for row in train.tolist()}
    assert not seen & {tuple(row) for row in evaluation.tolist()}


@pytest.mark.parametrize("name", GRID_TASKS)
def test_training_side_holds_enough_distinct_held_out_instances(name):
    # eval.samples is 512 by default: the training side must offer that many held-out grids
    data = encoder_data(name)
    inputs = data.held_out_inputs(data.train_len, 512, seed=1234)
    assert torch.unique(inputs, dim=0).shape[0] == 512


@pytest.mark.parametrize("name", GRID_TASKS)
@pytest.mark.parametrize("kind", ["decoder", "encoder_decoder"])
def test_grid_tasks_refuse_other_model_kinds_in_one_line_naming_model(name, kind):
    with pytest.raises(ValueError, match=rf"^model={kind}: task {name} has positions") as error:
        task_data(name, model_kind=kind)
    assert "\n" not in str(error.value) and "allowed: model=encoder" in str(error.value)


def test_grid_yaml_with_the_default_model_is_refused_before_anything_runs():
    with pytest.raises(ConfigError, match=r"^model=decoder: task grid_locate"):
        build(compose_train("data=grid_locate"), meta=True)


@pytest.mark.parametrize(("override", "key"), [("len", "data.len"), ("min_len", "data.min_len")])
def test_shapes_length_not_a_multiple_of_the_patch_is_named(override, key):
    with pytest.raises(ValueError, match=rf"^{key} must be a multiple of data\.task\.patch=2"):
        encoder_data("shapes", **{override: 15})


def test_shapes_eval_length_not_a_multiple_of_the_patch_is_named():
    with pytest.raises(ValueError, match=r"^eval\.lengths must be a multiple of data\.task"):
        encoder_data("shapes").check_eval_lengths([16, 33])


def test_shapes_patch_beyond_three_is_named():
    with pytest.raises(ValueError, match=r"^data\.task\.patch must be 1, 2 or 3"):
        Shapes(patch=4)


def test_shapes_training_sides_are_whole_patches_across_the_curriculum():
    data = encoder_data("shapes", len=16, min_len=4)
    drawn = {data.train_length(step) for step in range(200)}
    assert drawn == {4, 6, 8, 10, 12, 14, 16}


def test_data_card_of_a_grid_task_gives_sides_grid_shapes_and_tokens():
    card = encoder_data("shapes").card([16, 32])
    assert card["axes"] == 2 and card["length"].startswith("side of the image in pixels")
    assert card["grid_shape"]["32"] == [16, 16] and card["sequence_length"]["32"] == 257
    assert card["max_position"]["32"] == 16
    json.dumps(card)


# -- the run's wiring: PE axes, memory check, sharding ----------------------------------------


def test_build_gives_the_encoding_axes_and_per_axis_extents():
    cfg = compose_train("data=grid_locate", "model=encoder", "pe=nope", "eval.factors=[1,2]")
    data, model, lengths = build(cfg, meta=True)
    pe = model.stack.pe
    assert (pe.axes, pe.train_positions, pe.max_positions) == (2, 8, 16)
    _, model, _ = build(compose_train("pe=nope"), meta=True)
    assert model.stack.pe.axes == 1  # sequences: built exactly as before


def test_memory_check_counts_a_grid_side_as_side_squared_tokens(monkeypatch):
    import lengen.preflight.resources as resources  # check_memory reads it from its own room

    monkeypatch.setattr(resources, "available_memory", lambda cfg: (2**30, "CPU"))
    common = ("model=encoder", "data.len=30", "data.batch_size=64")
    check_memory(compose_train("data=copy", *common))  # 30 tokens an instance: fits
    with pytest.raises(ConfigError, match=r"^data\.len=30: .* 30\^2 = 900 positions"):
        check_memory(compose_train("data=grid_locate", *common))


def test_shard_splits_rows_but_keeps_the_shared_positions():
    batch = encoder_data("grid_locate").train_batch(0)
    part = shard(batch, rank=1, world_size=2)
    torch.testing.assert_close(part["inputs"]["tokens"], batch["inputs"]["tokens"][1::2])
    torch.testing.assert_close(part["inputs"]["positions"], batch["inputs"]["positions"])


# -- end to end: a tiny encoder trains a few steps, scored at 1× and 2× the side ----------------


TINY = ("model.d_model=24", "model.n_layers=1", "model.n_heads=2", "model.d_ff=32", "logger=none")


#: every encoding with an N-d form, and the learned table interpolated past training
GRID_PES = [(pe,) for pe in grid_encodings()] + [("learned", "pe.policy=interpolate")]
#: what an encoding meets in a grid task is its number of axes (2 or 3): every encoding on a
#: task of each; the other tasks (a sparse answer, two cells a length step) with two encodings
GRID_RUNS = [(name, pe) for name in ("grid_locate", "volume_locate") for pe in GRID_PES] + [
    (name, pe)
    for name in GRID_TASKS
    if name not in ("grid_locate", "volume_locate")
    for pe in [("rope_mixed",), ("learned", "pe.policy=interpolate")]
]


def test_the_grid_runs_cover_every_task_and_every_encoding_at_two_and_three_axes():
    assert {name for name, _ in GRID_RUNS} == set(GRID_TASKS)
    for axes in (2, 3):
        tasks = [n for n in GRID_TASKS if load_task(n).axes == axes]
        assert any(all((n, pe) in GRID_RUNS for pe in GRID_PES) for n in tasks), axes


@pytest.mark.parametrize(
    ("name", "pe"), GRID_RUNS, ids=lambda x: "-".join(x) if isinstance(x, tuple) else x
)
def test_grid_task_trains_and_is_scored_at_one_and_two_times_the_side(name, pe, tmp_path):
    side = {"volume_locate": 2, "shapes": 8}.get(name, 4)
    cfg = compose_train(
        f"data={name}", "model=encoder", f"pe={pe[0]}", *pe[1:], *TINY, f"data.len={side}",
        f"data.min_len={side}", "eval.factors=[1,2]",
    )  # fmt: skip
    from lengen.train import run

    with unsaved_figures():  # its rows, not its figures: tests/plots draw a grid run's figures
        results = run(cfg, run_dir=tmp_path)
    rows = results["eval"]
    grid = side // load_task(name).length_step
    assert [row["length"] for row in rows] == [side, 2 * side]
    assert [row["max_position"] for row in rows] == [grid, 2 * grid]
    axes = load_task(name).axes
    assert [row["grid_shape"] for row in rows] == [[grid] * axes, [2 * grid] * axes]
    for row in rows:
        assert 0.0 <= row["accuracy"] <= 1.0 and row["n_examples"] >= 1
        assert row["sequence_length"] == grid**axes * (1 if row["length"] == side else 2**axes) + (
            0 if load_task(name).dense else 1
        )


@pytest.mark.parametrize("name", GRID_TASKS)
def test_greedy_rows_of_grid_tasks_equal_teacher_forced_ones(name):
    side = {"volume_locate": 2, "shapes": 8}.get(name, 4)
    cfg = compose_train(f"data={name}", "model=encoder", "pe=nope", *TINY, f"data.len={side}")
    data, model, _ = build(cfg)
    forced, greedy = (
        score_lengths(model, data, [side, 2 * side], samples=8, protocol=p, progress=False)
        for p in ("teacher_forced", "greedy")
    )
    for a, b in zip(forced, greedy, strict=True):
        assert (a["accuracy"], a["exact_match"]) == (b["accuracy"], b["exact_match"])
        assert b["sequence_length"] == data.sequence_length(b["length"])


def test_eval_py_extends_a_finished_grid_run_with_rope_scaling_per_axis(tmp_path):
    """pe.scaling through eval.py on a finished grid run: results.<tag>.json beside the untouched
    original, the scaling recorded, every row re-scored at the same sides."""
    from lengen.reeval import evaluate_run
    from lengen.train import run

    cfg = compose_train(
        "data=grid_locate", "model=encoder", "pe=rope", *TINY, "data.len=4", "eval.factors=[1,2]"
    )
    with unsaved_figures():  # its rows, not its figures (tests/plots draw a grid run's)
        run(cfg, run_dir=tmp_path)
        before = (tmp_path / "results.json").read_bytes()
        arguments = [f"run={tmp_path}", "pe.scaling=ntk", "pe.scaling_factor=2", "tag=ntk"]
        scaled = evaluate_run(arguments)
    assert (tmp_path / "results.json").read_bytes() == before
    assert json.loads((tmp_path / "results.ntk.json").read_text()) == scaled
    assert scaled["pe_info"]["scaling"] == "ntk"
    original = json.loads(before)
    assert [r["length"] for r in scaled["eval"]] == [r["length"] for r in original["eval"]]
    assert [r["grid_shape"] for r in scaled["eval"]] == [[4, 4], [8, 8]]
    assert scaled["eval"][1]["loss"] != original["eval"][1]["loss"]  # other frequencies
