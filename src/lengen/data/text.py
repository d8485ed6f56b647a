"""Language modelling on real text: ``data=text`` (docs/data.md).

``TextData`` has the duck-typed interface of ``TaskData``: the run builds it, Lightning trains on
``train_batch(step)`` (random windows of ``data.len`` tokens, a pure function of (seed, step)),
validates on ``val_batches()`` (disjoint windows at ``data.len``), and after training
``evaluate()`` scores the validation stream at every eval length under ``eval.protocol``:

* ``nonoverlap`` — disjoint windows of length L, every token scored (Press et al., 2022, main
  results);
* ``sliding`` — windows advanced by ``eval.stride`` S, each scoring only its last S tokens (the
  first window scores all), so every scored token sees at least L − S tokens of context.

Both score exactly the same stretch: the first M targets of the validation stream (tokens 1..M;
M = ``eval.max_tokens`` or all), at every length. When the windows do not end exactly at M, one
last window of length L is aligned to end at M and scores only the tokens not yet scored; so
``nonoverlap`` is ``sliding`` with S = L, by construction.

Corpus preparation (sources, tokenizers, cache) lives in ``text_prep.py``. torch, numpy,
datasets and tokenizers are imported inside functions: importing this module is cheap.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

from lengen.data import text_prep
from lengen.data.text_prep import content_hash, expand_files, file_builder, settings_key

IGNORE = -100  # cross-entropy ignore_index (as lengen.data.datamodule.IGNORE)
LOGITS_BUDGET = 1 << 26  # logits elements per evaluation batch (256 MiB in fp32)


def window_plan(n_targets: int, length: int, stride: int):
    """Windows scoring exactly targets 1..n_targets of a stream -> (starts, first_scored).

    Window k reads tokens [starts[k], starts[k] + length) and predicts the next token at each
    position; it scores positions first_scored[k] … length − 1 of its own. Needs
    length <= n_targets and 1 <= stride <= length."""
    import numpy as np

    if not 1 <= stride <= length <= n_targets:
        raise ValueError(
            f"need 1 <= stride <= length <= n_targets, got {stride, length, n_targets}"
        )
    starts = np.arange(0, n_targets - length + 1, stride, dtype=np.int64)  # (W,)
    first = np.full(len(starts), length - stride, dtype=np.int64)
    first[0] = 0
    covered = int(starts[-1]) + length  # targets 1..covered are scored so far
    if covered < n_targets:  # one last window ending at n_targets scores the rest
        starts = np.append(starts, n_targets - length)
        first = np.append(first, length - (n_targets - covered))
    return starts, first


class TextData:
    """Token streams of a text corpus, served as windows for a causal language model.

    Args:
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
        model_kind, seed, eval_seed: given by the run.
        progress: progress bars while training the tokenizer and tokenising.
    """

    def __init__(
        self,
        *,
        len: int,  # noqa: A002 - the contract's key is data.len
        dataset: str | None = None,
        dataset_config: str | None = None,
        validation_split: str = "validation",
        files: Mapping | None = None,
        text_field: str = "text",
        tokenizer: str = "bpe",
        vocab_size: int | None = 4096,
        validation_fraction: float = 0.05,
        cache_dir: str = "~/.cache/lengen",
        batch_size: int = 16,
        val_samples: int = 64,
        model_kind: str = "decoder",
        seed: int = 0,
        eval_seed: int = 1234,
        progress: bool = True,
    ) -> None:
        from lengen.checks import positive_int

        if model_kind != "decoder":
            raise ValueError(
                f"model: data=text trains causal language models; allowed: model=decoder, got "
                f"a model of kind {model_kind!r}"
            )
        for key, value in (("data.len", len), ("data.batch_size", batch_size)):
            positive_int(key, value)
        positive_int("data.val_samples", val_samples)
        files = dict(files or {})
        self.train_len = len
        # a causal LM trained on windows of T tokens is trained at every prefix length 1..T
        self.min_len = 1
        self.batch_size = batch_size
        self.val_samples = val_samples
        self.model_kind = model_kind
        self.seed = seed
        self.eval_seed = eval_seed
        self.progress = progress
        self.cache_dir = Path(os.path.expanduser(str(cache_dir)))
        self._prepare(
            dataset=dataset,
            dataset_config=dataset_config,
            validation_split=validation_split,
            train_files=files.get("train"),
            validation_files=files.get("validation"),
            text_field=text_field,
            tokenizer=str(tokenizer),
            vocab_size=vocab_size,
            validation_fraction=validation_fraction,
        )
        if self.train_ids.shape[0] < len + 1:
            raise ValueError(
                f"data.len: the training split has {self.train_ids.shape[0]} tokens; a window "
                f"of data.len={len} needs {len + 1}"
            )
        if self.val_ids.shape[0] < len + 1:
            raise ValueError(
                f"data.len: the validation split has {self.val_ids.shape[0]} tokens; a window "
                f"of data.len={len} needs {len + 1}"
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

        if (dataset is None) == (train_files is None):
            raise ValueError(
                "data.files.train: give exactly one source; allowed: data.files.train or "
                "data.dataset"
            )
        if dataset is None:
            splits, source, load_rows = self._file_source(train_files, validation_files, text_field)
        else:
            splits, source, load_rows = self._dataset_source(
                dataset, dataset_config, validation_split, text_field
            )
        carved = "validation" not in splits
        train_key = settings_key(
            {
                "train": splits["train"],
                "carved": validation_fraction if carved else None,
                "text_field": text_field,
            }
        )
        rows = functools.cache(lambda: self._rows(load_rows, carved, validation_fraction))
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
        if not hit:
            self._tokenise(corpus_dir, rows)
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

    def _file_source(self, train_files, validation_files, text_field):
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
            table = load_dataset(builder, data_files=files, split="train", **extra)
            field = "text" if builder == "text" else text_field  # plain text: the lines
            return _column(table, field, f"data.files.{split}")

        return splits, source, load_rows

    def _dataset_source(self, dataset, dataset_config, validation_split, text_field):
        from datasets import load_dataset, load_from_disk

        local = Path(os.path.expanduser(str(dataset)))
        if local.is_dir() and (
            (local / "dataset_dict.json").is_file() or (local / "state.json").is_file()
        ):
            loaded = load_from_disk(str(local))  # written by save_to_disk
        else:  # a hub name, or a directory of data files
            loaded = load_dataset(str(local) if local.is_dir() else dataset, dataset_config)
        if not hasattr(loaded, "keys"):  # a single Dataset: its rows are the training split
            loaded = {"train": loaded}
        if "train" not in loaded:
            raise ValueError(
                f"data.dataset: {dataset!r} has no 'train' split; it has {sorted(loaded.keys())}"
            )
        names = {"train": "train"}
        if validation_split in loaded:
            names["validation"] = validation_split
        splits = {
            split: {"fingerprint": loaded[name]._fingerprint} for split, name in names.items()
        }
        source = {
            "dataset": str(dataset),
            "dataset_config": dataset_config,
            "splits": names,
            "fingerprint": {split: s["fingerprint"] for split, s in splits.items()},
        }

        def load_rows(split):
            return _column(loaded[names[split]], text_field, "data.dataset")

        return splits, source, load_rows

    @staticmethod
    def _rows(load_rows, carved: bool, fraction: float):
        """(train rows, validation rows, split rule), each row newline-terminated."""
        train = text_prep.stream_rows(load_rows("train"))
        if not carved:
            return train, text_prep.stream_rows(load_rows("validation")), {"validation": "given"}
        return text_prep.carve(train, fraction)

    def _tokenise(self, corpus_dir: Path, rows) -> None:
        import shutil
        import tempfile

        import numpy as np

        train_rows, val_rows, rule = rows()
        train_ids, _ = text_prep.encode_stream(
            self.tokenizer,
            train_rows,
            with_bytes=False,
            desc="tokenise train",
            progress=self.progress,
        )
        val_ids, val_bytes = text_prep.encode_stream(
            self.tokenizer,
            val_rows,
            with_bytes=True,
            desc="tokenise validation",
            progress=self.progress,
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

    # -- interface of the run -----------------------------------------------------------------
    def max_position(self, length: int) -> int:
        return length

    def _windows(self, ids, starts, length: int) -> dict:
        """Windows of length + 1 tokens at ``starts`` -> inputs (B, length), targets (B, length)."""
        import numpy as np
        import torch

        index = np.asarray(starts, dtype=np.int64)[:, None] + np.arange(length + 1)  # (B, L+1)
        tokens = torch.from_numpy(np.asarray(ids[index], dtype=np.int64))  # (B, L+1)
        return {"inputs": {"tokens": tokens[:, :-1]}, "targets": tokens[:, 1:]}

    def train_batch(self, step: int) -> dict:
        """Random windows of ``data.len`` tokens: a pure function of (seed, step)."""
        import torch

        from lengen.data.datamodule import mix_seed

        generator = torch.Generator().manual_seed(mix_seed(self.seed, step))
        high = self.train_ids.shape[0] - self.train_len  # a window needs len + 1 tokens
        starts = torch.randint(0, high, (self.batch_size,), generator=generator)
        return self._windows(self.train_ids, starts.numpy(), self.train_len)

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
            self._windows(self.val_ids, chunk, self.train_len)
            for chunk in np.array_split(starts, math.ceil(count / self.batch_size))
        ]

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

    # -- evaluation -------------------------------------------------------------------------
    def evaluate(self, model, lengths, *, settings, output_dir=None, tag="", progress=True):
        """One row per length (perplexity, bits per byte), and the loss by position in the
        window written to ``loss_by_position<tag>.json`` / ``.png`` in ``output_dir``. Rows also
        carry ``seconds``, ``peak_mem_mb`` and ``batch_size`` (windows per batch, halved after
        an out-of-memory error)."""
        from lengen.measure import measured_with_oom_halving

        protocol = settings.get("protocol", "nonoverlap")
        stride = settings.get("stride")
        max_tokens = settings.get("max_tokens")
        available = self.val_ids.shape[0] - 1  # targets 1..N-1 of the validation stream
        n_targets = available if max_tokens is None else min(max_tokens, available)
        rows, by_position = [], {}
        for length in sorted(set(lengths)):
            if length > n_targets:
                raise ValueError(
                    f"eval.lengths: length {length} needs {length} scored tokens, but "
                    f"{n_targets} are available (validation split and eval.max_tokens)"
                )
            step = length if protocol == "nonoverlap" else min(stride or length, length)
            (row, position), cost = measured_with_oom_halving(
                lambda windows, length=length, step=step: self.score(
                    model, length, step, n_targets, windows, progress
                ),
                self.windows_per_batch(length, settings.max_tokens_per_batch),
                next(model.parameters()).device,
            )
            rows.append({**row, "protocol": protocol, "max_tokens": max_tokens, **cost})
            by_position[length] = position
        if output_dir is not None:
            write_position_report(
                Path(output_dir), tag, by_position, rows, self.train_len, protocol
            )
        return rows

    def windows_per_batch(self, length: int, max_tokens_per_batch: int) -> int:
        """Windows per batch within the token budget and the logits budget."""
        return max(
            1, min(max_tokens_per_batch // length, LOGITS_BUDGET // (length * self.vocab_size))
        )

    def score(self, model, length, stride, n_targets, per_batch, progress):
        """Score targets 1..n_targets with windows of ``length`` advanced by ``stride``,
        ``per_batch`` windows at a time."""
        import numpy as np
        import torch
        import torch.nn.functional as F
        from tqdm.auto import tqdm

        starts, first = window_plan(n_targets, length, stride)
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        position_loss = torch.zeros(length, dtype=torch.float64)
        position_count = torch.zeros(length, dtype=torch.float64)
        scored_bytes = 0
        offsets = torch.arange(length)
        with torch.no_grad():
            for begin in tqdm(
                range(0, len(starts), per_batch),
                desc=f"evaluate {length}",
                unit="batch",
                disable=not progress,
            ):
                chunk = starts[begin : begin + per_batch]
                batch = self._windows(self.val_ids, chunk, length)
                scored = (
                    offsets[None, :] >= torch.from_numpy(first[begin : begin + per_batch])[:, None]
                )
                logits = model(tokens=batch["inputs"]["tokens"].to(device))  # (B, L, V)
                nll = (
                    F.cross_entropy(
                        logits.float().flatten(0, 1),
                        batch["targets"].to(device).flatten(),
                        reduction="none",
                    )
                    .view(len(chunk), length)
                    .double()
                    .cpu()
                )  # (B, L)
                nll = torch.where(scored, nll, 0.0)
                position_loss += nll.sum(0)
                position_count += scored.sum(0)
                target_index = chunk[:, None] + 1 + np.arange(length)  # (B, L) stream indices
                scored_bytes += int(self.val_bytes[target_index][scored.numpy()].sum())
        model.train(was_training)
        total = float(position_loss.sum())
        tokens = int(position_count.sum())
        loss = total / tokens
        row = {
            "length": length,
            "in_distribution": length <= self.train_len,
            "max_position": self.max_position(length),
            "stride": stride,
            "n_examples": len(starts),
            "tokens_scored": tokens,
            "bytes_scored": scored_bytes,
            "loss": loss,
            "ppl": math.exp(loss) if loss < 700 else math.inf,
            "bits_per_byte": total / math.log(2) / scored_bytes if scored_bytes else None,
            "accuracy": None,
            "exact_match": None,
        }
        mean = (position_loss / position_count.clamp(min=1)).tolist()
        return row, {"loss": mean, "count": position_count.long().tolist()}


def _column(table, text_field: str, key: str):
    if text_field not in table.column_names:
        raise ValueError(
            f"data.text_field: no column {text_field!r} in {key}; allowed: "
            f"{', '.join(table.column_names)}"
        )
    return table[text_field]


def position_name(tag: str, suffix: str) -> str:
    return f"loss_by_position{tag}.{suffix}"


def write_position_report(output_dir: Path, tag, by_position, rows, train_len, protocol) -> None:
    """``loss_by_position<tag>.json`` (mean loss and count per window position, per length)
    and its plot. Position p is the (p+1)-th token of a window: it sees p tokens of context."""
    from lengen.results import atomic_write_text

    strides = {row["length"]: row["stride"] for row in rows}
    report = {
        "protocol": protocol,
        "train_len": train_len,
        "note": "position p of a window predicts its token from p tokens of context; "
        "loss is the mean over scored tokens at that position, count how many were scored",
        "lengths": {
            str(length): {
                "stride": strides[length],
                "loss": [round(v, 5) for v in values["loss"]],
                "count": values["count"],
            }
            for length, values in by_position.items()
        },
    }
    atomic_write_text(output_dir / position_name(tag, "json"), json.dumps(report) + "\n")
    plot_loss_by_position(report, output_dir / position_name(tag, "png"))


def plot_loss_by_position(report: dict, path: Path, bins: int = 40) -> None:
    """Mean loss vs position in the window, one line per eval length, training length marked:
    extrapolation failure shows as loss rising past it. Positions are averaged in up to
    ``bins`` geometrically growing bins (single positions at the start, where the loss falls
    fastest; wide bins far out, where a line would otherwise be noise), on a log axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for length, values in sorted(report["lengths"].items(), key=lambda kv: int(kv[0])):
        loss = np.asarray(values["loss"], dtype=np.float64)  # (L,)
        count = np.asarray(values["count"], dtype=np.float64)  # (L,)
        edges = np.unique(np.geomspace(1, len(loss) + 1, bins + 1).astype(int) - 1)  # from 0
        edges = np.append(edges[edges < len(loss)], len(loss))
        sums = np.add.reduceat(loss * count, edges[:-1])
        counts = np.add.reduceat(count, edges[:-1])
        keep = counts > 0
        centres = (edges[:-1] + edges[1:] - 1) / 2  # mean position of each bin
        ax.plot(centres[keep] + 1, sums[keep] / counts[keep], marker=".", label=f"length {length}")
    train_len = report["train_len"]
    ax.axvline(train_len, color="black", linestyle="--", linewidth=1,
               label=f"training length ({train_len})")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlabel("position in the window + 1 (tokens of context + 1)")
    ax.set_ylabel("loss (nats / token)")
    ax.set_title(f"loss by position · protocol {report['protocol']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
