"""Every shipped pe yaml on grid data (``axes=2``): the encodings with an N-d form build, the
others refuse in one line naming ``pe`` and the allowed choices (glob-driven: a new encoding is
covered with no test edit)."""

from __future__ import annotations

import pytest
from hydra.utils import get_class
from omegaconf import OmegaConf

from helpers import CONFIG_DIR, pe_factory, yaml_choices
from lengen.pe.rules import GRID_ENCODINGS

pytestmark = pytest.mark.usefixtures("single_thread")


def encoding_class(name: str):
    return get_class(OmegaConf.load(CONFIG_DIR / "pe" / f"{name}.yaml")._target_)


def test_the_allowed_list_is_the_yamls_whose_class_supports_axes():
    supported = [name for name in yaml_choices("pe") if encoding_class(name).supports_axes]
    assert list(GRID_ENCODINGS) == supported


@pytest.mark.parametrize(
    "name", [n for n in yaml_choices("pe") if not encoding_class(n).supports_axes]
)
def test_encodings_without_an_nd_form_refuse_grid_data_in_one_line(name):
    factory = pe_factory(name, train_positions=4, max_positions=8)
    with pytest.raises(ValueError) as error:
        factory(d_model=32, n_heads=4, causal=True, axes=2)
    message = str(error.value)
    assert message.startswith("pe: ") and "\n" not in message
    assert message.endswith("allowed: " + ", ".join(GRID_ENCODINGS))


@pytest.mark.parametrize("axes", [2, 3])
@pytest.mark.parametrize("name", [n for n in yaml_choices("pe") if encoding_class(n).supports_axes])
def test_encodings_with_an_nd_form_build_from_their_yaml(name, axes):
    pe = pe_factory(name, train_positions=4, max_positions=8)(
        d_model=48, n_heads=4, causal=False, axes=axes
    )
    assert pe.axes == axes
