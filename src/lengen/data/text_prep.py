"""Text corpora for language modelling: sources, tokenizers and the on-disk cache (docs/data.md).

One path for every source, through Hugging Face ``datasets``: local files (``data.files``:
plain text, JSON lines or parquet; a path, a glob or a list) or a dataset (``data.dataset``: a
hub name or a local directory). Rows become one token stream per split: each row's text,
followed by a newline where it does not end with one (empty rows are dropped).

Tokenizers come from Hugging Face ``tokenizers``: ``bpe`` (byte-level BPE trained on the training
split), ``char``, ``byte``, ``word`` (whitespace-separated words plus ``<eos>`` at each line end,
for WikiText's pre-tokenised text), or a path to a ``tokenizer.json``. Trained tokenizers and
tokenised splits are cached under ``data.cache_dir``, keyed by the content of the sources and
every setting that changes the tokens, so a second run with the same data starts at once.

Heavy libraries (numpy, datasets, tokenizers) are imported inside functions: importing this
module is cheap, so a run's text keys are checked before anything (``TextData.validate_config``:
the options in ``lengen.data.text.TextDataConfig``, the evaluation's in :func:`check_text_eval`).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from lengen.atomic import atomic_write

TOKENIZER_KINDS = ("bpe", "char", "byte", "word")
#: bump when the way tokens or bytes are computed changes: old cache entries stop matching
CACHE_VERSION = 1
EOS = "<eos>"
UNK = "[UNK]"
_BUILDERS = {
    ".txt": "text",
    ".text": "text",
    ".json": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
}
#: where a user reads how to get the text data (the refusal for missing files names it)
GETTING_DATA = 'docs/data.md, "Getting the text data"'
_ROWS_PER_CHUNK = 2048  # rows encoded per encode_batch call (one progress-bar tick)


# -- files ------------------------------------------------------------------------------------
def _as_list(spec) -> list[str]:
    if spec is None:
        return []
    if isinstance(spec, str | os.PathLike):
        return [str(spec)]
    return [str(item) for item in spec]


def expand_files(key: str, spec) -> list[Path]:
    """``data.files.<split>`` (a path, a glob or a list of them) -> the files, sorted per entry.

    Raises ValueError naming ``key`` when an entry matches no file."""
    files: list[Path] = []
    for entry in _as_list(spec):
        pattern = os.path.expanduser(entry)
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not glob.has_magic(pattern) and os.path.exists(pattern) and not Path(pattern).is_file():
            # a FIFO or device was reported as "no file matches" (X05): it is there, but the
            # corpus is read twice (its hash, then its rows), which only a regular file allows
            kind = "a folder" if Path(pattern).is_dir() else "not a regular file (a FIFO or device)"
            raise ValueError(
                f"{key}: {entry!r} is {kind}; allowed: a path, a glob or a list of regular text "
                f"(.txt), JSON lines (.json, .jsonl) or parquet files"
            )
        matches = [m for m in matches if Path(m).is_file()]
        if not matches:
            # a fresh clone has no ../shared/data: the line says where the recipes' data
            # comes from, not only that it is missing
            raise ValueError(
                f"{key}: no file matches {entry!r} (relative paths are taken from the current "
                f"directory {os.getcwd()}); allowed: a path, a glob or a list of text (.txt), "
                f"JSON lines (.json, .jsonl) or parquet files; to get WikiText-2 and the other "
                f"text sets (local files, or the hub with data.dataset): {GETTING_DATA}"
            )
        files += [Path(m).resolve() for m in matches]
    return files


def file_builder(key: str, files: list[Path]) -> str:
    """The ``datasets`` builder of these files (one format per split)."""
    builders = {_BUILDERS.get(f.suffix.lower()) for f in files}
    if None in builders or len(builders) != 1:
        suffixes = sorted({f.suffix or "(none)" for f in files})
        raise ValueError(
            f"{key}: cannot tell the format of files ending {', '.join(suffixes)}; allowed: one "
            f"of {', '.join(_BUILDERS)} per split"
        )
    return builders.pop()


def check_text_files(key: str, files: list[Path], builder: str) -> None:
    """Refuse, naming ``key``, a file that is empty, or for plain text binary or not UTF-8:
    found here, before ``datasets`` prints its progress bars and fails deep inside."""
    for path in files:
        stat = path.stat()
        if stat.st_size == 0:
            raise ValueError(f"{key}: {path} is empty; allowed: files holding text")
        if builder != "text":
            continue
        problem = _utf8_problem(path, stat.st_size, stat.st_mtime_ns)
        if problem is not None:
            raise ValueError(f"{key}: {path} {problem}")


@functools.lru_cache(maxsize=64)
def _utf8_problem(path: Path, size: int, mtime_ns: int) -> str | None:
    """Why a file is not UTF-8 text, or None; read once per (file, size, mtime) in a process
    (the entry point's check and the run's validation read a corpus once, not twice)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    text = False  # a character other than whitespace seen (5,000 newlines trained: X03)
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            text = text or bool(block.strip())
            if b"\0" in block:
                return "holds NUL bytes (a binary file?); allowed: UTF-8 text"
            try:
                decoder.decode(block)
            except UnicodeDecodeError as error:
                return (
                    f"is not UTF-8 ({error.reason} at byte {error.start} of a block); allowed: "
                    f"UTF-8 text (convert it, e.g. iconv -f latin1 -t utf-8)"
                )
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return "ends inside a UTF-8 character; allowed: UTF-8 text"
    if not text:
        return "holds only whitespace (blank lines), nothing to model; allowed: files holding text"
    return None


