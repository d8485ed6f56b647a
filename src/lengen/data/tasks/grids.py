"""Tasks on grids and volumes: transpose, locate (2-D and 3-D) and shape classification.

The length of a grid task is its **side**: an instance of length L is an L×L grid (L×L×L for
``volume_locate``; for ``shapes`` an image of L×L pixels cut into patches), so ``eval.factors``
scale the side. Inputs are the cells flattened row-major (B, L^A); the model sees them with their
grid coordinates (``lengen.data.layout.format_grid``) and reads the answer at every cell (dense
tasks) or at one readout slot (``shapes``). Grid tasks run on ``model=encoder`` only: answers
are read bidirectionally, as in ViT, and a decoder's token order would impose a 1-D causal order
on the grid.

Answers never need symbols that training did not show: ``grid_locate`` answers per cell whether
it shares the mark's row, column, both or neither (the mark's coordinates are read off the
answer grid), rather than the coordinates as numbers, which at a larger side would need digits
or symbols never trained.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from lengen.data.layout import format_grid, grid_coordinates
from lengen.data.tasks.base import (
    AlphabetConfig,
    Task,
    TaskConfig,
    uniform_ints,
)
from lengen.lazy import torch
from lengen.schema import integer, integer_in, option

if TYPE_CHECKING:
    from torch import Tensor

#: the name of each axis of a grid (2) or volume (3), axis 0 first
AXIS_NAMES = {2: ("row", "column"), 3: ("depth", "row", "column")}


def grid_side(cells: int, axes: int) -> int:
    """The side L of a grid of ``cells`` = L ** axes cells (exact integer root)."""
    side = round(cells ** (1 / axes))
    side += (side + 1) ** axes <= cells  # float roots may land one below or above
    side -= side**axes > cells
    if side**axes != cells:
        raise ValueError(f"{cells} cells do not form a grid on {axes} axes")
    return side


class GridTask(Task):
    """A task on an L^A grid of cells; the answer is dense (one symbol per cell) unless
    ``dense`` is False (read at readout slots after the cells)."""

    axes = 2
    model_kinds = ("encoder",)
    min_length = 2
    dense = True
    length_unit = "side of the grid in cells (an instance has side ** axes cells)"

    def input_length(self, length: int) -> int:
        return length**self.axes

    def answer_length(self, length: int) -> int:
        return self.input_length(length)

    def grid_shape(self, length: int) -> tuple[int, ...]:
        return (length,) * self.axes

    def extent(self, length: int, model_kind: str) -> tuple[int, int]:
        cells = self.input_length(length)
        return max(self.grid_shape(length)), cells + (
            0 if self.dense else self.answer_length(length)
        )

    def format(self, inputs: Tensor, answers: Tensor, model_kind: str) -> dict:
        if model_kind not in self.model_kinds:
            raise ValueError(
                f"model={model_kind}: task {self.name} is a grid task; allowed: model=encoder"
            )
        side = grid_side(inputs.shape[1], self.axes)
        return format_grid(inputs, answers, (side,) * self.axes, dense=self.dense)


#: the data node of an L×L grid task's yaml, where it differs from TaskData's defaults: a
#: side of 8 (64 cells); ``min_len`` defaults to the shortest instance's side, 2
GRID_DATA = {"len": 8}


@dataclasses.dataclass(frozen=True)
class GridTransposeConfig(AlphabetConfig):
    data_defaults = GRID_DATA
    n_symbols: int = AlphabetConfig.with_default("n_symbols", 8)


class GridTranspose(GridTask):
    """Transpose an L×L grid of symbols: the answer at cell (i, j) is the input at (j, i).

    Dense prediction: every cell is scored, and exact match asks for the whole grid.

    Options (``GridTransposeConfig``): ``n_symbols``, the alphabet of the cells
    (``data.task.n_symbols``, at least 2).
    """

    Options = GridTransposeConfig
    name = "grid_transpose"
    source = "lengen (issue 15): the 2-D analogue of reverse, a permutation of the cells"
    answer_format = "the grid transposed: at cell (i, j) the input symbol of cell (j, i)"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        n_symbols = self.cfg.n_symbols
        self.vocab = [str(i) for i in range(n_symbols)]
        self.answer_symbols = list(range(n_symbols))

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        cells = self.input_length(length)
        return torch.randint(0, self.n_symbols, (batch_size, cells), generator=generator)

    def solve(self, inputs: Tensor) -> Tensor:
        side = grid_side(inputs.shape[1], 2)
        grid = inputs.reshape(-1, side, side)  # (B, L, L)
        return grid.transpose(1, 2).reshape(inputs.shape)  # (B, L²)


@dataclasses.dataclass(frozen=True)
class LocateConfig(TaskConfig):
    data_defaults = GRID_DATA
    #: background symbols (distractors); the mark is one more
    n_symbols: int = option(4, integer())


@dataclasses.dataclass(frozen=True)
class VolumeLocateConfig(LocateConfig):
    data_defaults = {"len": 4}  # a side of 4: 64 cells, as a grid's 8


class LocateTask(GridTask):
    """A grid of random background symbols with exactly one MARK cell; the answer at every
    cell says which of its coordinates it shares with the mark (a bitmask over the axes).

    Options (``LocateConfig``): ``n_symbols``, the background symbols
    (``data.task.n_symbols``, at least 1).
    """

    Options = LocateConfig
    answer_format = "per cell: which coordinates it shares with the mark (bitmask over the axes)"

    def __init__(self, **options) -> None:
        super().__init__(**options)
        n_symbols = self.cfg.n_symbols
        self.background = n_symbols
        self.mark = n_symbols
        names = AXIS_NAMES[self.axes]
        shared = [
            "+".join(name for bit, name in enumerate(names) if mask >> bit & 1) or "none"
            for mask in range(2**self.axes)
        ]
        self.vocab = [str(i) for i in range(n_symbols)] + ["MARK"] + shared
        self.answer_symbols = list(range(n_symbols + 1, n_symbols + 1 + 2**self.axes))

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        cells = self.input_length(length)
        grid = torch.randint(0, self.background, (batch_size, cells), generator=generator)
        mark_at = torch.randint(0, cells, (batch_size, 1), generator=generator)
        return grid.scatter_(1, mark_at, self.mark)  # (B, L^A)

    def solve(self, inputs: Tensor) -> Tensor:
        side = grid_side(inputs.shape[1], self.axes)
        coordinates = grid_coordinates((side,) * self.axes)  # (L^A, A)
        mark_at = (inputs == self.mark).long().argmax(dim=1)  # (B,)
        shares = coordinates[None] == coordinates[mark_at][:, None]  # (B, L^A, A)
        mask = (shares.long() << torch.arange(self.axes)).sum(-1)  # (B, L^A): bit a = axis a
        return self.answer_symbols[0] + mask


class GridLocate(LocateTask):
    """Locate the one marked cell of an L×L grid: the answer at every cell is whether it shares
    the mark's row, its column, both (the mark itself) or neither.

    The row and column of the mark are read off the answer, and its 4 symbols do not grow
    with the grid. Exact match = every cell right.
    """

    name = "grid_locate"
    source = "lengen (issue 15): the 2-D analogue of retrieval, answered densely"
    axes = 2


class VolumeLocate(LocateTask):
    """Locate the one marked cell of an L×L×L volume: the answer at every cell is which of its
    3 coordinates (depth, row, column) it shares with the mark, a bitmask of 8 symbols."""

    Options = VolumeLocateConfig
    name = "volume_locate"
    source = "lengen (issue 15): grid_locate on 3 axes"
    axes = 3


#: the shape classes of ``Shapes``, in the order of their answer symbols
SHAPE_CLASSES = ("rectangle", "frame", "cross", "ellipse", "triangle", "stripes")
#: the smallest box a shape is drawn in: every class differs from every other from here on
MIN_BOX = 4


def draw_shapes(
    classes: Tensor, top: Tensor, left: Tensor, height: Tensor, width: Tensor, side: int
) -> Tensor:
    """Binary images (B, side, side) of one shape each, drawn in its box (all args (B,)).

    Every class fills its box's extent (it touches all four sides of the box), so the box is
    the bounding box of the drawn pixels; line widths are a quarter of the box's shorter side
    (at least 1 pixel), so a larger image holds the same shape larger.
    """
    u = torch.arange(side)[None, :, None] - top[:, None, None]  # (B, L, 1) row in the box
    v = torch.arange(side)[None, None, :] - left[:, None, None]  # (B, 1, L) column in the box
    h, w = height[:, None, None], width[:, None, None]  # (B, 1, 1)
    inside = (u >= 0) & (u < h) & (v >= 0) & (v < w)  # (B, L, L)
    thick = (torch.minimum(h, w) // 4).clamp(min=1)
    row_band = (u >= (h - thick) // 2) & (u < (h - thick) // 2 + thick)
    column_band = (v >= (w - thick) // 2) & (v < (w - thick) // 2 + thick)
    templates = (
        inside,  # rectangle
        (u < thick) | (u >= h - thick) | (v < thick) | (v >= w - thick),  # frame
        row_band | column_band,  # cross
        # ellipse inscribed in the box, in integers: (2u−(h−1))²w² + (2v−(w−1))²h² <= h²w²
        (2 * u - (h - 1)) ** 2 * w**2 + (2 * v - (w - 1)) ** 2 * h**2 <= h**2 * w**2,
        v * h < (u + 1) * w,  # triangle: lower left, right angle at the bottom-left corner
        (torch.minimum(u, h - 1 - u) // thick) % 2 == 0,  # stripes, symmetric top to bottom
    )
    image = torch.zeros(inside.shape, dtype=torch.bool)
    for index, template in enumerate(templates):  # per class, each vectorised over the batch
        image |= inside & template & (classes == index)[:, None, None]
    return image


def bounding_boxes(images: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(top, left, height, width), each (B,), of the set pixels of images (B, L, L)."""
    side = images.shape[1]
    rows, columns = images.any(dim=2), images.any(dim=1)  # (B, L) each
    top, left = rows.long().argmax(1), columns.long().argmax(1)  # first set row / column
    bottom = side - 1 - rows.flip(1).long().argmax(1)
    right = side - 1 - columns.flip(1).long().argmax(1)
    return top, left, bottom - top + 1, right - left + 1


