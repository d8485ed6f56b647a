"""Text data (data=text): sources, tokenizers, cache, windows, configuration and a short run
(the two evaluation protocols: tests/evaluation/test_text.py)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers import compose_train, corpus_lines, text_data
from lengen.config import ConfigError
from lengen.data import text_prep
from lengen.preflight import validate


def stream_text(path) -> str:
    return path.read_text(encoding="utf-8")


# -- sources ----------------------------------------------------------------------------------
def test_jsonl_gives_the_same_stream_as_text(tmp_path, corpus):
    train, valid = corpus
    rows = tmp_path / "train.jsonl"
    rows.write_text("".join(json.dumps({"body": line}) + "\n" for line in corpus_lines(300, 0)))
    from_text = text_data(tmp_path, files={"train": str(train), "validation": str(valid)})
    from_json = text_data(
        tmp_path, files={"train": str(rows), "validation": str(valid)}, text_field="body"
    )
    np.testing.assert_array_equal(from_json.train_ids, from_text.train_ids)


def test_parquet_gives_the_same_stream_as_text(tmp_path, corpus):
    from datasets import Dataset

    train, valid = corpus
    path = tmp_path / "train.parquet"
    Dataset.from_dict({"text": corpus_lines(300, 0)}).to_parquet(str(path))
    from_text = text_data(tmp_path, files={"train": str(train), "validation": str(valid)})
    from_parquet = text_data(tmp_path, files={"train": str(path), "validation": str(valid)})
    np.testing.assert_array_equal(from_parquet.train_ids, from_text.train_ids)


def test_glob_and_list_read_every_file(tmp_path, corpus):
    train, valid = corpus
    more = tmp_path / "more.txt"
    more.write_text("one more line\n")
    options = {"tokenizer": "byte", "files": {"validation": str(valid)}}
    listed = text_data(
        tmp_path,
        **options | {"files": {"train": [str(more), str(train)], "validation": str(valid)}},
    )
    globbed = text_data(
        tmp_path,
        **options | {"files": {"train": str(tmp_path / "*r*.txt"), "validation": str(valid)}},
    )
    expected = (stream_text(more) + stream_text(train)).encode("utf-8")
    np.testing.assert_array_equal(listed.train_ids, np.frombuffer(expected, dtype=np.uint8))
    np.testing.assert_array_equal(globbed.train_ids, listed.train_ids)  # sorted: more, train


def test_local_dataset_directory_uses_its_validation_split(tmp_path, corpus):
    from datasets import Dataset, DatasetDict

    train, valid = corpus
    directory = tmp_path / "saved"
    DatasetDict(
        {
            "train": Dataset.from_dict({"text": corpus_lines(300, 0)}),
            "validation": Dataset.from_dict({"text": corpus_lines(60, 1)}),
        }
    ).save_to_disk(str(directory))
    from_files = text_data(tmp_path, files={"train": str(train), "validation": str(valid)})
    from_dataset = text_data(tmp_path, dataset=str(directory))
    np.testing.assert_array_equal(from_dataset.val_ids, from_files.val_ids)
    assert from_dataset.split_rule == {"validation": "given"}


def test_directory_of_split_files_loads_like_a_hub_dataset(tmp_path, corpus):
    train, valid = corpus
    directory = tmp_path / "raw"
    directory.mkdir()
    (directory / "train.txt").write_text(stream_text(train), encoding="utf-8")
    (directory / "validation.txt").write_text(stream_text(valid), encoding="utf-8")
    from_files = text_data(tmp_path, files={"train": str(train), "validation": str(valid)})
    from_directory = text_data(tmp_path, dataset=str(directory))
    np.testing.assert_array_equal(from_directory.train_ids, from_files.train_ids)
    np.testing.assert_array_equal(from_directory.val_ids, from_files.val_ids)


def test_single_split_carves_the_tail_deterministically(tmp_path, corpus):
    train, _ = corpus
    data = text_data(tmp_path, files={"train": str(train)}, validation_fraction=0.1)
    rule = data.split_rule
    assert rule["validation"] == "carved" and "data.validation_fraction" in rule["rule"]
    lines = corpus_lines(300, 0)
    tail = "".join(line + "\n" for line in lines[rule["first_validation_row"] :])
    assert 0.08 < len(tail) / len(stream_text(train)) < 0.12
    assert data.tokenizer.decode(data.val_ids.tolist()) == tail


# -- tokenizers -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["bpe", "byte", "char"])
def test_tokenizer_round_trips_text(tmp_path, corpus, kind):
    train, valid = corpus
    data = text_data(
        tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer=kind
    )
    assert data.tokenizer.decode(data.val_ids.tolist()) == stream_text(valid)


def test_word_tokenizer_round_trips_words_and_line_ends(tmp_path, corpus):
    train, valid = corpus
    data = text_data(
        tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="word"
    )
    decoded = data.tokenizer.decode(data.val_ids.tolist(), skip_special_tokens=False)
    assert decoded.split() == stream_text(valid).replace("\n", " <eos> ").split()


def test_byte_tokenizer_ids_are_byte_values(tmp_path, corpus):
    train, valid = corpus
    data = text_data(
        tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="byte"
    )
    expected = np.frombuffer(stream_text(valid).encode("utf-8"), dtype=np.uint8)
    np.testing.assert_array_equal(data.val_ids, expected)
    assert data.vocab_size == 256


def test_tokenizer_json_path_gives_the_same_tokens(tmp_path, corpus):
    train, valid = corpus
    files = {"train": str(train), "validation": str(valid)}
    trained = text_data(tmp_path, files=files)
    path = tmp_path / "tokenizer.json"
    trained.tokenizer.save(str(path))
    loaded = text_data(tmp_path / "other", files=files, tokenizer=str(path))
    np.testing.assert_array_equal(loaded.val_ids, trained.val_ids)


@pytest.mark.parametrize("kind", ["bpe", "byte", "char", "word"])
def test_token_bytes_add_up_to_the_text(tmp_path, corpus, kind):
    train, valid = corpus
    data = text_data(
        tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer=kind
    )
    # every byte of the stream belongs to exactly one token (word: spaces to the next word)
    assert int(data.val_bytes.sum()) == len(stream_text(valid).encode("utf-8"))


# -- cache ------------------------------------------------------------------------------------
def test_second_build_hits_the_cache_and_tokenises_nothing(tmp_path, corpus, monkeypatch):
    train, valid = corpus
    files = {"train": str(train), "validation": str(valid)}
    first = text_data(tmp_path, files=files)
    assert not first.cache["hit"]

    def fail(*args, **kwargs):
        raise AssertionError("tokenised again despite the cache")

    monkeypatch.setattr(text_prep, "encode_stream", fail)
    monkeypatch.setattr(text_prep, "new_tokenizer", fail)
    second = text_data(tmp_path, files=files)
    assert second.cache["hit"] and second.cache["tokenizer_hit"]
    np.testing.assert_array_equal(second.train_ids, first.train_ids)


def test_changed_content_misses_the_cache(tmp_path, corpus):
    train, valid = corpus
    files = {"train": str(train), "validation": str(valid)}
    text_data(tmp_path, files=files)
    valid.write_text(stream_text(valid) + "a new last line\n")
    assert not text_data(tmp_path, files=files).cache["hit"]


def test_a_damaged_cached_tokenizer_is_rebuilt_with_a_note(tmp_path, corpus, capsys):
    train, valid = corpus
    files = {"train": str(train), "validation": str(valid)}
    first = text_data(tmp_path, files=files)
    for cached in (tmp_path / "cache" / "tokenizers").glob("*.json"):
        cached.write_text(cached.read_text()[:100])  # a copy cut short
    second = text_data(tmp_path, files=files)
    assert "note: cached tokenizer" in capsys.readouterr().err
    np.testing.assert_array_equal(second.train_ids, first.train_ids)


def test_a_damaged_cached_corpus_is_rebuilt_with_a_note(tmp_path, corpus, capsys):
    train, valid = corpus
    files = {"train": str(train), "validation": str(valid)}
    first = text_data(tmp_path, files=files)
    expected = np.array(first.train_ids)
    for cached in (tmp_path / "cache" / "corpora").glob("*/train.npy"):
        cached.write_bytes(cached.read_bytes()[:200])  # a copy cut short
    second = text_data(tmp_path, files=files)
    assert "note: cached corpus" in capsys.readouterr().err
    np.testing.assert_array_equal(second.train_ids, expected)


# -- windows ----------------------------------------------------------------------------------
def test_train_batch_is_a_pure_function_of_seed_and_step(tmp_path, corpus):
    train, valid = corpus
    data = text_data(tmp_path, files={"train": str(train), "validation": str(valid)})
    a, b = data.train_batch(7), data.train_batch(7)
    torch.testing.assert_close(a["inputs"]["tokens"], b["inputs"]["tokens"])
    assert a["inputs"]["tokens"].shape == (4, 16)
    # targets are the inputs shifted by one token of the stream
    torch.testing.assert_close(a["targets"][:, :-1], a["inputs"]["tokens"][:, 1:])
    assert not torch.equal(data.train_batch(8)["inputs"]["tokens"], a["inputs"]["tokens"])


@pytest.mark.parametrize("start_step", [0, 5])
def test_loader_workers_give_the_same_batches_in_the_same_order(tmp_path, corpus, start_step):
    # data.num_workers: worker w builds steps start + w, start + w + n, …, and the loader
    # interleaves them back into step order, also when a resumed run starts mid-stream
    from lengen.lit import DataModule

    train, valid = corpus
    data = text_data(tmp_path, files={"train": str(train), "validation": str(valid)})

    def first_batches(num_workers: int, count: int = 7) -> list[dict]:
        module = DataModule(data, num_workers=num_workers)
        module.trainer = SimpleNamespace(global_step=start_step, global_rank=0, world_size=1)
        return list(itertools.islice(module.train_dataloader(), count))

    expected = [data.train_batch(start_step + i) for i in range(7)]
    for num_workers in (0, 2):
        batches = first_batches(num_workers)
        assert len(batches) == len(expected)
        for got, want in zip(batches, expected, strict=True):
            torch.testing.assert_close(got["inputs"]["tokens"], want["inputs"]["tokens"])
            torch.testing.assert_close(got["targets"], want["targets"])


# -- configuration ----------------------------------------------------------------------------
def text_overrides(train, valid, tmp_path):
    return [
        "data=text",
        f"data.files.train={train}",
        f"data.files.validation={valid}",
        f"data.cache_dir={tmp_path / 'cache'}",
        "data.vocab_size=300",
    ]


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("data.files.train=/no/such/file.txt", "data.files.train"),
        ("data.files.validation=/no/such/*.txt", "data.files.validation"),
        ("data.tokenizer=sentencepiece", "data.tokenizer"),
        ("data.vocab_size=100", "data.vocab_size"),
        ("data.validation_fraction=0.9", "data.validation_fraction"),
        ("eval.protocol=strided", "eval.protocol"),
        ("eval.stride=1000", "eval.stride"),
        ("eval.max_tokens=10", "eval.max_tokens"),
        ("data.dataset=wikitext", "data.files.train"),  # two sources at once
    ],
)
def test_bad_text_value_is_named(tmp_path, corpus, override, key):
    cfg = compose_train(*text_overrides(*corpus, tmp_path), override)
    with pytest.raises(ConfigError) as error:
        validate(cfg)
    assert str(error.value).startswith(key)


def test_text_without_a_source_names_the_key():
    with pytest.raises(ConfigError, match=r"^data\.files\.train"):
        validate(compose_train("data=text"))


def test_encoder_models_are_refused(tmp_path, corpus):
    from lengen.build import build

    cfg = compose_train(*text_overrides(*corpus, tmp_path), "model=encoder")
    with pytest.raises(ConfigError, match=r"^model: .*model=decoder"):
        build(cfg)


def test_encoder_models_are_refused_before_anything_is_built(tmp_path, corpus):
    cfg = compose_train(*text_overrides(*corpus, tmp_path), "model=encoder")
    with pytest.raises(ConfigError, match=r"^model: .*model=decoder"):
        validate(cfg)


def test_a_single_line_corpus_to_carve_validation_from_is_refused(tmp_path):
    (tmp_path / "one.txt").write_text("a single line of text without its end " * 100)
    cfg = compose_train("data=text", f"data.files.train={tmp_path / 'one.txt'}")
    with pytest.raises(ConfigError, match=r"^data\.files\.train: .* is a single line"):
        validate(cfg)


def test_a_cache_dir_that_cannot_be_made_is_named(tmp_path, corpus):
    (tmp_path / "afile").write_text("mine\n")
    cfg = compose_train(*text_overrides(*corpus, tmp_path), f"data.cache_dir={tmp_path}/afile/c")
    with pytest.raises(ConfigError, match=r"^data\.cache_dir=.*afile is a file"):
        validate(cfg)


def test_wikitext2_recipe_names_the_shared_files(shared_data):
    cfg = compose_train("experiment=wikitext2_cpu")
    validate(cfg)
    expected = shared_data / "wikitext-2" / "test.txt"
    assert Path(cfg.data.files.train).resolve() == expected.resolve()


# -- end to end -------------------------------------------------------------------------------
def test_short_run_on_tinyshakespeare(tmp_path, shared_data, single_thread):
    from lengen.train import run

    cfg = compose_train(
        "data=text",
        f"data.files.train={shared_data / 'tinyshakespeare' / 'input.txt'}",
        f"data.cache_dir={tmp_path / 'cache'}",
        "data.tokenizer=char",
        "data.len=32",
        "model.d_model=32",
        "model.n_layers=1",
        "model.d_ff=64",
        "eval.lengths=[16,32,64]",
        "eval.max_tokens=2048",
        "pe=alibi",
        "logger=none",
        "data.num_workers=2",
    )
    results = run(cfg, run_dir=tmp_path / "run")
    rows = results["eval"]
    assert [r["length"] for r in rows] == [16, 32, 64]
    assert all(r["tokens_scored"] == 2048 and r["ppl"] > 1 and r["bits_per_byte"] for r in rows)
    assert results["task"] == "text" and results["data"]["tokenizer"]["spec"] == "char"
    on_disk = json.loads((tmp_path / "run" / "results.json").read_text())
    assert on_disk["eval"][0]["protocol"] == "nonoverlap"
    assert (tmp_path / "run" / "loss_by_position.json").is_file()
    assert (tmp_path / "run" / "extrapolation.png").is_file()