def count_lines(path: Path, at_most: int) -> int:
    """Lines (rows of the ``text`` builder) of a file, counted up to ``at_most``: read in blocks,
    a final line without a newline counted too."""
    lines, last = 0, b"\n"
    with open(path, "rb") as handle:
        while lines < at_most and (block := handle.read(1 << 22)):
            lines += block.count(b"\n")
            last = block[-1:]
    return min(lines + (last != b"\n"), at_most)


def content_hash(files: Iterable[Path]) -> str:
    """sha256 of the files' bytes (and sizes, so concatenations cannot collide)."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.stat().st_size}:".encode())
        with open(path, "rb") as handle:
            while block := handle.read(1 << 22):
                digest.update(block)
    return digest.hexdigest()


def settings_key(settings: Mapping) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:20]


# -- loading: local sources touch no network and write only under data.cache_dir ------------
#: the variables that keep ``datasets`` and ``huggingface_hub`` off the network
OFFLINE_VARIABLES = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")


def datasets_cache(cache_dir: Path) -> Path:
    """Where ``datasets`` keeps its Arrow copies of local sources: ``<data.cache_dir>/datasets``
    (not ``~/.cache/huggingface``). Hub datasets stay in Hugging Face's own cache."""
    return Path(cache_dir) / "datasets"


@contextlib.contextmanager
def local_only():
    """No network while loading local sources (``data.files``, a local ``data.dataset``).

    ``datasets`` pings the hub (a download counter for its packaged ``text``/``json``/``parquet``
    builders: a DNS lookup and a connection attempt) unless offline. Both libraries read
    ``HF_DATASETS_OFFLINE``/``HF_HUB_OFFLINE`` once, when imported, into module flags; inside this
    block the variables are ``1`` and the flags on, and both are put back afterwards, so a hub
    dataset loaded later in the same process (another run of a sweep) still reaches the hub.
    """
    import datasets.config
    from huggingface_hub import constants

    saved_env = {name: os.environ.get(name) for name in OFFLINE_VARIABLES}
    flags = [(datasets.config, "HF_HUB_OFFLINE"), (datasets.config, "HF_DATASETS_OFFLINE")]
    flags.append((constants, "HF_HUB_OFFLINE"))
    saved_flags = [getattr(module, name) for module, name in flags]
    os.environ.update(dict.fromkeys(OFFLINE_VARIABLES, "1"))
    for module, name in flags:
        setattr(module, name, True)
    try:
        yield
    finally:
        for (module, name), value in zip(flags, saved_flags, strict=True):
            setattr(module, name, value)
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# -- rows -> stream ----------------------------------------------------------------------------
def stream_rows(texts: Iterable[str]) -> list[str]:
    """A split's rows as the pieces of its stream: newline-terminated, empty rows dropped."""
    return [t if t.endswith("\n") else t + "\n" for t in texts if t]


