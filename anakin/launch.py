"""From what a user asked for to a checked, built run: the one path behind `anakin train` and
`anakin.train`.

A request names an algorithm and either a preset (default "default"), a whole config, or a run
directory to resume; settings come as command-line flags (parsed by tyro) or as dotted names
(`{"algo.learning_rate": 1e-3}`). `resolve` turns it into a `Launch` (config checked, resume
checked, environment, algorithm and program built, nothing compiled or written) or raises one
`ValueError` whose message is one line naming the values; `run` trains it. The CLI maps the
errors to exit codes; the Python API raises them as they are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import io
import os
import re
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from anakin import algorithms
from anakin import devices as dev
from anakin.config import TrainConfig, check_fields, differences, get_dotted
from anakin.rundir import (
    Resume,
    check_device_count,
    check_resume,
    check_same_dataset,
    load_saved_config,
    read_description,
    recorded_config,
)

if typing.TYPE_CHECKING:  # for the annotation; envs is imported where an environment is made
    from anakin.envs.core import EnvSpec


class Launch(NamedTuple):
    """A run ready to train: its config, what that config built, and where it resumes from."""

    algo: str
    cfg: TrainConfig
    setup: Any  # anakin.setup.Setup
    resume: Resume | None


def preset_config(algo: str, preset: str) -> TrainConfig:
    """The `TrainConfig` of `algo`'s preset; ValueError naming the presets for an unknown one."""
    entry = algorithms.get(algo)
    if preset not in entry.presets:
        raise ValueError(
            f"unknown preset {preset!r} for {algo}. Choose one of: {', '.join(entry.presets)}"
        )
    algo_cfg, arch = entry.presets[preset]
    return TrainConfig(algo=algo_cfg, arch=arch)


