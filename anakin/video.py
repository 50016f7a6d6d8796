"""Drawing recorded episodes on the host, and writing them as a video (the `render` extra).

Episodes are played on device (`anakin.policy.make_filmer`); only the drawing happens here.
An episode of T steps gives T + 1 frames: its first state, then after each action the state
that action reached, so a step's frame shows its outcome and the last frame the state the
episode ended in (a catch or a miss, a goal reached, a game lost). Each frame is the
environment's own picture of its state when its adapter offers one (the optional `Renderable`
hook below), otherwise a generic picture of the observation: an image observation (rank 3) as
an image, anything else as a bar plot of the observation's entries. Every frame gets a
caption: the environment and episode; the step and the action that led to it (by name where
the adapter names its actions, the optional `NamesActions` hook); its reward and the return so
far, and on the last frame how the episode ended.

The hooks, for a suite's adapter (`envs/<suite>_suite.py`)::

    def render(self, state, params) -> np.ndarray | None
    def action_names(self, params) -> list[str] | None

`render` draws one environment's state (the adapter's own state, as its `reset_env` and
`step_env` return it, with host numpy leaves and no batch axis) as uint8 RGB [H, W, 3], the
same size for every state; or returns None when it has no picture of this environment.
`action_names` gives one name per discrete action (index = action), or None when the
environment does not name them (actions are then drawn as numbers). gymnax's adapter
implements both with gymnax's own visualiser and the games' documented actions
(`envs.gymnax_suite.GymnaxAdapter`); the other suites' adapters with their own renderers.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import numpy as np

INSTALL = 'pip install -e ".[render]"'
FORMATS = (".gif", ".mp4")


@runtime_checkable
class Renderable(Protocol):
    """An adapter that can draw its own states (see the module docstring)."""

    def render(self, state: Any, params: Any) -> np.ndarray | None: ...


@runtime_checkable
class NamesActions(Protocol):
    """An adapter that names its discrete actions (see the module docstring)."""

    def action_names(self, params: Any) -> list[str] | None: ...


class EpisodeSteps(NamedTuple):
    """One recorded episode of T steps on the host: states and observations [T + 1, ...],
    actions and rewards [T, ...]."""

    state: Any  # s_0 .. s_T: the adapter's first state, then the state each action reached
    obs: Any  # o_0 .. o_T, as the agent saw them (after the observation wrappers)
    action: np.ndarray  # a_0 .. a_{T-1}
    reward: np.ndarray  # r_0 .. r_{T-1}, float [T]
    end: str = ""  # "terminated", "truncated" (a time limit), or "" (cut at the step limit)


def require(out: Path | str = "x.gif") -> None:
    """Raises ValueError with the install command when what writes `out` is not installed."""
    needed = ["PIL", "matplotlib", "pygame"]  # pygame: Gymnasium's pictures
    if Path(out).suffix.lower() == ".mp4":
        needed.append("imageio")
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"videos need {', '.join(missing)}: {INSTALL}")
    if Path(out).suffix.lower() == ".mp4" and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise ValueError(
            "an .mp4 video needs imageio-ffmpeg: pip install imageio-ffmpeg (or write a .gif)"
        )


def check_out(out: Path, overwrite: bool = False) -> None:
    """Raises ValueError (naming the problem) unless a video can be written to `out`: a .gif or
    .mp4 name in an existing, writable directory, not already there unless `overwrite`. Writes
    nothing (a probe file is made and removed)."""
    if out.is_dir():
        raise ValueError(f"--out {out} is a directory; name a file in it, e.g. {out / 'agent.gif'}")
    if out.suffix.lower() not in FORMATS:
        raise ValueError(f"--out {out}: write a {' or '.join(FORMATS)} file")
    if out.exists() and not overwrite:
        raise ValueError(
            f"--out {out} already exists; pass --overwrite (overwrite=True) to replace it"
        )
    parent = out.parent
    if not parent.is_dir():
        raise ValueError(f"--out {out}: the directory {parent} does not exist")
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{out.name}.", suffix=".probe")
    except OSError as e:
        raise ValueError(f"--out {out}: cannot write in {parent} ({e.strerror})") from None
    os.close(fd)
    os.remove(probe)


def write_video(out: Path, frames: Iterable[np.ndarray], fps: int) -> tuple[int, int]:
    """Writes `frames` (uint8 RGB [H, W, 3], all one size) as a looping GIF, or an MP4, chosen
    by the suffix, atomically (a temporary file renamed over `out`). Frames are consumed one
    at a time, so a long video never holds every RGB frame in memory. Returns (frames, bytes).
    """
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")  # ffmpeg reads the suffix
    count = 0

    def counted(it: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
        nonlocal count
        for frame in it:
            count += 1
            yield frame

    try:
        if out.suffix.lower() == ".gif":
            _write_gif(tmp, counted(frames), fps)
        else:
            _write_mp4(tmp, counted(frames), fps)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return count, out.stat().st_size


def _write_gif(path: Path, frames: Iterator[np.ndarray], fps: int) -> None:
    """With Pillow directly: a fast octree palette per frame (imageio's default median cut is
    several times slower), and Pillow keeps only each frame's changed region."""
    from PIL import Image

    def paletted(it: Iterator[np.ndarray]) -> Iterator[Image.Image]:
        for frame in it:
            yield Image.fromarray(frame).quantize(
                256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE
            )

    images = paletted(frames)
    first = next(images)
    first.save(
        path,
        format="GIF",
        save_all=True,
        append_images=images,
        duration=1000 / fps,
        loop=0,
        optimize=True,
    )