def carve(rows: list[str], fraction: float) -> tuple[list[str], list[str], dict]:
    """Split one split's rows into (train, validation): validation is the tail of whole rows
    holding about ``fraction`` of the characters. Deterministic; the rule is returned."""
    import numpy as np

    chars = np.cumsum([len(r) for r in rows])  # one int per row, not per token
    total = int(chars[-1]) if len(rows) else 0
    cut = int(np.searchsorted(chars, (1 - fraction) * total, side="left")) + 1
    cut = min(max(cut, 1), len(rows) - 1) if len(rows) > 1 else len(rows)
    rule = {
        "validation": "carved",
        "rule": f"the last rows holding {fraction:g} of the characters of the training split "
        f"(data.validation_fraction); rows {cut}..{len(rows) - 1} of {len(rows)}",
        "validation_fraction": fraction,
        "first_validation_row": cut,
    }
    return rows[:cut], rows[cut:], rule


# -- tokenizers --------------------------------------------------------------------------------
def byte_alphabet() -> list[str]:
    """GPT-2's printable stand-in character of each byte value 0..255 (ByteLevel's mapping)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in keep:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def new_tokenizer(kind: str, vocab_size: int | None, train_rows: list[str], progress: bool):
    """A tokenizer of this kind, trained on ``train_rows`` where the kind learns a vocabulary."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if kind == "byte":  # id = byte value; no merges, nothing learned
        vocab = {char: byte for byte, char in enumerate(byte_alphabet())}
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tokenizer.decoder = decoders.ByteLevel()
        return tokenizer
    if kind == "bpe":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=progress,
        )
    elif kind == "char":  # every character of the training split; unseen ones map to [UNK]
        alphabet = sorted(set().union(*map(set, train_rows))) if train_rows else []
        vocab = {char: i for i, char in enumerate([UNK, *alphabet])}
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))
        tokenizer.decoder = decoders.Fuse()
        return tokenizer
    elif kind == "word":  # whitespace-separated words; a line end is the word <eos>
        tokenizer = Tokenizer(models.WordLevel(unk_token=UNK))
        tokenizer.normalizer = normalizers.Replace("\n", f" {EOS} ")
        tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        trainer = trainers.WordLevelTrainer(
            vocab_size=vocab_size or 1 << 31, special_tokens=[UNK, EOS], show_progress=progress
        )
    else:
        raise ValueError(f"data.tokenizer must be one of {', '.join(TOKENIZER_KINDS)} or a path")
    tokenizer.train_from_iterator(train_rows, trainer, length=len(train_rows))
    return tokenizer


def load_tokenizer(
    spec: str,
    vocab_size: int | None,
    train_rows,
    train_key: str,
    cache_dir: Path,
    progress: bool,
):
    """(tokenizer, its sha256, cache hit?) for ``data.tokenizer``: a kind or a tokenizer.json.

    ``train_rows`` is a callable giving the training rows (only called when one is trained)."""
    from tokenizers import Tokenizer

    if spec not in TOKENIZER_KINDS:
        text = Path(spec).expanduser().read_text()
        return Tokenizer.from_str(text), hashlib.sha256(text.encode()).hexdigest(), True
    learned = spec in ("bpe", "char", "word")  # byte has nothing to learn
    settings = {
        "kind": spec,
        "vocab_size": vocab_size if spec in ("bpe", "word") else None,
        "train": train_key if learned else None,
        "version": CACHE_VERSION,
    }
    path = cache_dir / "tokenizers" / f"{spec}-{settings_key(settings)}.json"
    tokenizer = _cached_tokenizer(path)
    hit = tokenizer is not None
    if hit:
        text = path.read_text()
    else:
        tokenizer = new_tokenizer(spec, vocab_size, train_rows() if learned else [], progress)
        text = tokenizer.to_str()
        atomic_write(path, text)
    return tokenizer, hashlib.sha256(text.encode()).hexdigest(), hit


def _cached_tokenizer(path: Path):
    """The tokenizer cached at ``path``, or None: none there, or a damaged file (truncated by a
    full disk or a copy), which is said in one line and rebuilt, so a bad cache entry does not
    fail every later run until someone deletes it."""
    from tokenizers import Tokenizer

    if not path.is_file():
        return None
    try:
        return Tokenizer.from_str(path.read_text())
    except Exception as error:  # noqa: BLE001 - whatever the damage, the entry is rebuilt
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:120]
        print(
            f"note: cached tokenizer {path} is damaged ({reason}); rebuilding it", file=sys.stderr
        )
        return None


