"""Text data (data=text): sources, tokenizers, cache, windows and the two evaluation protocols."""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from helpers import compose_train
from lengen.config import ConfigError, validate
from lengen.data import text_prep
from lengen.data.text import TextData, window_plan

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat,",
    "and",
    "then",
    "—",
    "naïve",
    "café",
    "owners",
    "said",
    "😀",
    "hello",
    "to",
    "everyone",
]


def corpus_lines(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(n)]


@pytest.fixture
def corpus(tmp_path):
    """train.txt / valid.txt of short lines (non-ASCII included), no blank lines."""
    train, valid = tmp_path / "train.txt", tmp_path / "valid.txt"
    train.write_text("".join(line + "\n" for line in corpus_lines(300, 0)), encoding="utf-8")
    valid.write_text("".join(line + "\n" for line in corpus_lines(60, 1)), encoding="utf-8")
    return train, valid


def make(tmp_path, **kwargs) -> TextData:
    options = {"len": 16, "tokenizer": "bpe", "vocab_size": 300, "batch_size": 4}
    options.update(kwargs)
    return TextData(cache_dir=str(tmp_path / "cache"), progress=False, **options)


def stream_text(path) -> str:
    return path.read_text(encoding="utf-8")


# -- sources ----------------------------------------------------------------------------------
def test_jsonl_gives_the_same_stream_as_text(tmp_path, corpus):
    train, valid = corpus
    rows = tmp_path / "train.jsonl"
    rows.write_text("".join(json.dumps({"body": line}) + "\n" for line in corpus_lines(300, 0)))
    from_text = make(tmp_path, files={"train": str(train), "validation": str(valid)})
    from_json = make(
        tmp_path, files={"train": str(rows), "validation": str(valid)}, text_field="body"
    )
    np.testing.assert_array_equal(from_json.train_ids, from_text.train_ids)


def test_parquet_gives_the_same_stream_as_text(tmp_path, corpus):
    from datasets import Dataset

    train, valid = corpus
    path = tmp_path / "train.parquet"
    Dataset.from_dict({"text": corpus_lines(300, 0)}).to_parquet(str(path))
    from_text = make(tmp_path, files={"train": str(train), "validation": str(valid)})
    from_parquet = make(tmp_path, files={"train": str(path), "validation": str(valid)})
    np.testing.assert_array_equal(from_parquet.train_ids, from_text.train_ids)


