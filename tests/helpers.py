"""Compose the real configs the way train.py does, without Hydra's runtime."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import os
import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

ROOT = Path(__file__).resolve().parents[1]
#: the config root the glob-driven tests read: lengen's, or LENGEN_CONFIG_DIR as lengen reads it
#: (tests/test_new_component.py runs them over a copy holding a new encoding and task)
CONFIG_DIR = Path(os.environ.get("LENGEN_CONFIG_DIR") or ROOT / "configs")


def compose_train(*overrides: str, fast: bool = True) -> DictConfig:
    """configs/train.yaml with overrides (and debug=fast unless fast=False): a copy of its own
    for each call, composed once per process (a compose reads ~60 yaml files: 0.15–0.3 s, and
    the glob-driven tests compose each choice in several tests)."""
    return copy.deepcopy(_composed(overrides, fast))


@functools.cache
def _composed(overrides: tuple[str, ...], fast: bool) -> DictConfig:
    """Hydra composes in two stages (``ConfigLoaderImpl._load_configuration_impl``): the
    defaults list, chosen by the group overrides (pe=…, model=…), merged into one config set to
    struct mode; then the value overrides (model.d_model=16, …), applied in order to that.
    The first stage is the cost and most tests vary only the second, so the first is composed
    once per group choice here and the second applied with Hydra's own function to a copy: the
    same config, the same errors (tests/test_helpers_compose.py compares the two ways)."""
    extra = ("debug=fast",) if fast else ()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"), _yaml_read_once():
        split = _split_overrides((*extra, *overrides))
        if split is None:  # hydra.*, deletions, additions, sweeps: Hydra's whole compose
            return compose(config_name="train", overrides=[*extra, *overrides])
    groups, values = split
    cfg = copy.deepcopy(_composed_groups(groups))
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import OmegaConfBaseException

    try:  # as ConfigLoaderImpl.load_configuration wraps OmegaConf's errors
        ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
    except OmegaConfBaseException as error:
        raise ConfigCompositionException().with_traceback(error.__traceback__) from error
    return cfg


@functools.cache
def _composed_groups(groups: tuple[str, ...]) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"), _yaml_read_once():
        return compose(config_name="train", overrides=list(groups))


#: (config source, file, mtime, size) -> Hydra's ConfigResult of that file, as first parsed
_PARSED: dict = {}


@contextlib.contextmanager
def _yaml_read_once():
    """While open, Hydra's file config source parses each yaml file once per process and hands
    each compose a copy of what it parsed (a copy costs a fifth of a parse; a compose reads
    ~20 files); a file changed since (its mtime or size) is parsed again."""
    from hydra._internal.core_plugins.file_config_source import FileConfigSource

    parse = FileConfigSource.load_config

    def load_config(self, config_path: str):
        name = self._normalize_file_name(config_path)
        try:
            stat = os.stat(os.path.realpath(os.path.join(self.path, name)))
        except OSError:  # Hydra's own error for a missing file
            return parse(self, config_path)
        key = (self.path, name, stat.st_mtime_ns, stat.st_size)
        if key not in _PARSED:
            _PARSED[key] = parse(self, config_path)
        first = _PARSED[key]
        return dataclasses.replace(first, config=copy.deepcopy(first.config),
                                   header=dict(first.header))  # fmt: skip

    FileConfigSource.load_config = load_config
    try:
        yield
    finally:
        FileConfigSource.load_config = parse


def _split_overrides(overrides: tuple[str, ...]):
    """(group overrides as typed, value overrides parsed), classified as Hydra's defaults list
    classifies them (``hydra._internal.defaults_list.Overrides``: a key naming a config group,
    with a value that is no dict, chooses from the group); None where the two-stage path would
    not be Hydra's own (hydra.* keys, which land in the node compose drops; +, ++ and ~, which
    may add or delete group entries; sweeps, which compose refuses)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    repository = GlobalHydra.instance().config_loader().repository
    groups, values = [], []
    for text, override in zip(overrides, parsed, strict=True):
        key = override.key_or_group
        if (
            key.split(".")[0].split("/")[0] == "hydra"
            or override.is_sweep_override()
            or override.is_add()
            or override.is_force_add()
            or override.is_delete()
            or override.package is not None
        ):
            return None
        if repository.group_exists(key) and not isinstance(override.value(), dict):
            groups.append(text)
        else:
            values.append(override)
    return tuple(groups), values