# -- encoding ---------------------------------------------------------------------------------
def byte_level_lengths(tokenizer):
    """Bytes of every vocabulary entry -> int32 (V,), for byte-level tokenizers (each character
    of a token stands for one byte); None for other tokenizers."""
    import numpy as np

    if type(tokenizer.pre_tokenizer).__name__ != "ByteLevel":
        return None
    lengths = np.zeros(tokenizer.get_vocab_size(), dtype=np.int32)
    for token, index in tokenizer.get_vocab().items():  # once per vocabulary entry
        lengths[index] = len(token)
    return lengths


def encode_stream(tokenizer, rows: list[str], *, with_bytes: bool, desc: str, progress: bool):
    """rows -> (ids int32 (N,), bytes int32 (N,) or None): one stream, no special tokens.

    ``bytes[i]`` is the number of UTF-8 bytes of text that token i accounts for. Byte-level
    tokenizers (``bpe``, ``byte``, GPT-2-style tokenizer.json files): the token's own bytes,
    which partition the text exactly. Others (``char``, ``word``): the token's characters plus
    the whitespace or separators since the previous token's end (from the tokenizer's offsets),
    so the tokens still account for all of the text, whatever the tokenizer drops (``word``
    drops spaces). Work is per chunk of rows, never per token in Python."""
    import numpy as np
    from tqdm.auto import tqdm

    table = byte_level_lengths(tokenizer) if with_bytes else None
    with_offsets = with_bytes and table is None

    ids_parts, end_parts = [], []
    row_start = 0  # character offset of the current row in the joined stream
    with tqdm(total=len(rows), desc=desc, unit="rows", disable=not progress) as bar:
        for first in range(0, len(rows), _ROWS_PER_CHUNK):
            chunk = rows[first : first + _ROWS_PER_CHUNK]
            encodings = tokenizer.encode_batch(chunk, add_special_tokens=False)
            for row, encoding in zip(chunk, encodings, strict=True):
                ids_parts.append(np.asarray(encoding.ids, dtype=np.int32))
                if with_offsets:
                    offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
                    end_parts.append(row_start + offsets[:, 1])
                row_start += len(row)
            bar.update(len(chunk))
    ids = np.concatenate(ids_parts) if ids_parts else np.zeros(0, dtype=np.int32)
    if not with_bytes:
        return ids, None
    if table is not None:
        return ids, table[ids]
    # UTF-8 length of every character of the stream, then bytes up to each token's end
    codes = np.frombuffer("".join(rows).encode("utf-32-le"), dtype=np.uint32)
    char_bytes = 1 + (codes >= 0x80) + (codes >= 0x800) + (codes >= 0x10000)  # (chars,)
    byte_at = np.concatenate([[0], np.cumsum(char_bytes, dtype=np.int64)])  # (chars + 1,)
    ends = np.concatenate(end_parts) if end_parts else np.zeros(0, dtype=np.int64)
    end_bytes = np.maximum.accumulate(byte_at[ends]) if len(ends) else ends
    token_bytes = np.diff(end_bytes, prepend=0).astype(np.int32)
    return ids, token_bytes


# -- the text evaluation's keys (checked by TextData.validate_config, before heavy imports) ----
def check_text_eval(cfg) -> None:
    """Check text evaluation's keys against the run's evaluation lengths (``eval.stride``,
    ``eval.max_tokens``); each value on its own is ``lengen.options.EvalConfig``'s, checked
    before this. ValueError naming the key."""
    from lengen.checks import positive_int
    from lengen.config import eval_lengths

    settings = cfg.eval
    if settings.get("decoding", "teacher_forced") != "teacher_forced":
        # language modelling is scored by perplexity under eval.protocol; a decoding protocol
        # was ignored without a word, the rows saying nonoverlap (T09)
        raise ValueError(
            f"eval.decoding={settings.decoding}: text is scored by perplexity (eval.protocol="
            f"{settings.get('protocol')}), not by decoding answers; allowed: "
            f"eval.decoding=teacher_forced with data=text"
        )
    lengths = eval_lengths(cfg)
    if settings.stride is not None and settings.stride > min(lengths):
        raise ValueError(
            f"eval.stride must be <= every eval length (else tokens go unscored); got "
            f"{settings.stride} with eval lengths {lengths}"
        )
    if settings.max_tokens is not None:
        positive_int("eval.max_tokens", settings.max_tokens, max(lengths))