def _write_mp4(path: Path, frames: Iterator[np.ndarray], fps: int) -> None:
    """With imageio's ffmpeg writer, frame by frame. H.264 wants sides that are multiples of
    16: frames are padded with white rather than rescaled. ffmpeg runs as a subprocess (fork
    then exec at once, which is safe, though JAX warns about any fork)."""
    import imageio.v2 as imageio

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        writer = imageio.get_writer(path, format="FFMPEG", fps=fps, macro_block_size=1)
        try:
            for frame in frames:
                h, w = frame.shape[:2]
                pad = ((0, -h % 16), (0, -w % 16), (0, 0))
                writer.append_data(np.pad(frame, pad, constant_values=255))
        finally:
            writer.close()


def draw_episodes(
    adapter: Any, params: Any, episodes: list[EpisodeSteps], title: str = ""
) -> Iterator[np.ndarray]:
    """Frames of `episodes` one after another, drawn as they are asked for: T + 1 per episode
    of T steps (its first state, then the outcome of each action), each the environment's
    picture of the state (when `adapter` is `Renderable` and has one) or of the observation,
    under a caption."""
    if not episodes:
        return
    first = jax.tree.map(lambda x: x[0], episodes[0].state)
    own = isinstance(adapter, Renderable) and adapter.render(first, params) is not None
    picture = None if own else ObservationPicture([e.obs for e in episodes])
    names = adapter.action_names(params) if isinstance(adapter, NamesActions) else None
    for i, ep in enumerate(episodes):
        head = f"{title}  episode {i + 1}/{len(episodes)}".strip()
        steps, ret = len(ep.reward), 0.0
        for k in range(steps + 1):
            if own:
                image = adapter.render(jax.tree.map(lambda x, k=k: x[k], ep.state), params)
            else:
                image = picture.draw(jax.tree.map(lambda x, k=k: x[k], ep.obs))
            if k == 0:
                lines = (head, f"start (step 0/{steps})", "return 0.00")
            else:
                reward = float(ep.reward[k - 1])
                ret += reward
                outcome = f"reward {reward:.2f}  return {ret:.2f}"
                if k == steps:
                    outcome += "  " + ENDINGS[ep.end]
                action = action_text(ep.action[k - 1], names)
                lines = (head, f"step {k}/{steps}  action {action}", outcome)
            yield with_caption(np.asarray(image, np.uint8), lines)


# The last frame's caption, by EpisodeSteps.end.
ENDINGS = {"terminated": "terminated", "truncated": "truncated (time limit)", "": "step limit"}


def action_text(action: np.ndarray, names: list[str] | None = None) -> str:
    """An action for a caption: a discrete one by its name when `names` has one for it (with
    its number), else its number; a continuous one as its first six entries."""
    a = np.asarray(action)
    if a.ndim == 0 and a.dtype.kind in "iub":
        i = int(a)
        return f"{names[i]} ({i})" if names is not None and 0 <= i < len(names) else str(i)
    if a.ndim == 0:
        return f"{a.item():.2f}"
    return "[" + " ".join(f"{v:.2f}" for v in a.reshape(-1)[:6]) + (" ...]" if a.size > 6 else "]")