def test_glob_and_list_read_every_file(tmp_path, corpus):
    train, valid = corpus
    more = tmp_path / "more.txt"
    more.write_text("one more line\n")
    options = {"tokenizer": "byte", "files": {"validation": str(valid)}}
    listed = make(
        tmp_path,
        **options | {"files": {"train": [str(more), str(train)], "validation": str(valid)}},
    )
    globbed = make(
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
    from_files = make(tmp_path, files={"train": str(train), "validation": str(valid)})
    from_dataset = make(tmp_path, dataset=str(directory))
    np.testing.assert_array_equal(from_dataset.val_ids, from_files.val_ids)
    assert from_dataset.split_rule == {"validation": "given"}


def test_directory_of_split_files_loads_like_a_hub_dataset(tmp_path, corpus):
    train, valid = corpus
    directory = tmp_path / "raw"
    directory.mkdir()
    (directory / "train.txt").write_text(stream_text(train), encoding="utf-8")
    (directory / "validation.txt").write_text(stream_text(valid), encoding="utf-8")
    from_files = make(tmp_path, files={"train": str(train), "validation": str(valid)})
    from_directory = make(tmp_path, dataset=str(directory))
    np.testing.assert_array_equal(from_directory.train_ids, from_files.train_ids)
    np.testing.assert_array_equal(from_directory.val_ids, from_files.val_ids)


def test_single_split_carves_the_tail_deterministically(tmp_path, corpus):
    train, _ = corpus
    data = make(tmp_path, files={"train": str(train)}, validation_fraction=0.1)
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
    data = make(tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer=kind)
    assert data.tokenizer.decode(data.val_ids.tolist()) == stream_text(valid)


def test_word_tokenizer_round_trips_words_and_line_ends(tmp_path, corpus):
    train, valid = corpus
    data = make(tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="word")
    decoded = data.tokenizer.decode(data.val_ids.tolist(), skip_special_tokens=False)
    assert decoded.split() == stream_text(valid).replace("\n", " <eos> ").split()


def test_byte_tokenizer_ids_are_byte_values(tmp_path, corpus):
    train, valid = corpus
    data = make(tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="byte")
    expected = np.frombuffer(stream_text(valid).encode("utf-8"), dtype=np.uint8)
    np.testing.assert_array_equal(data.val_ids, expected)
    assert data.vocab_size == 256


def test_tokenizer_json_path_gives_the_same_tokens(tmp_path, corpus):
    train, valid = corpus
    files = {"train": str(train), "validation": str(valid)}
    trained = make(tmp_path, files=files)
    path = tmp_path / "tokenizer.json"
    trained.tokenizer.save(str(path))
    loaded = make(tmp_path / "other", files=files, tokenizer=str(path))
    np.testing.assert_array_equal(loaded.val_ids, trained.val_ids)


@pytest.mark.parametrize("kind", ["bpe", "byte", "char", "word"])
def test_token_bytes_add_up_to_the_text(tmp_path, corpus, kind):
    train, valid = corpus
    data = make(tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer=kind)
    # every byte of the stream belongs to exactly one token (word: spaces to the next word)
    assert int(data.val_bytes.sum()) == len(stream_text(valid).encode("utf-8"))


# -- cache ------------------------------------------------------------------------------------
def test_second_build_hits_the_cache_and_tokenises_nothing(tmp_path, corpus, monkeypatch):
    train, valid = corpus
    files = {"train": str(train), "validation": str(valid)}
    first = make(tmp_path, files=files)
    assert not first.cache["hit"]

    def fail(*args, **kwargs):
        raise AssertionError("tokenised again despite the cache")

    monkeypatch.setattr(text_prep, "encode_stream", fail)
    monkeypatch.setattr(text_prep, "new_tokenizer", fail)
    second = make(tmp_path, files=files)
    assert second.cache["hit"] and second.cache["tokenizer_hit"]
    np.testing.assert_array_equal(second.train_ids, first.train_ids)


def test_changed_content_misses_the_cache(tmp_path, corpus):
    train, valid = corpus
    files = {"train": str(train), "validation": str(valid)}
    make(tmp_path, files=files)
    valid.write_text(stream_text(valid) + "a new last line\n")
    assert not make(tmp_path, files=files).cache["hit"]


# -- windows ----------------------------------------------------------------------------------
def test_train_batch_is_a_pure_function_of_seed_and_step(tmp_path, corpus):
    train, valid = corpus
    data = make(tmp_path, files={"train": str(train), "validation": str(valid)})
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
    data = make(tmp_path, files={"train": str(train), "validation": str(valid)})

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


def scored_targets(n_targets, length, stride):
    starts, first = window_plan(n_targets, length, stride)
    positions = np.arange(length)
    scored = positions[None, :] >= first[:, None]  # (W, L)
    return np.sort((starts[:, None] + 1 + positions[None, :])[scored]), starts, first


@pytest.mark.parametrize(
    ("n_targets", "length", "stride", "windows"),
    [(12, 4, 4, 3), (10, 4, 4, 3), (10, 4, 1, 7), (10, 4, 3, 3), (4, 4, 1, 1)],
)
def test_windows_score_every_target_exactly_once(n_targets, length, stride, windows):
    targets, starts, _ = scored_targets(n_targets, length, stride)
    np.testing.assert_array_equal(targets, np.arange(1, n_targets + 1))
    assert len(starts) == windows
    assert starts.max() + length <= n_targets  # never reads past the stretch


def test_sliding_windows_give_every_scored_token_enough_context():
    starts, first = window_plan(50, 8, 3)
    assert (first[1:] >= 8 - 3).all() and first[0] == 0


class Uniform(torch.nn.Module):
    """Equal logits over the vocabulary: every token costs exactly ln V nats."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    def forward(self, tokens):
        return self.anchor.expand(*tokens.shape, self.vocab_size) * 0


def evaluate(data, model, lengths, tmp_path, **settings):
    eval_settings = {"protocol": "nonoverlap", "stride": None, "max_tokens": None}
    eval_settings.update(settings, max_tokens_per_batch=256)
    return data.evaluate(
        model,
        lengths,
        settings=OmegaConf.create(eval_settings),
        output_dir=tmp_path,
        progress=False,
    )


def test_protocols_score_the_counted_tokens(tmp_path, corpus, single_thread):
    train, valid = corpus
    data = make(tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="byte")
    model = Uniform(data.vocab_size)
    rows = evaluate(data, model, [8, 16], tmp_path, max_tokens=100)
    assert [(r["n_examples"], r["tokens_scored"]) for r in rows] == [(13, 100), (7, 100)]
    sliding = evaluate(data, model, [16], tmp_path, protocol="sliding", stride=4, max_tokens=100)
    # windows at 0, 4, …, 84 (22 of them): 16 + 21 × 4 = 100 targets
    assert (sliding[0]["n_examples"], sliding[0]["tokens_scored"]) == (22, 100)


def test_uniform_model_has_perplexity_vocab_size(tmp_path, corpus, single_thread):
    train, valid = corpus
    data = make(tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="byte")
    (row,) = evaluate(data, Uniform(256), [32], tmp_path)
    assert row["tokens_scored"] == data.val_ids.shape[0] - 1
    assert row["ppl"] == pytest.approx(256.0)
    # byte tokenizer: one byte per token, so bits per byte = loss / ln 2 = 8
    assert row["bits_per_byte"] == pytest.approx(row["loss"] / math.log(2))
    assert row["accuracy"] is None and row["exact_match"] is None


def test_sliding_with_stride_equal_to_length_equals_nonoverlap(tmp_path, corpus, single_thread):
    from lengen.model import DecoderOnly
    from lengen.pe.alibi import ALiBi

    train, valid = corpus
    data = make(tmp_path, files={"train": str(train), "validation": str(valid)})
    torch.manual_seed(0)
    model = DecoderOnly(
        vocab_size=data.vocab_size, d_model=16, n_layers=1, n_heads=2, d_ff=32, pe=ALiBi
    )
    nonoverlap = evaluate(data, model, [16], tmp_path, max_tokens=200)
    sliding = evaluate(data, model, [16], tmp_path, protocol="sliding", stride=16, max_tokens=200)
    assert sliding[0]["loss"] == pytest.approx(nonoverlap[0]["loss"], rel=1e-6)
    assert (sliding[0]["n_examples"], sliding[0]["tokens_scored"]) == (13, 200)
    assert (nonoverlap[0]["n_examples"], nonoverlap[0]["tokens_scored"]) == (13, 200)
    # a smaller stride gives every token more context: a different loss, same tokens
    shorter = evaluate(data, model, [16], tmp_path, protocol="sliding", stride=4, max_tokens=200)
    assert shorter[0]["tokens_scored"] == 200 and shorter[0]["loss"] != nonoverlap[0]["loss"]


def test_loss_by_position_is_written(tmp_path, corpus, single_thread):
    train, valid = corpus
    data = make(tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="byte")
    rows = evaluate(data, Uniform(256), [8, 32], tmp_path, max_tokens=64)
    report = json.loads((tmp_path / "loss_by_position.json").read_text())
    for row in rows:
        counts = report["lengths"][str(row["length"])]["count"]
        assert len(counts) == row["length"] and sum(counts) == row["tokens_scored"]
    assert (tmp_path / "loss_by_position.png").stat().st_size > 0


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
    from lengen.train import build

    cfg = compose_train(*text_overrides(*corpus, tmp_path), "model=encoder")
    with pytest.raises(ConfigError, match=r"^model: .*model=decoder"):
        build(cfg)


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


def test_rows_record_cost_and_windows_per_batch(tmp_path, corpus, single_thread):
    train, valid = corpus
    data = make(tmp_path, files={"train": str(train), "validation": str(valid)}, tokenizer="byte")
    rows = evaluate(data, Uniform(data.vocab_size), [8, 16], tmp_path, max_tokens=100)
    # the budget of 256 tokens per batch: 32 windows of 8, 16 of 16
    assert [r["batch_size"] for r in rows] == [32, 16]
    assert all(r["seconds"] > 0 and r["peak_mem_mb"] >= 0 for r in rows)
