"""The real text in ../shared/data that the text pipeline and its tests read.

Skipped in a plain clone without ../shared; CI sets LENGEN_REQUIRE_SHARED_DATA=1, which turns
the skip into a failure (see the ``shared_data`` fixture in conftest.py).
"""

from __future__ import annotations

import pytest

FILES = ["tinyshakespeare/input.txt", "wikitext-2/valid.txt", "wikitext-2/test.txt"]


@pytest.mark.parametrize("name", FILES)
def test_shared_text_file_is_readable_utf8(shared_data, name):
    text = (shared_data / name).read_text(encoding="utf-8")
    assert len(text) > 500_000


def test_wikitext_is_word_level_with_unk(shared_data):
    head = (shared_data / "wikitext-2" / "valid.txt").read_text(encoding="utf-8")[:200_000]
    assert "<unk>" in head and " @-@ " in head