def with_caption(image: np.ndarray, lines: tuple[str, ...]) -> np.ndarray:
    """`image` (uint8 RGB [H, W, 3]) under a white strip with `lines` of text, widened with
    white to at least `CAPTION_WIDTH` so that the text fits; the same size for every frame."""
    from PIL import Image, ImageDraw

    h, w = image.shape[:2]
    strip = 4 + 12 * len(lines)
    width = max(w, CAPTION_WIDTH)
    canvas = Image.new("RGB", (width, h + strip), "white")
    canvas.paste(Image.fromarray(image[..., :3]), ((width - w) // 2, strip))
    draw = ImageDraw.Draw(canvas)
    for k, line in enumerate(lines):
        draw.text((4, 2 + 12 * k), line, fill="black", font=_font())
    return np.asarray(canvas)


CAPTION_WIDTH = 360  # pixels: the caption's numbers fit in this


@functools.cache
def _font() -> Any:
    from PIL import ImageFont

    return ImageFont.load_default()


class ObservationPicture:
    """The generic picture of an observation, for environments that draw nothing of their own:
    its first rank-3 entry as an image (1 or 3 channels as they are, more as the index of the
    highest set channel, like MinAtar's pictures), otherwise a bar plot of all its entries with
    the y-range of the whole recording, so bars do not jump between frames."""

    def __init__(self, recorded: list[Any]):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        leaves = jax.tree.leaves(recorded[0])
        self.image_leaf = next((i for i, x in enumerate(leaves) if x.ndim == 4), None)  # [T, ...]
        fig = Figure(figsize=(5, 4), dpi=80)
        self.canvas = FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        if self.image_leaf is not None:
            sample = self._image(leaves[self.image_leaf][0])
            self.artist = ax.imshow(sample, interpolation="none", **self._norm(leaves))
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title("observation")
        else:
            flat = [self._flat(r) for r in recorded]  # each [T, N]
            lo = min(float(f.min()) for f in flat)
            hi = max(float(f.max()) for f in flat)
            pad = 0.05 * (hi - lo) or 1.0
            n = flat[0].shape[1]
            self.artist = ax.bar(np.arange(n), np.zeros(n), color="tab:blue")
            ax.set_ylim(min(lo, 0.0) - pad, max(hi, 0.0) + pad)
            ax.axhline(0.0, color="black", linewidth=0.5)
            ax.set_xlabel("observation entry")
            ax.set_title("observation")
        fig.tight_layout()

    @staticmethod
    def _flat(tree: Any) -> np.ndarray:
        """[T, N] float: every leaf of a [T, ...] observation tree, flattened and joined."""
        leaves = jax.tree.leaves(tree)
        return np.concatenate(
            [np.asarray(x, np.float32).reshape(x.shape[0], -1) for x in leaves], axis=1
        )

    def _norm(self, leaves: list) -> dict[str, Any]:
        x = leaves[self.image_leaf]
        c = x.shape[-1]
        if c == 1:
            return {"cmap": "gray", "vmin": float(np.min(x)), "vmax": float(np.max(x))}
        if c == 3:
            return {}
        return {"cmap": "cubehelix", "vmin": 0, "vmax": c}

    @staticmethod
    def _image(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float32)
        c = x.shape[-1]
        if c == 1:
            return x[..., 0]
        if c == 3:
            return np.clip(x / 255.0 if x.max() > 1.0 else x, 0.0, 1.0)
        # Several binary channels: each cell's highest set channel (1..C), 0 where none is set.
        return np.max((x > 0) * (np.arange(c) + 1), axis=-1)

    def draw(self, obs: Any) -> np.ndarray:
        leaves = jax.tree.leaves(obs)
        if self.image_leaf is not None:
            self.artist.set_data(self._image(leaves[self.image_leaf]))
        else:
            values = self._flat(jax.tree.map(lambda x: np.asarray(x)[None], obs))[0]
            for bar, v in zip(self.artist, values, strict=True):
                bar.set_height(float(v))
        self.canvas.draw()
        return np.asarray(self.canvas.buffer_rgba())[..., :3].copy()