def resolve_config(
    algo: str,
    *,
    preset: str | None = None,
    config: TrainConfig | None = None,
    resume: str | Path | None = None,
    resume_step: int | None = None,
    flags: Sequence[str] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> tuple[TrainConfig, TrainConfig | None]:
    """The config a request trains with, and the saved one when it resumes (else None).

    The starting point is the preset (default "default"), `config`, or the config saved in the
    `resume` run directory; `flags` (command-line, e.g. ["--algo.learning-rate", "1e-3"]) and
    `settings` (dotted names) change it. Raises ValueError for an unknown algorithm or preset,
    a combination that does not go together, or a bad setting.
    """
    entry = algorithms.get(algo)
    if resume_step is not None and resume is None:
        raise ValueError(f"--resume-step {resume_step} needs --resume RUN_DIR (resume=)")
    saved = None
    if resume is not None:
        if preset is not None or config is not None:
            given = "--preset (preset=)" if preset is not None else "config="
            raise ValueError(
                f"{given} and --resume (resume=) do not go together: a resumed run keeps the "
                "config it was saved with; change settings with flags (overrides)"
            )
        cfg, source = load_saved_config(Path(resume), algo), f"the run in {resume}"
        # What the checkpoint was trained with; a config.json edited since is a change.
        saved = recorded_config(Path(resume), resume_step, algo) or cfg
    elif config is not None:
        if preset is not None or flags or settings:
            raise ValueError("pass either config= or a preset and settings, not both")
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config={config!r} must be an anakin.config.TrainConfig")
        cfg, source = config, "the given config"
    else:
        preset = preset or "default"
        cfg, source = preset_config(algo, preset), f"preset {preset!r}"
    if flags is not None:
        cfg = parse_flags(algo, cfg, source, list(flags))
    for dotted, value in (settings or {}).items():
        cfg = _override(cfg, dotted, value, entry.config_cls)
    check_fields(cfg)  # a bad value is named here, for `anakin.make_config` as for a run
    if resume is None and config is None:
        request = {"flags": flags, "settings": settings}
        explicit = explicit_settings(request)
        cfg = choose_layout(algo, cfg, preset, explicit, dev.platform())
        cfg = choose_spec_defaults(algo, cfg, preset, explicit)
    return cfg, saved


def spec_settings(
    algo: str, preset: str | None, explicit: frozenset[str], spec: EnvSpec, layout: str
) -> list[tuple[str, dict]]:
    """(what, settings) for each group of settings `algo`'s default preset takes for the
    environment described by `spec` in `layout` (`arch.layout`, as chosen): its `images` for
    an observation with an image (with its `accelerator_images` on top in the accelerator
    layout), then its `continuous` for continuous actions, less those the user set
    (`explicit`, dotted names); [] for another preset. Defaults follow the observation's shape
    and the action space this way, never a task's name."""
    if preset not in (None, "default"):
        return []
    entry = algorithms.get(algo)
    images = dict(entry.images)
    if layout == "accelerator":
        images.update(entry.accelerator_images)
    groups = [
        ("image observations", images, spec.images),
        ("continuous actions", entry.continuous, not spec.discrete),
    ]
    out = []
    for what, settings, applies in groups:
        mine = {k: v for k, v in settings.items() if k not in explicit}
        if applies and mine:
            out.append((what, mine))
    return out


def choose_spec_defaults(
    algo: str, cfg: TrainConfig, preset: str | None, explicit: frozenset[str]
) -> TrainConfig:
    """`cfg` with the settings `spec_settings` gives for its environment, on top of the
    layout's. The environment is made, not compiled, to read its spec, and only for an
    algorithm that has such settings."""
    from anakin import envs

    entry = algorithms.get(algo)
    if preset not in (None, "default") or not (
        entry.images or entry.accelerator_images or entry.continuous
    ):
        return cfg
    env, env_params = envs.make(cfg.env.name, hide=cfg.env.hide, **cfg.env.kwargs)
    spec = envs.spec(env, env_params, cfg.env.name)
    for _, settings in spec_settings(algo, preset, explicit, spec, cfg.arch.layout):
        for dotted, value in settings.items():
            cfg = _override(cfg, dotted, value, entry.config_cls)
    return cfg


def choose_layout(
    algo: str, cfg: TrainConfig, preset: str, explicit: frozenset[str], platform: str
) -> TrainConfig:
    """`cfg` (from `preset`) in the layout `arch.layout` asks for, which is recorded: "auto"
    becomes "cpu" on CPU devices and "accelerator" on others. The accelerator layout puts the
    algorithm's `accelerator` settings on top of the default preset, except those in
    `explicit` (the dotted names the user set). Raises ValueError for a layout that cannot be
    had: "accelerator" with another preset, or for an algorithm that has none."""
    entry, asked = algorithms.get(algo), cfg.arch.layout
    if preset != "default":
        if asked == "accelerator":
            raise ValueError(
                f"arch.layout='accelerator' changes the default preset, and preset {preset!r} "
                "keeps its own layout; drop --preset or --arch.layout"
            )
        return _with_layout(cfg, "cpu")
    chosen = asked if asked != "auto" else ("cpu" if platform == "cpu" else "accelerator")
    if chosen == "cpu":
        return _with_layout(cfg, "cpu")
    if not entry.accelerator:
        if asked == "accelerator":
            raise ValueError(
                f"arch.layout='accelerator': {algo} has no accelerator layout yet (its defaults "
                "were chosen on a CPU); use arch.layout cpu, and set arch.envs_per_device and "
                "the batch sizes yourself"
            )
        return _with_layout(cfg, "cpu")
    # One count of environments: the user's num_envs stands for envs_per_device and back.
    given = set(explicit)
    if given & {"arch.num_envs", "arch.envs_per_device"}:
        given |= {"arch.num_envs", "arch.envs_per_device"}
    for dotted, value in entry.accelerator.items():
        if dotted not in given:
            cfg = _override(cfg, dotted, value, entry.config_cls)
    return _with_layout(cfg, "accelerator")


def _with_layout(cfg: TrainConfig, layout: str) -> TrainConfig:
    return dataclasses.replace(cfg, arch=dataclasses.replace(cfg.arch, layout=layout))


def describe_layout(algo: str, layout: str) -> str:
    """The start-up line naming the layout a run from the default preset uses, and why."""
    entry, platform = algorithms.get(algo), dev.platform()
    by_platform = "cpu" if platform == "cpu" or not entry.accelerator else "accelerator"
    why = f"{platform} devices" if layout == by_platform else f"--arch.layout {layout}"
    if layout == "accelerator":
        changed = ", ".join(f"{k}={v}" for k, v in entry.accelerator.items())
        return f"layout: accelerator ({why}: {changed}); --arch.layout cpu for the small one"
    if entry.accelerator:
        return f"layout: cpu ({why}); --arch.layout accelerator for a GPU's or TPU's"
    return f"layout: cpu ({why}; {algo} has no accelerator layout yet)"


def _layout_value(algo: str, layout: str, dotted: str) -> Any:
    """What `layout` alone sets `dotted` ("algo.x.y") to: the accelerator layout's value, else
    the algorithm config's default (the default preset's); None outside `algo.`."""
    entry = algorithms.get(algo)
    if layout == "accelerator" and dotted in entry.accelerator:
        return entry.accelerator[dotted]
    if not dotted.startswith("algo."):
        return None
    return get_dotted(entry.config_cls(), dotted.removeprefix("algo."))


def resolve(algo: str, *, force: bool = False, **request: Any) -> Launch:
    """`resolve_config`, then every check a run needs before it is compiled: a resume's
    changes (refused unless `force`, see `anakin.rundir.check_resume`), reporting sinks, the
    config itself (`anakin.setup.setup`, which builds the program) and a resume's devices.
    Raises ValueError naming the problem; nothing has been compiled or written then."""
    from anakin import runner, setup

    cfg, saved = resolve_config(algo, **request)
    resume = request.get("resume")
    if saved is not None:
        try:
            devices = read_description(Path(resume))["derived"].get("num_devices")
            check_resume(saved, cfg, force, devices)
        except ValueError as e:
            edited = differences(saved, load_saved_config(Path(resume), algo))
            if edited:
                fields = ", ".join(name for name, _, _ in edited)
                e = ValueError(
                    f"{resume}/config.json was edited after its checkpoint ({fields}); {e}"
                )
            raise e from None
    runner.check_reporting(cfg)
    if cfg.dataset and os.path.exists(cfg.dataset):  # recorded absolute: found from anywhere
        cfg = dataclasses.replace(cfg, dataset=os.path.abspath(cfg.dataset))
    elif saved is not None and cfg.dataset and not os.path.exists(cfg.dataset):
        sha = (read_description(Path(resume)).get("dataset") or {}).get("sha256", "")
        raise ValueError(
            f"{cfg.dataset}: no such file, and {resume} trained on it (SHA-256 {sha[:16]}...); "
            "pass --dataset with where that file is now"
        )
    if saved is not None:
        check_device_count(Path(resume), len(dev.select(cfg.arch.num_devices)))
    explicit = explicit_settings(request)
    prepared = setup.fit_to_devices(algo, cfg, explicit)
    # (a run saved before layouts existed records none: "auto", and is described by nothing)
    layout = prepared.cfg.arch.layout
    if explicit is not None and request.get("preset") in (None, "default") and layout != "auto":
        note = describe_layout(algo, layout)
        prepared = prepared._replace(notes=(note, *prepared.notes))
        for what, settings in spec_settings(
            algo, request.get("preset"), explicit, prepared.spec, layout
        ):
            settings = {  # only what differs from the layout's own value is news
                k: v for k, v in settings.items() if v != _layout_value(algo, layout, k)
            }
            if not settings:
                continue
            changed = ", ".join(f"{k}={v}" for k, v in settings.items())
            note = f"{what}, on top of the layout: {changed} (set them to choose)"
            prepared = prepared._replace(notes=(*prepared.notes, note))
    pbt_line = setup.describe_pbt(prepared)
    if pbt_line:
        prepared = prepared._replace(notes=(*prepared.notes, pbt_line))
    if saved is not None:
        check_same_dataset(Path(resume), prepared, force)
    at = Resume(Path(resume), request.get("resume_step")) if resume is not None else None
    return Launch(algo, prepared.cfg, prepared, at)


def explicit_settings(request: Mapping[str, Any]) -> frozenset[str] | None:
    """The dotted names a request sets itself (flags and settings), which the fitting to the
    devices never changes; None when every value is the user's (a whole config, or a resumed
    run's saved one)."""
    if request.get("resume") is not None or request.get("config") is not None:
        return None
    names = {name.replace("-", "_") for name in request.get("settings") or {}}
    for arg in expand_aliases(request.get("flags") or ()):
        if arg.startswith("--"):
            name = arg[2:].partition("=")[0].replace("-", "_")
            names.add(name)
            head, _, last = name.rpartition(".")
            if last.startswith("no_"):  # --x.no-flag
                names.add(f"{head}.{last[3:]}" if head else last[3:])
    return frozenset(names)


def run(launch: Launch) -> Any:
    """Trains a resolved run (`anakin.runner.train`); returns its `RunResult`."""
    from anakin import runner

    return runner.train(launch.algo, launch.cfg, launch.setup, resume=launch.resume)


# ---- command-line flags (tyro) --------------------------------------------------------------

# Short spellings: `--env NAME` for `--env.name NAME`, `--wandb` for `--wandb.enabled`, ...
FLAG_ALIASES = {
    "--env": "--env.name",
    "--env-kwargs": "--env.kwargs",
    "--env-hide": "--env.hide",
    "--wandb": "--wandb.enabled",
    "--pbt": "--pbt.enabled",
    "--no-pbt": "--pbt.no-enabled",
    "--no-wandb": "--wandb.no-enabled",
    "--render-every": "--render.every-env-steps",
}


def expand_aliases(args: Sequence[str]) -> list[str]:
    out = []
    for a in args:
        flag, eq, value = a.partition("=")
        out.append(FLAG_ALIASES.get(flag, flag) + eq + value)
    return out


def take_flag(args: list[str], flag: str, value: bool = True) -> str | bool | None:
    """Removes `flag` (and its value, as `--flag V` or `--flag=V`) from `args`; returns the
    value (True for a flag without one), or None when absent."""
    for i, a in enumerate(args):
        if a == flag:
            if not value:
                del args[i]
                return True
            if i + 1 >= len(args):
                raise ValueError(f"{flag} needs a value")
            found = args[i + 1]
            del args[i : i + 2]
            return found
        if value and a.startswith(flag + "="):
            del args[i]
            return a.split("=", 1)[1]
    return None


def int_flag(flag: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r} must be an integer") from None


def split_train_flags(argv: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """`anakin train ALGO`'s own flags (--preset, --resume, --resume-step, --force) as
    `resolve`'s keywords, and the config flags left for tyro."""
    rest = list(argv)
    request = {
        "preset": take_flag(rest, "--preset"),
        "resume": take_flag(rest, "--resume"),
        "resume_step": int_flag("--resume-step", take_flag(rest, "--resume-step")),
        "force": bool(take_flag(rest, "--force", value=False)),
    }
    return request, rest


def config_for_flags(algo: str, argv: Sequence[str]) -> TrainConfig:
    """The config `anakin train ALGO ARGV...` (without --resume) would train with, for tools
    that must know it without training (scripts/suite.py --reuse)."""
    request, flags = split_train_flags(argv)
    request.pop("force")
    return resolve_config(algo, flags=flags, **request)[0]


def parse_flags(algo: str, default: TrainConfig, source: str, args: list[str]) -> TrainConfig:
    """`default` with command-line flags applied (tyro; `--help` prints the help and exits).
    A flag tyro cannot parse is a one-line ValueError."""
    entry = algorithms.get(algo)
    return tyro_cli(
        TrainConfig[entry.config_cls],
        default=default,
        args=whole_numbers(expand_aliases(args), entry.config_cls),
        prog=f"anakin train {algo} [--preset {'|'.join(entry.presets)}] "
        "[--resume RUN_DIR [--resume-step N] [--force]]",
        description=f"Train {algo} (defaults shown are those of {source}).",
    )


_WHOLE = re.compile(r"[+-]?\d+(?:\.\d*)?(?:[eE][+]?\d+)?")


def whole_numbers(args: list[str], algo_cls: type) -> list[str]:
    """`--arch.total-env-steps 1e6` as `1000000`: an integer setting written as a whole number
    in float notation, as budgets often are (the Python API and config.json take 1e6 too)."""
    out = list(args)
    for i, arg in enumerate(out):
        flag, eq, value = arg.partition("=")
        at = i if eq else i + 1
        if not flag.startswith("--") or at >= len(out) or not _is_int_setting(flag, algo_cls):
            continue
        value = value if eq else out[at]
        if _WHOLE.fullmatch(value) and not value.lstrip("+-").isdigit():
            number = float(value)
            if number.is_integer() and abs(number) < 2**53:  # exact as a float
                out[at] = (flag + "=" if eq else "") + str(int(number))
    return out


def _is_int_setting(flag: str, algo_cls: type) -> bool:
    cls: Any = TrainConfig
    *groups, name = flag[2:].replace("-", "_").split(".")
    for group in groups:
        cls = _hints(cls, algo_cls).get(group)
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            return False
    return _hints(cls, algo_cls).get(name) is int


def tyro_cli(target: Any, *, args: list[str], **kw: Any) -> Any:
    """`tyro.cli(target, args=args, ...)` for a dataclass `target`, with tyro's framed error
    reports turned into one-line ValueErrors; `--help` still prints the help and exits
    (SystemExit 0)."""
    import tyro

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parsed = tyro.cli(target, args=args, **kw)
    except SystemExit as e:
        if not e.code:
            sys.stderr.write(err.getvalue())
            raise
        raise ValueError(one_line(err.getvalue())) from None
    sys.stderr.write(err.getvalue())
    return parsed


def call_with_flags(fn: Callable[..., Any], args: list[str], prog: str) -> Any:
    """Calls `fn` with its arguments parsed from `args` by tyro (its docstring's Args are the
    help; positional-only parameters are positional arguments), errors as in `tyro_cli`. The
    call itself runs outside the parser, so what `fn` prints or raises is its own."""

    @functools.wraps(fn)
    def bound(*a: Any, **k: Any) -> tuple[tuple, dict]:
        return a, k

    a, k = tyro_cli(bound, args=args, prog=prog)
    return fn(*a, **k)


_FRAME = re.compile(r"[│╭╮╰╯─]+|^[|+]|[|+]$")
# A frame's title line, in rich's box characters or its ASCII ones (where the terminal has no
# box characters): "╭─ Value error ─╮", "+-- Value error --+", "Value error -------".
_TITLE = re.compile(r"^(?:╭─*|[+]?-*)\s*([^─\-+│|╭╮].*?)\s*(?:─+╮|-{3,}[+]?)$")


def one_line(report: str) -> str:
    """tyro's framed error report as one line: its title, its first paragraph and what it
    suggests instead."""
    title, paragraphs, current = "", [], []
    boxed = "╭" in report  # else rich's plain layout: the title, then rules of dashes
    for raw in report.splitlines():
        line = raw.strip()
        if line and not (title or paragraphs or current):
            named = _TITLE.match(line)
            if named or not boxed:
                title = named.group(1) if named else line
                continue
        if set(line) <= set("│─ ╰╯+-|"):
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        current.append(_FRAME.sub(" ", line).strip())
    if current:
        paragraphs.append(" ".join(current))
    paragraphs = [p for p in paragraphs if p and not p.startswith("For full helptext")]
    if not paragraphs:
        return title or report.strip().splitlines()[-1]
    text = " ".join(paragraphs[0].split())
    bad = _BAD_NUMBER.match(text)
    if bad:
        flag, as_int, _, value = bad.groups()
        text = f"{flag} {value!r} must be {'an integer' if as_int else 'a number'}"
    optional = _BAD_OPTIONAL.match(text)
    if optional:
        flag, kind, value = optional.groups()
        text = f"{flag} {value!r} must be {'an integer' if kind == 'INT' else 'a number'} or None"
    pairs = _BAD_PAIRS.match(text)
    if pairs:
        flag = {v: k for k, v in FLAG_ALIASES.items()}.get(pairs.group(1), pairs.group(1))
        text = f"{flag} takes KEY VALUE pairs, an even number of words (e.g. {flag} rows 12)"
    hint = next((p for p in paragraphs[1:] if p.startswith("Perhaps you meant")), None)
    if hint:
        text += "; did you mean " + " ".join(hint.split()[3:5]) + "?"
    return text


_BAD_OPTIONAL = re.compile(
    r"Error parsing (\S+): no type matching \{None\}\|(FLOAT|INT) could be instantiated from "
    r"\['(.*)'\]\.?$"
)
_BAD_PAIRS = re.compile(r"Error parsing (\S+): Failed to parse key-value pairs")
_BAD_NUMBER = re.compile(
    r"Error parsing (\S+): (?:invalid literal for (int)\(\) with base 10|could not convert "
    r"string to (float)): '(.*)'$"
)


# ---- settings by dotted name (Python) -------------------------------------------------------


def _hints(cls: type, algo_cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    if cls is TrainConfig:
        hints["algo"] = algo_cls
    return hints


def _convert(name: str, hint: Any, value: Any) -> Any:
    """`value` as the field's type where that is unambiguous; ValueError naming the field."""
    if hint is bool:
        if not isinstance(value, bool | np.bool_):
            raise ValueError(f"{name}={value!r} must be True or False")
        return bool(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise ValueError(f"{name}={value!r} must be an integer")
        if not isinstance(value, int | np.integer) and not float(value).is_integer():
            raise ValueError(f"{name}={value!r} must be a whole number")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise ValueError(f"{name}={value!r} must be a number")
        return float(value)
    if hint is str and not isinstance(value, str | Path):
        raise ValueError(f"{name}={value!r} must be a string")
    if hint is str:
        return str(value)
    if typing.get_origin(hint) is tuple:
        return tuple(value) if isinstance(value, list | tuple) else (value,)
    return value


def _override(cfg: Any, dotted: str, value: Any, algo_cls: type, path: str = "") -> Any:
    """`cfg` with the field at `dotted` (e.g. "algo.learning_rate", hyphens or underscores)
    set to `value`; ValueError naming an unknown setting and the closest ones."""
    head, _, rest = dotted.partition(".")
    head = head.replace("-", "_")
    fields = [f.name for f in dataclasses.fields(type(cfg))]
    where = f"{path}{head}"
    if head not in fields:
        close = difflib.get_close_matches(head, fields, n=3)
        hint = f"; did you mean {', '.join(path + c for c in close)}?" if close else ""
        raise ValueError(
            f"unknown setting {where!r}{hint} ({path or 'the top level'} has {', '.join(fields)})"
        )
    current = getattr(cfg, head)
    if rest:
        if not dataclasses.is_dataclass(current):
            raise ValueError(f"{where!r} is a value, not a group of settings; drop {'.' + rest!r}")
        value = _override(current, rest, value, algo_cls, f"{where}.")
    elif dataclasses.is_dataclass(current) and not dataclasses.is_dataclass(value):
        if head == "env" and isinstance(value, str):
            value = dataclasses.replace(current, name=value)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                current = _override(current, k, v, algo_cls, f"{where}.")
            value = current
        else:
            raise ValueError(f"{where}={value!r} must be a dict of its settings")
    else:
        value = _convert(where, _hints(type(cfg), algo_cls).get(head), value)
    return dataclasses.replace(cfg, **{head: value})