@dataclasses.dataclass(frozen=True)
class ShapesConfig(TaskConfig):
    #: shapes.yaml trains on sides from 8 pixels, not from the shortest instance (4 at P = 2)
    data_defaults = {"min_len": 8}
    #: side of a patch in pixels: 2^(P²) patch symbols
    patch: int = option(
        2,
        integer_in(
            1, 3, "must be 1, 2 or 3 (a patch of P² pixels is one of 2^(P²) symbols); got {value}"
        ),
    )


class Shapes(GridTask):
    """Classify the one shape drawn in a binary image of side ``data.len`` pixels, cut into
    patches of ``data.task.patch`` pixels (one token per patch, its P² bits as a symbol).

    Classes: rectangle, frame, cross, ellipse, triangle, stripes, each drawn in a random box of
    height and width between max(4, L // 4) and L at a random place, so the same classes appear
    larger in larger images (resolution transfer). The class is read at one readout slot after
    the patches, whose position is "none" (−1 on every axis), like ViT's class token.

    The answer is a pure function of the image (``solve`` finds the bounding box of the set
    pixels and the one class whose drawing in that box is the image), which is why the images
    carry no pixel noise: a noisy image's class would be a property of how it was drawn, not of
    the image.

    Options (``ShapesConfig``): ``patch``, the side of a patch in pixels (``data.task.patch``,
    1 to 3; ``data.len`` must be a multiple of it).
    """

    Options = ShapesConfig
    name = "shapes"
    source = "lengen (issue 15): ViT-style classification of a procedurally drawn shape"
    answer_format = "the shape's class (1 symbol, read at the readout slot)"
    dense = False
    length_unit = (
        "side of the image in pixels (cut into data.task.patch-pixel patches, one token each)"
    )

    def __init__(self, **options) -> None:
        super().__init__(**options)
        patch = self.patch = self.cfg.patch
        self.length_step = patch
        self.min_length = -(-MIN_BOX // patch) * patch  # the smallest box, in whole patches
        self.patch_symbols = 2 ** (patch * patch)
        bits = patch * patch
        self.vocab = [format(s, f"0{bits}b")[::-1] for s in range(self.patch_symbols)]
        self.vocab += list(SHAPE_CLASSES)
        self.answer_symbols = [self.patch_symbols + c for c in range(len(SHAPE_CLASSES))]

    def check_length(self, length: int, key: str) -> None:
        if length % self.patch:
            raise ValueError(
                f"{key} must be a multiple of data.task.patch={self.patch} for task shapes (the "
                f"image is cut into whole patches); got {length}"
            )

    def input_length(self, length: int) -> int:
        return (length // self.patch) ** 2

    def answer_length(self, length: int) -> int:
        return 1

    def grid_shape(self, length: int) -> tuple[int, int]:
        return (length // self.patch,) * 2

    def sample_images(self, length: int, batch_size: int, generator: torch.Generator):
        """(images (B, L, L) bool, classes (B,)): one random shape in a random box each."""
        smallest = max(MIN_BOX, length // 4)
        classes = torch.randint(0, len(SHAPE_CLASSES), (batch_size,), generator=generator)
        height = uniform_ints(smallest, length, generator, (batch_size,))
        width = uniform_ints(smallest, length, generator, (batch_size,))
        top = uniform_ints(0, length - height, generator)
        left = uniform_ints(0, length - width, generator)
        return draw_shapes(classes, top, left, height, width, length), classes

    def sample_inputs(self, length: int, batch_size: int, generator: torch.Generator) -> Tensor:
        self.check_length(length, "data.len")
        return self.to_patches(self.sample_images(length, batch_size, generator)[0])

    def to_patches(self, images: Tensor) -> Tensor:
        """images (B, L, L) -> patch symbols (B, (L/P)²): bit k of a symbol is the pixel
        (k // P, k % P) of its patch, patches in row-major order."""
        batch, side, p = images.shape[0], images.shape[1], self.patch
        grid = side // p
        patches = images.reshape(batch, grid, p, grid, p).permute(0, 1, 3, 2, 4)  # (B,G,G,P,P)
        weights = 2 ** torch.arange(p * p)  # (P²,)
        return (patches.reshape(batch, grid * grid, p * p).long() * weights).sum(-1)

    def to_images(self, inputs: Tensor) -> Tensor:
        """Patch symbols (B, (L/P)²) -> images (B, L, L) bool (the inverse of ``to_patches``)."""
        batch, p = inputs.shape[0], self.patch
        grid = grid_side(inputs.shape[1], 2)
        bits = (inputs[..., None] >> torch.arange(p * p)) & 1  # (B, G², P²)
        patches = bits.reshape(batch, grid, grid, p, p).permute(0, 1, 3, 2, 4)  # (B,G,P,G,P)
        return patches.reshape(batch, grid * p, grid * p).bool()

    def solve(self, inputs: Tensor) -> Tensor:
        images = self.to_images(inputs)  # (B, L, L)
        top, left, height, width = bounding_boxes(images)
        side = images.shape[1]
        matches = []  # per class (B,): its drawing in this box is the image
        for index in range(len(SHAPE_CLASSES)):
            drawn = draw_shapes(torch.full_like(top, index), top, left, height, width, side)
            matches.append((drawn == images).flatten(1).all(1))
        return (self.patch_symbols + torch.stack(matches, 1).long().argmax(1))[:, None]  # (B, 1)
