"""Where a text corpus comes from and how its tokenised splits are built on disk: the sources
(``data.files`` or ``data.dataset``) as functions that load each split's rows, the rows of each
split (a validation split given or carved off), the tokenised arrays written atomically under
``data.cache_dir``, and the check that a cached copy is whole. ``TextData`` (``lengen.data.text``)
puts them together; tokenizers, streams and cache keys are ``text_prep``'s.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from lengen.data import text_prep
from lengen.data.text_prep import content_hash, expand_files, file_builder


def file_source(train_files, validation_files, text_field, cache_dir: Path):
    """``data.files``: (splits with their content hashes, the source as the data card names it,
    load_rows(split) -> the split's text column); files are read locally, cached in
    ``cache_dir``."""
    found = {"train": expand_files("data.files.train", train_files)}
    if validation_files is not None:
        found["validation"] = expand_files("data.files.validation", validation_files)
    builders = {split: file_builder(f"data.files.{split}", fs) for split, fs in found.items()}
    splits = {
        split: {"sha256": content_hash(fs), "builder": builders[split]}
        for split, fs in found.items()
    }
    source = {
        "files": {split: [str(f) for f in fs] for split, fs in found.items()},
        "sha256": {split: s["sha256"] for split, s in splits.items()},
    }

    def load_rows(split):
        from datasets import load_dataset

        builder = builders[split]
        extra = {"keep_linebreaks": True} if builder == "text" else {}
        files = [str(f) for f in found[split]]
        with text_prep.local_only():  # local files: no network, cache in data.cache_dir
            table = load_dataset(
                builder,
                data_files=files,
                split="train",
                cache_dir=str(text_prep.datasets_cache(cache_dir)),
                **extra,
            )
        field = "text" if builder == "text" else text_field  # plain text: the lines
        return column(table, field, f"data.files.{split}")

    return splits, source, load_rows


def dataset_source(dataset, dataset_config, validation_split, text_field, cache_dir: Path):
    """``data.dataset`` (a local dataset directory, a directory of data files or a hub name):
    (splits with their fingerprints, the source as the data card names it, load_rows)."""
    from datasets import load_dataset, load_from_disk

    local = Path(os.path.expanduser(str(dataset)))
    if local.is_dir() and (
        (local / "dataset_dict.json").is_file() or (local / "state.json").is_file()
    ):
        with text_prep.local_only():
            loaded = load_from_disk(str(local))  # written by save_to_disk
    elif local.is_dir():  # a directory of data files: no network, cache in data.cache_dir
        with text_prep.local_only():
            loaded = load_dataset(
                str(local),
                dataset_config,
                cache_dir=str(text_prep.datasets_cache(cache_dir)),
            )
    else:  # a hub name: Hugging Face's cache (HF_HOME), and the network the first time
        try:
            loaded = load_dataset(dataset, dataset_config)
        except Exception as error:  # noqa: BLE001 - offline, unknown or uncached: one line
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise ValueError(
                f"data.dataset={dataset}: cannot load it from the hub (offline, not cached, "
                f"or no such dataset: {first[:200]}); allowed: a local dataset directory, "
                f"data.files.train, or a run with network access to cache it first"
            ) from None
    if not hasattr(loaded, "keys"):  # a single Dataset: its rows are the training split
        loaded = {"train": loaded}
    if "train" not in loaded:
        raise ValueError(
            f"data.dataset: {dataset!r} has no 'train' split; it has {sorted(loaded.keys())}"
        )
    names = {"train": "train"}
    if validation_split in loaded:
        names["validation"] = validation_split
    splits = {split: {"fingerprint": loaded[name]._fingerprint} for split, name in names.items()}
    source = {
        "dataset": str(dataset),
        "dataset_config": dataset_config,
        "splits": names,
        "fingerprint": {split: s["fingerprint"] for split, s in splits.items()},
    }

    def load_rows(split):
        return column(loaded[names[split]], text_field, "data.dataset")

    return splits, source, load_rows


def split_rows(load_rows, carved: bool, fraction: float):
    """(train rows, validation rows, split rule), each row newline-terminated."""
    train = text_prep.stream_rows(load_rows("train"))
    if not carved:
        return train, text_prep.stream_rows(load_rows("validation")), {"validation": "given"}
    return text_prep.carve(train, fraction)


def tokenise(corpus_dir: Path, rows, tokenizer, progress) -> None:
    """Tokenise ``rows()`` (train, validation, split rule) into ``corpus_dir``: train.npy,
    validation.npy, validation_bytes.npy and info.json, all or none (one rename)."""
    import tempfile

    import numpy as np

    train_rows, val_rows, rule = rows()
    train_ids, _ = text_prep.encode_stream(
        tokenizer,
        train_rows,
        with_bytes=False,
        desc="tokenise train",
        progress=progress,
    )
    val_ids, val_bytes = text_prep.encode_stream(
        tokenizer,
        val_rows,
        with_bytes=True,
        desc="tokenise validation",
        progress=progress,
    )
    corpus_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=corpus_dir.parent, prefix=f".{corpus_dir.name}."))
    try:
        np.save(tmp / "train.npy", train_ids)
        np.save(tmp / "validation.npy", val_ids)
        np.save(tmp / "validation_bytes.npy", val_bytes)
        info = {
            "split_rule": rule,
            "train_tokens": int(train_ids.shape[0]),
            "validation_tokens": int(val_ids.shape[0]),
            "validation_bytes": int(val_bytes.sum()),
        }
        (tmp / "info.json").write_text(json.dumps(info, indent=2) + "\n")
        os.replace(tmp, corpus_dir)  # atomic: a reader sees all files or none
    except OSError:
        if not (corpus_dir / "info.json").is_file():  # not a concurrent run's finished copy
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def damage(corpus_dir: Path) -> str | None:
    """What is wrong with a cached corpus (None: it reads): its info, or an array shorter than
    its header says (a truncated copy), each read as the run will read it."""
    import numpy as np

    try:
        info = json.loads((corpus_dir / "info.json").read_text())
        counts = {"train": info["train_tokens"], "validation": info["validation_tokens"]}
        for name in ("train", "validation", "validation_bytes"):
            array = np.load(corpus_dir / f"{name}.npy", mmap_mode="r")
            expected = counts.get(name, counts["validation"])
            if array.shape != (expected,):
                return f"{name}.npy holds {array.shape[0]} tokens, info.json says {expected}"
    except (OSError, ValueError, KeyError, TypeError) as error:
        return f"{type(error).__name__}: {str(error)[:100]}"
    return None


def column(table, text_field: str, key: str):
    """The ``text_field`` column of ``table``; ValueError naming ``key`` where it has none."""
    if text_field not in table.column_names:
        raise ValueError(
            f"data.text_field: no column {text_field!r} in {key}; allowed: "
            f"{', '.join(table.column_names)}"
        )
    return table[text_field]
