"""Language modelling on real text: ``data=text`` (docs/data.md).

``TextData`` is a data source (``lengen.data.source.DataSource``): Lightning trains on
``train_batch(step)`` (random windows of ``data.len`` tokens, a pure function of (seed, step))
and validates on ``val_batches()`` (disjoint windows at ``data.len``); after training
``lengen.evaluation.text`` scores the validation stream (``val_ids``) at every eval length.

Where the corpus comes from and its tokenised splits on disk: ``text_corpus.py``; tokenizers,
streams and cache keys: ``text_prep.py``. torch, numpy, datasets and tokenizers are imported
inside functions: importing this module is cheap.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from lengen.caches import cache_refusal
from lengen.checks import ConfigError, positive_int
from lengen.data import text_corpus, text_prep
from lengen.data.text_prep import (
    TOKENIZER_KINDS,
    check_text_files,
    expand_files,
    file_builder,
    settings_key,
)
from lengen.schema import Config, integer, number, option

#: keys of a text data node that are not TextData's options: lengen's ``name`` and the
#: DataModule's ``num_workers`` (``lengen.build.OWN_KEYS``: never passed to TextData) and
#: the run's ``seed`` (``lengen.options.DataSeedConfig``: passed as the ``seed`` keyword)
NOT_OPTIONS = ("name", "num_workers", "seed")


# -- the typed config ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TextFiles:
    """``data.files``: the local files of each split, a path, a glob or a list (or null)."""

    train: Any = None
    #: null: carve data.validation_fraction off the end of train
    validation: Any = None


def _files(key: str, value) -> TextFiles:
    """``data.files`` as the yaml writes it (a mapping of the splits), or null: no files."""
    if value is None:
        return TextFiles()
    if isinstance(value, TextFiles):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"{key} must hold train and validation, got {value!r}")
    splits = [field.name for field in dataclasses.fields(TextFiles)]
    unknown = sorted(set(value) - set(splits))
    if unknown:
        raise ValueError(f"{key}.{unknown[0]}: no such split; allowed: {', '.join(splits)}")
    return TextFiles(**value)


def _text_field(key: str, value):
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a column name, got {value!r}")
    return value


def _tokenizer(key: str, value):
    if value not in TOKENIZER_KINDS and not Path(str(value)).expanduser().is_file():
        raise ValueError(
            f"{key} must be one of {', '.join(TOKENIZER_KINDS)} or the path of a "
            f"tokenizer.json; got {value!r}"
        )
    return value


@dataclasses.dataclass(frozen=True)
class TextDataConfig(Config):
    """The options of ``configs/data/text.yaml`` (``data.<key>``), each with its one default
    and rule; ``check`` makes the checks that read several options, ``check_files`` those
    that read the files named (before a run starts: ``TextData.validate_config``)."""

    prefix: ClassVar[str] = "data"

    #: a hub name (e.g. wikitext) or a local dataset directory
    dataset: str | None = option(None)
    dataset_config: str | None = option(None)
    #: the split of ``dataset`` used for validation and evaluation
    validation_split: str = option("validation")
    files: TextFiles = option(TextFiles(), _files)
    #: the column holding the text (JSON lines, parquet, datasets)
    text_field: str = option("text", _text_field)
    #: bpe, char, byte, word or the path of a tokenizer.json
    tokenizer: str = option("bpe", _tokenizer)
    #: bpe (>= 256) and word (null: every word); ignored by char and byte
    vocab_size: int | None = option(4096)
    #: the share of the training text's characters carved off for validation
    validation_fraction: float = option(
        0.05, number(above=0, at_most=0.5, message="must be a number in (0, 0.5], got {value!r}")
    )
    #: trained tokenizers and tokenised splits (the yaml: LENGEN_CACHE_DIR, else this)
    cache_dir: str = option("~/.cache/lengen")
    #: the training window in tokens (the contract's ``data.len``)
    len: int = option(128, integer())
    batch_size: int = option(16, integer())
    #: disjoint windows of len tokens for in-distribution validation
    val_samples: int = option(64, integer())

    @classmethod
    def from_node(cls, node: Mapping) -> TextDataConfig:
        """The config from a composed ``data`` node (its keys that are options)."""
        keys = {
            key: value
            for key, value in node.items()
            if key not in NOT_OPTIONS and not (key.startswith("_") and key.endswith("_"))
        }
        return cls.from_keys(keys, owner="TextData")

    def check(self) -> None:
        """One source, and a vocabulary size the tokenizer can have."""
        files = self.files
        if (self.dataset is None) == (files.train is None):
            raise ValueError(
                "data.files.train: give exactly one source; allowed: data.files.train (a path, "
                "glob or list of local files) or data.dataset (a hub name or a local dataset "
                f"directory), got data.files.train={files.train!r} and data.dataset="
                f"{self.dataset!r}"
            )
        if self.dataset is not None and files.validation is not None:
            raise ValueError(
                "data.files.validation: only with data.files.train; with data.dataset choose "
                "the split with data.validation_split"
            )
        if self.tokenizer == "bpe" or self.vocab_size is not None:
            minimum = 256 if self.tokenizer == "bpe" else 1
            positive_int("data.vocab_size", self.vocab_size, minimum)

    def check_tokenizer_file(self) -> None:
        """A ``data.tokenizer`` path must hold a tokenizer.json the tokenizers library reads
        (T02: a plain text file failed at build with "expected value at line 1 column 1",
        naming neither the key nor the file)."""
        if self.tokenizer in TOKENIZER_KINDS:
            return
        from tokenizers import Tokenizer  # no torch; only for a tokenizer given by path

        path = Path(str(self.tokenizer)).expanduser()
        try:
            Tokenizer.from_str(path.read_text())
        except Exception as error:  # noqa: BLE001 - unreadable, not text, or its parser's
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise ValueError(
                f"data.tokenizer={self.tokenizer}: not a tokenizer.json the tokenizers library "
                f"reads ({type(error).__name__}: {reason[:120]}); allowed: "
                f"{', '.join(TOKENIZER_KINDS)} or the path of a tokenizer.json "
                f"(tokenizers' Tokenizer.save)"
            ) from None

    def check_files(self) -> None:
        """Every local file named exists and holds text (reads them: not for every build)."""
        self.check_tokenizer_file()
        if self.dataset is not None:
            return
        for split in ("train", "validation"):
            key = f"data.files.{split}"
            found = expand_files(key, getattr(self.files, split))
            if found:
                check_text_files(key, found, file_builder(key, found))
            # validation is carved off as whole last rows (lines): one line leaves none,
            # found now rather than after the whole corpus is tokenised
            carved = split == "train" and self.files.validation is None
            text = found and file_builder(key, found) == "text"
            if carved and text and sum(text_prep.count_lines(f, at_most=2) for f in found) < 2:
                raise ValueError(
                    f"{key}: {found[0]} is a single line, so no validation rows can be "
                    f"carved off its end; allowed: text of several lines, or "
                    f"data.files.validation"
                )


class TextData:
    """Token streams of a text corpus, served as windows for a causal language model.

    Built from the run's keywords and the options of ``configs/data/text.yaml``
    (``TextDataConfig``), checked into ``self.cfg``:

        len: training window in tokens (``data.len``).
        dataset, dataset_config, validation_split: a hub dataset or local dataset directory,
            its configuration, and the split used for validation and evaluation.
        files: ``{"train": …, "validation": …}``, each a path, a glob or a list (or null).
        text_field: the column holding the text (JSON lines, parquet, datasets).
        tokenizer: ``bpe``, ``char``, ``byte``, ``word`` or the path of a tokenizer.json.
        vocab_size: for ``bpe`` (required) and ``word`` (null: every word).
        validation_fraction: carved off the end of the training split when no validation split
            is given.
        cache_dir: where trained tokenizers and tokenised splits are kept.
        batch_size: training windows per step.
        val_samples: disjoint windows of length ``len`` for in-distribution validation.

    Args:
        model_kind, seed, eval_seed: given by the run.
        progress: progress bars while training the tokenizer and tokenising.
        options: the options above, as keywords.
    """

    Options = TextDataConfig

    def __init__(
        self,
        *,
        model_kind: str = "decoder",
        seed: int = 0,
        eval_seed: int = 1234,
        progress: bool = True,
        **options,
    ) -> None:
        check_model_kind(model_kind)
        #: the options, checked (``TextDataConfig``)
        self.cfg = cfg = self.Options.from_keys(options, owner="TextData")
        cfg.check()
        self.train_len = cfg.len
        # a causal LM trained on windows of T tokens is trained at every prefix length 1..T
        self.min_len = 1
        self.batch_size = cfg.batch_size
        self.val_samples = cfg.val_samples
        self.model_kind = model_kind
        self.seed = seed
        self.eval_seed = eval_seed
        self.progress = progress
        self.cache_dir = Path(os.path.expanduser(str(cfg.cache_dir)))
        self._prepare(
            dataset=cfg.dataset,
            dataset_config=cfg.dataset_config,
            validation_split=cfg.validation_split,
            train_files=cfg.files.train,
            validation_files=cfg.files.validation,
            text_field=cfg.text_field,
            tokenizer=str(cfg.tokenizer),
            vocab_size=cfg.vocab_size,
            validation_fraction=cfg.validation_fraction,
        )
        needed = self.train_len + 1
        if self.train_ids.shape[0] < needed:
            raise ValueError(
                f"data.len: the training split has {self.train_ids.shape[0]} tokens; a window "
                f"of data.len={self.train_len} needs {needed}"
            )
        if self.val_ids.shape[0] < needed:
            raise ValueError(
                f"data.len: the validation split has {self.val_ids.shape[0]} tokens; a window "
                f"of data.len={self.train_len} needs {needed}"
            )

    # -- preparation ------------------------------------------------------------------------
    def _prepare(
        self,
        *,
        dataset,
        dataset_config,
        validation_split,
        train_files,
        validation_files,
        text_field,
        tokenizer,
        vocab_size,
        validation_fraction,
    ):
        import numpy as np

        if dataset is None:  # one source: TextDataConfig.check
            splits, source, load_rows = text_corpus.file_source(
                train_files, validation_files, text_field, self.cache_dir
            )
        else:
            splits, source, load_rows = text_corpus.dataset_source(
                dataset, dataset_config, validation_split, text_field, self.cache_dir
            )
        carved = "validation" not in splits
        train_key = settings_key(
            {
                "train": splits["train"],
                "carved": validation_fraction if carved else None,
                "text_field": text_field,
            }
        )
        rows = functools.cache(
            lambda: text_corpus.split_rows(load_rows, carved, validation_fraction)
        )
        self.tokenizer, tokenizer_sha, tokenizer_hit = text_prep.load_tokenizer(
            tokenizer, vocab_size, lambda: rows()[0], train_key, self.cache_dir, self.progress
        )
        key = settings_key(
            {
                "train": train_key,
                "validation": splits.get("validation"),
                "tokenizer": tokenizer_sha,
                "version": text_prep.CACHE_VERSION,
            }
        )
        corpus_dir = self.cache_dir / "corpora" / key
        hit = (corpus_dir / "info.json").is_file()
        if hit and (damage := text_corpus.damage(corpus_dir)) is not None:  # e.g. a copy cut short
            print(
                f"note: cached corpus {corpus_dir} is damaged ({damage}); rebuilding it",
                file=sys.stderr,
            )
            shutil.rmtree(corpus_dir, ignore_errors=True)
            hit = False
        if not hit:
            text_corpus.tokenise(corpus_dir, rows, self.tokenizer, self.progress)
        info = json.loads((corpus_dir / "info.json").read_text())
        self.train_ids = np.load(corpus_dir / "train.npy", mmap_mode="r")
        self.val_ids = np.load(corpus_dir / "validation.npy", mmap_mode="r")
        self.val_bytes = np.load(corpus_dir / "validation_bytes.npy", mmap_mode="r")
        self.vocab_size = self.tokenizer.get_vocab_size()
        self.source = source
        self.split_rule = info["split_rule"]
        self.tokenizer_info = {
            "spec": tokenizer,
            "vocab_size": self.vocab_size,
            "sha256": tokenizer_sha,
            "byte_level": text_prep.byte_level_lengths(self.tokenizer) is not None,
        }
        self.cache = {
            "dir": str(self.cache_dir),
            "key": key,
            "hit": hit,
            "tokenizer_hit": tokenizer_hit,
        }

    # -- interface of the run (lengen.data.source.DataSource) ---------------------------------
    cheap_to_build = False
    evaluation_kind = "text"  # lengen.evaluation.text scores it

    @classmethod
    def validate_config(cls, cfg) -> None:
        """The data node's options (``TextDataConfig``: each value, the source, the files
        named) and the text evaluation's keys; ConfigError naming the key."""
        from omegaconf import OmegaConf

        from lengen.model.config import model_config

        try:
            options = model_config(cfg.model.get("_target_"))
            if options is not None:  # a user's model: its kind is read when it is built
                check_model_kind(options.kind)
            options = cls.Options.from_node(OmegaConf.to_container(cfg.data, resolve=True))
            options.check()
            options.check_files()
            text_prep.check_text_eval(cfg)
            refusal = cache_refusal(os.path.expanduser(str(options.cache_dir)), "data.cache_dir")
            if refusal is not None:  # trained tokenizers and tokenised corpora go there
                raise ConfigError(refusal)
        except ConfigError:
            raise
        except ValueError as error:
            raise ConfigError(str(error)) from None

    @classmethod
    def planned_positions(cls, cfg, lengths: list[int]) -> dict:
        """A window of L tokens has positions 0 … L−1 (``max_position``)."""
        return {"train_positions": int(cfg.data.len), "max_positions": max(lengths)}

    def card(self, eval_lengths: list[int]) -> None:
        return None  # describe() records the corpus, tokenizer and split rule

    def check_eval_lengths(self, lengths: list[int]) -> None:
        available = self.val_ids.shape[0] - 1  # targets of the validation stream
        if max(lengths) > available:
            raise ValueError(
                f"eval.lengths: length {max(lengths)} needs {max(lengths)} scored tokens, but "
                f"the validation split has {available}; allowed: lengths up to {available}"
            )

    def check_sampling(self) -> None:
        """Any window of the training stream is a training instance: nothing to refuse."""

    axes = 1  # positions on one axis: token index

    def max_position(self, length: int) -> int:
        return length

    def sequence_length(self, length: int) -> int:
        return length

    def windows(self, ids, starts, length: int) -> dict:
        """Windows of length + 1 tokens at ``starts`` -> inputs (B, length), targets (B, length)."""
        import numpy as np
        import torch

        index = np.asarray(starts, dtype=np.int64)[:, None] + np.arange(length + 1)  # (B, L+1)
        tokens = torch.from_numpy(np.asarray(ids[index], dtype=np.int64))  # (B, L+1)
        return {"inputs": {"tokens": tokens[:, :-1]}, "targets": tokens[:, 1:]}

    def train_batch(self, step: int) -> dict:
        """Random windows of ``data.len`` tokens: a pure function of (seed, step)."""
        import torch

        from lengen.data.source import mix_seed

        generator = torch.Generator().manual_seed(mix_seed(self.seed, step))
        high = self.train_ids.shape[0] - self.train_len  # a window needs len + 1 tokens
        starts = torch.randint(0, high, (self.batch_size,), generator=generator)
        return self.windows(self.train_ids, starts.numpy(), self.train_len)

    def train_batches(self, start_step: int = 0):
        step = start_step
        while True:
            yield self.train_batch(step)
            step += 1

    def val_batches(self) -> list[dict]:
        """The first ``val_samples`` disjoint windows of length ``data.len`` of validation."""
        import numpy as np

        count = min(self.val_samples, (self.val_ids.shape[0] - 1) // self.train_len)
        starts = np.arange(count) * self.train_len
        return [
            self.windows(self.val_ids, chunk, self.train_len)
            for chunk in np.array_split(starts, math.ceil(count / self.batch_size))
        ]

    def training_summary(self) -> str:
        """E.g. "trained on 128-token windows of test.txt; evaluated on valid.txt"."""

        def name(split: str) -> str:
            if "files" in self.source:
                files = self.source["files"].get(split)
                return ", ".join(Path(f).name for f in files) if files else "?"
            return f"{self.source['dataset']}[{self.source['splits'].get(split, '?')}]"

        given = "validation" in self.source.get("files", self.source.get("splits", {}))
        evaluated = name("validation") if given else f"the last part carved off {name('train')}"
        return (
            f"trained on {self.train_len}-token windows of {name('train')}; evaluated on "
            f"{evaluated}"
        )

    def describe(self) -> dict:
        return {
            "task": "text",
            "source": self.source,
            "split_rule": self.split_rule,
            "tokenizer": self.tokenizer_info,
            "vocab_size": self.vocab_size,
            "train_tokens": int(self.train_ids.shape[0]),
            "validation_tokens": int(self.val_ids.shape[0]),
            "train_lengths": [self.min_len, self.train_len],
            "cache": self.cache,
        }


def check_model_kind(kind: str) -> None:
    if kind != "decoder":
        raise ValueError(
            f"model: data=text trains causal language models; allowed: model=decoder, got a "
            f"model of kind {kind!r}"
        )