@contextlib.contextmanager
def unsaved_figures():
    """While open, each run figure (``lengen.plots.attention``, ``lengen.plots.run``) is built
    from its numbers as usual, then closed unsaved: ``save_figure`` records the file names it
    was asked for in the yielded list and writes nothing. For the many short runs whose tests
    read numbers, not figures: rasterising a run's figures (their layout, mostly) costs more
    than a debug=fast run's training, and drawing is the same code whatever the run; the
    figures' own tests write them."""
    import pytest

    import lengen.plots.attention
    import lengen.plots.run
    from lengen.plots.common import pyplot

    built: list[str] = []

    def save_figure(fig, stem, formats=("png",), dpi=None):
        pyplot().close(fig)
        stem = Path(stem)
        built.extend(f"{stem.name}.{fmt}" for fmt in formats)
        return []

    with pytest.MonkeyPatch.context() as patch:
        for module in (lengen.plots.attention, lengen.plots.run):
            patch.setattr(module, "save_figure", save_figure)
        yield built


def yaml_choices(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def pe_supports(pe: str, model: str) -> bool:
    """Causal-only encodings (xPos, …) cannot serve a model with a bidirectional stack."""
    return model == "decoder" or not _causal_only(pe)


@functools.cache
def _causal_only(pe: str) -> bool:
    # the yaml read directly, as pe_factory does: test modules call this at collection, once per
    # encoding × model kind, and composing the train config would cost ~0.15 s a call
    from hydra.utils import get_class
    from omegaconf import OmegaConf

    return get_class(OmegaConf.load(CONFIG_DIR / "pe" / f"{pe}.yaml")._target_).causal_only


def run_train(
    *arguments: str, cwd: Path | None = None, timeout: int = 300, one_thread: bool = False
) -> subprocess.CompletedProcess:
    """``python train.py arguments…`` as a user runs it, output captured: forked from a server
    that imported torch and Lightning once under this environment (tests/forked_train.py), or,
    with LENGEN_TESTS_FORK=0 or no server to spare, a process of its own."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"} if one_thread else os.environ.copy()
    command = [sys.executable, str(ROOT / "train.py"), *arguments]
    if os.environ.get("LENGEN_TESTS_FORK") != "0":
        # pytest names the running test in the environment; nothing of lengen's reads it
        own = {k: v for k, v in env.items() if k != "PYTEST_CURRENT_TEST"}
        done = _run_forked(command, cwd or ROOT, timeout, own)
        _trace("forked" if done is not None else "process")
        if done is not None:
            return done
    return subprocess.run(
        command, cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout, env=env
    )


def _trace(how: str) -> None:
    """With LENGEN_TESTS_FORK_TRACE=<file>: one line per ``run_train`` case, how it ran (a
    file several workers append to; docs/benchmarks.md, "Forked train.py")."""
    if trace := os.environ.get("LENGEN_TESTS_FORK_TRACE"):
        with open(trace, "a") as file:
            file.write(f"{how} {os.environ.get('PYTEST_CURRENT_TEST', '').split(' ')[0]}\n")


def _run_forked(command, cwd: Path, timeout: int, env) -> subprocess.CompletedProcess | None:
    import tempfile

    from forked_train import server_for

    if (server := server_for(env)) is None:
        return None
    with tempfile.TemporaryDirectory(prefix="lengen-forked-") as folder:
        stdout, stderr = Path(folder) / "stdout", Path(folder) / "stderr"
        answer = server.run(command[2:], cwd, timeout, stdout, stderr)
        if answer is None:
            return None
        if answer.get("timed_out"):
            raise subprocess.TimeoutExpired(command, timeout)
        # text as subprocess.run(text=True) decodes it: the locale's encoding, universal newlines
        out, err = (p.read_text(encoding=None) if p.exists() else "" for p in (stdout, stderr))
        return subprocess.CompletedProcess(command, answer["returncode"], out, err)


def fresh_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (tests/ importable) -> its stripped stdout: for what
    a process imports (torch must not load for a refusal)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def load_script(name: str):
    """scripts/<name>.py as a module (scripts are not a package)."""
    import importlib.util

    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"scripts_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pe_factory(name: str, train_positions: int = 16, max_positions: int = 64, **options):
    """configs/pe/<name>.yaml with ``options`` over its keys, as the partial ``build`` makes
    of it: the model supplies d_model, n_heads and causal.

    The pe yamls are plain nodes (no defaults list, no interpolation), so the file is read
    directly: composing the whole train config costs ~0.3 s a yaml (test_configs composes
    every one)."""
    import functools

    from omegaconf import OmegaConf

    from lengen.build import instantiate_named

    node = OmegaConf.merge(OmegaConf.load(CONFIG_DIR / "pe" / f"{name}.yaml"), options)
    return functools.partial(
        instantiate_named(node), train_positions=train_positions, max_positions=max_positions
    )


def relative_bias_yamls() -> list[str]:
    """The pe yamls whose encoding, as built, has a score bias of q − k only (``has_bias``,
    ``bias_is_relative``, no contextual term): those attention serves from one table per
    offset."""
    names = []
    for name in yaml_choices("pe"):
        pe = pe_factory(name)(d_model=32, n_heads=4, causal=True)
        if pe.has_bias and pe.bias_is_relative and not pe.has_contextual:
            names.append(name)
    return names


def textbook_attention(q, k, v, *, causal: bool, bias=None):
    """softmax(q·kᵀ/√d + bias + causal mask) v in float64, returned as float32: the one
    reference the attention kernels are checked against.

    q (B, H, Tq, D) are the last Tq of the Tk keys k, v (B, H, Tk, D): the causal mask is by
    index. bias: (H, Tq, Tk), or None."""
    import math

    import torch

    q, k, v = q.double(), k.double(), v.double()
    q_len, k_len = q.shape[2], k.shape[2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, H, Tq, Tk)
    if bias is not None:
        scores = scores + bias.double()
    if causal:
        query_index = torch.arange(q_len)[:, None] + (k_len - q_len)
        scores = scores.masked_fill(torch.arange(k_len)[None, :] > query_index, float("-inf"))
    return (scores.softmax(-1) @ v).float()


def sharpen(model, seed: int = 0):
    """The model in eval mode with unit-gain linear weights (std fan_in^-1/2) and random values
    for parameters that start at zero (CoPE's embeddings), so every hook shows in the logits."""
    import torch
    from torch import nn

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                std = module.in_features**-0.5
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * std)
        for parameter in model.parameters():
            if not parameter.any():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return model.eval()


def load_task(name: str):
    """The task of configs/data/<name>.yaml."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    return instantiate(OmegaConf.load(CONFIG_DIR / "data" / f"{name}.yaml").task)


def task_data(name: str, **overrides):
    """TaskData as configs/data/<name>.yaml builds it (without Hydra's exception wrapping),
    with overrides."""
    from omegaconf import OmegaConf

    from lengen.data.task_data import TaskData

    node = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "data" / f"{name}.yaml"))
    settings = {k: v for k, v in node.items() if k not in ("_target_", "name", "task")}
    return TaskData(task=load_task(name), **{**settings, **overrides})


#: words of the tiny text corpora (non-ASCII included: multi-byte characters, an emoji)
WORDS = ["the", "cat", "sat", "on", "a", "mat,", "and", "then", "—", "naïve", "café", "owners",
         "said", "😀", "hello", "to", "everyone"]  # fmt: skip


def corpus_lines(n: int, seed: int) -> list[str]:
    """n lines of 3–12 random WORDS, the same for the same seed."""
    import random

    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(n)]


def text_data(tmp_path, **options):
    """TextData (windows of 16, a BPE of 300 tokens, batches of 4 unless told) cached under
    tmp_path."""
    from lengen.data.text import TextData

    options = {"len": 16, "tokenizer": "bpe", "vocab_size": 300, "batch_size": 4, **options}
    return TextData(cache_dir=str(tmp_path / "cache"), progress=False, **options)


def assert_png(path: Path) -> None:
    """A PNG file with something drawn in it (over 10 kB)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert len(data) > 10_000, f"{path}: only {len(data)} bytes"


def assert_pdf(path: Path) -> None:
    """A complete PDF file with something drawn in it (over 2 kB)."""
    data = path.read_bytes()
    assert data[:5] == b"%PDF-" and b"%%EOF" in data[-64:], path
    assert len(data) > 2_000, f"{path}: only {len(data)} bytes"


#: the size of the tiny models the decoding and evaluation tests build from the yamls
TINY = ("model.d_model=16", "model.n_layers=2", "model.n_heads=2", "model.d_ff=32")


def tiny_model(pe: str, model: str, *overrides: str, train_len: int = 4, length: int = 10):
    """A tiny, sharpened model built from the yamls as a run builds it (trained on lengths up
    to ``train_len``, sized for evaluation at ``length``)."""
    from lengen.build import build

    cfg = compose_train(
        f"pe={pe}",
        f"model={model}",
        f"data.len={train_len}",
        f"eval.lengths=[{length}]",
        *TINY,
        *overrides,
    )
    return sharpen(build(cfg)[1])


# -- the encodings' tests (tests/pe): references and probes shared by several files ----------
def grid_cells(shape, readout: bool = False):
    """Row-major cell coordinates (``lengen.pe.grid_positions``), plus a −1 row at the end when
    ``readout``: (prod(shape) [+ 1], len(shape)) int64."""
    import torch

    from lengen.pe import grid_positions

    positions = grid_positions(shape)
    if readout:
        positions = torch.cat([positions, torch.full((1, len(shape)), -1)])
    return positions


def reference_block(value, n_heads: int, q_positions, k_positions):
    """(H, Tq, Tk) float64 tensor of value(h, i, j) for heads h, queries i and keys j."""
    import torch

    q_list, k_list = [int(i) for i in q_positions], [int(j) for j in k_positions]
    return torch.tensor(
        [[[value(h, i, j) for j in k_list] for i in q_list] for h in range(n_heads)],
        dtype=torch.float64,
    )


def ref_theta(dim: int, base: float):
    """RoFormer: θ_i = base^(−2i/dim), i = 0 … dim/2 − 1, float64 numpy (dim/2,)."""
    import numpy as np

    return np.array([base ** (-2 * i / dim) for i in range(dim // 2)], dtype=np.float64)


def ref_rotate(x, positions, theta, layout: str = "interleaved", magnitude=None):
    """Rotate the first 2·len(theta) dims of x as complex pairs by e^(i·p·θ_j) (times an
    optional per-(position, pair) magnitude); the other dims pass. float64 numpy, x's shape."""
    import numpy as np

    values = x.detach().double().numpy()
    rotated = 2 * len(theta)
    half = rotated // 2
    angles = np.asarray(positions, dtype=np.float64)[..., None] * theta  # (..., seq, r/2)
    if layout == "interleaved":
        pairs = values[..., 0:rotated:2] + 1j * values[..., 1:rotated:2]
    else:
        pairs = values[..., :half] + 1j * values[..., half:rotated]
    turned = pairs * np.exp(1j * angles)
    if magnitude is not None:
        turned = turned * magnitude
    out = values.copy()
    if layout == "interleaved":
        out[..., 0:rotated:2], out[..., 1:rotated:2] = turned.real, turned.imag
    else:
        out[..., :half], out[..., half:rotated] = turned.real, turned.imag
    return out


def qk_scores(q, k):
    """q·kᵀ over the last two dimensions: (..., Tq, d), (..., Tk, d) -> (..., Tq, Tk)."""
    return q @ k.transpose(-1, -2)


def rope_pe(**options):
    """RoPE with ``options``, head_dim 16 (d_model 64, 4 heads), 32 training positions."""
    from lengen.pe.rope import RoPE

    return RoPE(d_model=64, n_heads=4, train_positions=32, **options)


def rotate_with(pe, q, k, positions):
    """q, k (..., T, hd) through pe.rotate at one set of positions."""
    return pe.rotate(q, k, positions, positions)


def toeplitz_scores(pe, length: int):
    """The same query vector and the same key vector at every position of one sequence, through
    ``pe.rotate``: the (length, length) scores."""
    import torch

    generator = torch.Generator().manual_seed(14)
    head_dim = pe.head_dim
    q = torch.randn(head_dim, generator=generator).expand(1, 1, length, head_dim)
    k = torch.randn(head_dim, generator=generator).expand(1, 1, length, head_dim)
    rotated_q, rotated_k = rotate_with(pe, q, k, torch.arange(length))
    return qk_scores(rotated_q, rotated_k)[0, 0]  # (length, length)


def start_run_timing(model, tmp_path, *, model_cfg: dict, samples: int, lengths: list[int]):
    """``lengen.train.RunTiming.start`` of ``model`` on a stand-in trainer and data (training
    length 8, 4 steps on the CPU): its estimate line and evaluation bound, without a run."""
    from types import SimpleNamespace

    import torch
    from omegaconf import OmegaConf

    from lengen.progress import StepTimer
    from lengen.train import RunTiming

    cfg = OmegaConf.create(
        {
            "model": model_cfg,
            "eval": {"samples": samples, "decoding": "teacher_forced", "lengths": lengths},
            "trainer": {"max_steps": 4, "criterion_target": None},
        }
    )
    data = SimpleNamespace(train_len=8, batch_size=4, sequence_length=lambda n: 2 * n + 1)
    trainer = SimpleNamespace(
        strategy=SimpleNamespace(root_device=torch.device("cpu")),
        world_size=1,
        callbacks=[StepTimer()],
    )
    directory = SimpleNamespace(path=tmp_path / "run")
    return RunTiming.start(cfg, model, data, cfg.eval.lengths, trainer, None, directory)


def counting_rotations(monkeypatch) -> list[int]:
    """Record how many positions each ``lengen.pe.liere.generator_rotations`` call forms
    (LieRE's and ComRoPE's matrix exponentials)."""
    import lengen.pe.liere as liere_module

    calls: list[int] = []
    real = liere_module.generator_rotations

    def recording(coordinates, generators, *rest):
        calls.append(coordinates.shape[0])
        return real(coordinates, generators, *rest)

    monkeypatch.setattr(liere_module, "generator_rotations", recording)
    return calls
