"""Components: each one's own checks, before a run directory exists: the data source's, the
encoding's per stack of the model (without torch for lengen's own: ``lengen.pe.config``), and
for a component of the user's, building it on the meta device."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from lengen.build import build, build_data, user_errors
from lengen.config import eval_lengths
from lengen.model.block_config import attention_options, logit_option
from lengen.model.config import model_config
from lengen.preflight.resources import cuda_available
from lengen.schema import node_options


def check_components(cfg: DictConfig) -> bool:
    """Every component's own checks of a config, before a run directory exists: the data
    source's, then the encoding's for each stack of the model (``lengen.pe.config``; the
    model's own keys are ``validate``'s, ``lengen.options``) without importing torch, so a
    refusal takes well under 2 s; then drawing a few training instances (``check_sampling``,
    which imports torch). A source that is not cheap to build (text reads its corpus) is not
    built: its keys are checked by ``validate`` and the encoding learns its positions from
    ``planned_positions``. Raises ConfigError naming the key. -> True when this covered the
    config; False when a component is not lengen's (a user's encoding or model, which its
    constructor checks) or the kernel option is ``flex`` (its policy reads the built encoding
    and the device): ``check_by_building`` then runs their checks."""
    from hydra.utils import get_class

    from lengen.pe.config import check_encoding

    model = cfg.model
    with user_errors():
        data, positions = (
            None,
            get_class(cfg.data._target_).planned_positions(cfg, eval_lengths(cfg)),
        )
        if positions is None:
            data, _, positions = build_data(cfg)
        options = model_config(model._target_)
        node = OmegaConf.to_container(cfg.pe, resolve=True)
        sizes = dict(d_model=model.d_model, n_heads=model.n_heads, n_layers=model.n_layers)
        # a block option that needs plain softmax logits, for the encoding to refuse
        logits = None
        if options is not None:
            typed = options.from_keys(node_options(model), owner=options.kind)
            logits = logit_option(attention_options(typed))
            check_encoding_reaches(node, typed)
            # model.loop_rule=confidence needs a task's answer positions on a sequence
            source = get_class(cfg.data._target_)
            typed.check_loop_choice(source.evaluation_kind, getattr(data, "axes", 1))
        known = [
            check_encoding(node, causal=causal, logit_option=logits, **sizes, **positions)
            for causal in (options.stacks if options is not None else ())
        ]
        if data is not None:
            check_task_name(cfg, data)
            data.check_sampling()
    return all(known) and options is not None and model.get("attention") != "flex"


def check_encoding_reaches(node: dict, model) -> None:
    """Refuse, before torch, an encoding that acts only inside attention in a model where no
    layer attends (``model.mixers`` every one recurrent): it would change nothing, the model
    pe=nope's (the build refused it, ``lengen.model.mixers.build.check_encoding_reaches``,
    after the run folder was made). ``node``: the pe node; ``model``: its typed config."""
    from lengen.pe.config.base import config_class, encoding_target
    from lengen.pe.config.schedule import ScheduleConfig

    plans = model.mixer_plans()
    if any(not plans[index % len(plans)].recurrent for index in range(model.n_layers)):
        return
    options = config_class(node.get("_target_"))
    if options is None:
        return  # a user's encoding: the build decides
    if issubclass(options, ScheduleConfig):
        entries = node.get("layers") or ScheduleConfig.defaults()["layers"]
        names = [entry if isinstance(entry, str) else entry.get("pe") for entry in entries]
        layers = [config_class(encoding_target(str(name))) for name in names]
        acts = any(layer is not None and layer.acts_in_attention for layer in layers)
    else:
        acts = options.acts_in_attention and not options.embeds
    if acts:
        key = "model.mixers" if model.mixers is not None else "model.mixer"
        name = node["_target_"].rpartition(".")[2]
        raise ValueError(
            f"pe: {name} acts in attention layers only and no layer attends ({key}: every "
            f"layer recurrent), so it would change nothing; allowed: pe=nope, an encoding "
            f"added to the embeddings (sinusoidal, learned), or an attention layer in "
            f"model.mixers"
        )


def check_task_name(cfg: DictConfig, data) -> None:
    """The task built must be the one ``data.name`` names: results, run names and labels take
    the yaml's name (DESIGN.md), so an option that makes the task another (``data=s5
    data.task.group=a5`` trains A5) would record it under the wrong name (TK07)."""
    import dataclasses

    from lengen.errors import ConfigError

    task = getattr(data, "task", None)
    name, wanted = getattr(task, "name", None), cfg.data.get("name")
    if name is None or name == wanted:
        return
    options = getattr(task, "cfg", None)
    changed = []
    if dataclasses.is_dataclass(options):
        defaults = type(options).defaults()
        changed = [
            f"data.task.{key}={value}"
            for key, value in dataclasses.asdict(options).items()
            if value != defaults.get(key)
        ]
    cause = " ".join(changed) or "its data.task options"
    raise ConfigError(
        f"{cause} makes the task {name}, but data.name is {wanted}, under which its results "
        f"would be recorded; allowed: data={name} (its own yaml), or the data.task options "
        f"of data={wanted}"
    )


def check_by_building(cfg: DictConfig) -> None:
    """The checks ``check_components`` leaves to the components themselves: build them on the
    meta device (their constructors check their keys), and ask the kernel policy whether
    ``model.attention`` can train on the device the run will train on."""
    _, model, _ = build(cfg, meta=True)
    accelerator = str(cfg.trainer.accelerator)
    cuda = accelerator in ("gpu", "cuda") or (accelerator == "auto" and cuda_available())
    with user_errors():
        model.check_kernel("cuda" if cuda else "mps" if accelerator == "mps" else "cpu")
