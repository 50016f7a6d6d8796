"""Videos of a policy: `anakin render` from a checkpoint (gymnax's own pictures, and the generic
picture of the observation), `--render-every` while training, and the command's errors."""

import dataclasses
import importlib.util
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

pytest.importorskip("imageio", reason='videos need the render extra: pip install -e ".[render]"')
pytest.importorskip("pygame", reason='videos need the render extra: pip install -e ".[render]"')

from anakin.algorithms import impala  # noqa: E402

from anakin import (  # noqa: E402
    cli,
    envs,  # noqa: E402
    logger,
    policy,
    runner,
    video,
)
from anakin.config import EvalConfig, RenderConfig, TrainConfig  # noqa: E402
from anakin.types import Layout  # noqa: E402

CAPTION = 28  # pixels of the caption strip above each picture (two lines)


def gif_frames(path) -> list[np.ndarray]:
    """Every frame of a GIF, read back with imageio (Pillow), as RGB arrays."""
    import imageio.v3 as iio

    return list(iio.imread(path, index=None, extension=".gif", mode="RGB"))


def train_tiny(tmp_path, name: str, env: str, **kw) -> runner.RunResult:
    algo, arch = impala.PRESETS["tiny"]
    cfg = TrainConfig(
        algo=algo,
        env=env,
        arch=dataclasses.replace(arch, total_env_steps=128),
        eval=EvalConfig(episodes=0),
        out=str(tmp_path),
        run_name=name,
        quiet=True,
        **kw,
    )
    return runner.train("impala", cfg)


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("render"), "cartpole", "CartPole-v1").run_dir


def test_cartpole_video_from_a_checkpoint_uses_gymnax_pictures(cartpole_run, tmp_path):
    out = tmp_path / "agent.gif"
    result = policy.render_checkpoint(cartpole_run, out, episodes=2, max_steps=40, fps=20)
    frames = gif_frames(out)
    # One frame per step of each episode, episodes one after another.
    assert len(result["lengths"]) == 2 and all(1 <= n <= 40 for n in result["lengths"])
    assert len(frames) == result["frames"] == sum(result["lengths"])
    assert result["bytes"] == out.stat().st_size > 0 and result["step"] == 128
    # gymnax's picture of CartPole (Gymnasium's 600x400 classic-control drawing) under a caption.
    assert frames[0].shape == (400 + CAPTION, 600, 3)
    env, params = envs.make("CartPole-v1")
    _, state = env.unwrapped.reset_env(jax.random.PRNGKey(0), params)
    picture = env.unwrapped.render(jax.tree.map(np.asarray, state), params)
    assert picture.shape == (400, 600, 3) and picture.dtype == np.uint8
    assert len({f.tobytes() for f in frames}) == len(frames)  # every step's frame differs
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


@pytest.mark.parametrize("name", ["Catch-bsuite", "Breakout-MinAtar"])
def test_gymnax_matplotlib_pictures_follow_the_state(name):
    env, params = envs.make(name)
    adapter = env.unwrapped
    _, s0 = adapter.reset_env(jax.random.PRNGKey(0), params)
    _, s1, *_ = adapter.step_env(jax.random.PRNGKey(1), s0, 0, params)
    a, b = (adapter.render(jax.tree.map(np.asarray, s), params) for s in (s0, s1))
    assert a.shape == b.shape == (320, 320, 3) and a.dtype == np.uint8  # 4x4 inches, 80 dpi
    assert not np.array_equal(a, b)  # the ball moved


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # ffmpeg's fork + exec is safe
def test_mp4_needs_imageio_ffmpeg(cartpole_run, tmp_path, monkeypatch):
    out = tmp_path / "agent.mp4"
    if importlib.util.find_spec("imageio_ffmpeg") is not None:
        import imageio.v3 as iio

        result = policy.render_checkpoint(cartpole_run, out, max_steps=10)
        frames = iio.imread(out, plugin="FFMPEG", index=None)
        assert frames.shape == (result["frames"], 432, 608, 3)  # 418x600, padded to 16s
        out.unlink()
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "imageio_ffmpeg" else real(name, *a),
    )
    with pytest.raises(ValueError, match="imageio-ffmpeg"):
        policy.render_checkpoint(cartpole_run, out)
    assert not list(tmp_path.iterdir())


def test_environment_without_a_picture_gets_a_bar_plot_of_its_observation(tmp_path):
    env, params = envs.make("MemoryChain-bsuite")
    assert env.unwrapped.render(None, params) is None  # gymnax draws nothing of this one
    algo, arch = impala.PRESETS["tiny"]
    algorithm = impala.make_impala(
        algo, envs.spec(env, params), Layout(arch.num_envs, 1, arch.rollout_length)
    )
    learner = algorithm.init(jax.random.PRNGKey(0))
    film = policy.make_filmer(algorithm, env, params, episodes=2, max_steps=12, title="chain")
    result = film(
        jax.device_put(jax.tree.map(lambda x: x[None], learner), policy.film_devices()[0]),
        jax.random.PRNGKey(1),
    )
    frames = list(result.frames)
    assert len(frames) == int(result.lengths.sum()) > 2
    assert frames[0].shape == (320 + CAPTION, 400, 3)  # the 5x4 inch plot at 80 dpi
    out = tmp_path / "chain.gif"
    assert video.write_video(out, iter(frames), fps=10) == (len(frames), out.stat().st_size)
    back = gif_frames(out)
    assert len(back) == len(frames)
    # A palette of at most 256 colours: close to the drawn frame, not equal.
    assert np.mean(np.abs(back[1].astype(int) - frames[1])) < 2


def test_image_observations_are_drawn_as_images():
    class NoPicture:  # an adapter without the render hook
        pass

    rng = np.random.default_rng(0)
    steps = video.EpisodeSteps(
        state=np.zeros(3),
        obs=(rng.random((3, 10, 10, 4)) > 0.7).astype(np.float32),  # MinAtar-like channels
        action=np.array([0, 2, 1]),
        reward=np.array([0.0, 1.0, 0.0], np.float32),
    )
    frames = list(video.draw_episodes(NoPicture(), None, [steps], "img"))
    assert len(frames) == 3 and frames[0].shape == (320 + CAPTION, 400, 3)
    assert not np.array_equal(frames[0], frames[1])


def test_render_every_writes_videos_while_training(tmp_path):
    every = 64  # each of the two calls
    result = train_tiny(
        tmp_path, "every", "CartPole-v1", render=RenderConfig(every, episodes=1, max_steps=20)
    )
    videos = sorted(p.name for p in (result.run_dir / "videos").iterdir())
    assert videos == ["step_128.gif", "step_64.gif"]
    records = logger.read_metrics(result.run_dir)
    assert [r.get("video") for r in records] == ["videos/step_64.gif", "videos/step_128.gif"]
    frames = gif_frames(result.run_dir / "videos" / "step_64.gif")
    assert 1 <= len(frames) <= 20
    assert result.summary["render_time"] > 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--episodes", "0"], "--episodes=0 must be >= 1"),
        (["--fps", "0"], "--fps=0 must be >= 1"),
        (["--out", "{tmp}"], "is a directory"),
        (["--out", "{tmp}/nowhere/a.gif"], "does not exist"),
        (["--out", "{tmp}/file.txt/a.gif"], "does not exist"),
        (["--out", "{tmp}/a.png"], "write a .gif or .mp4 file"),
        (["--out", "{tmp}/old.gif"], "already exists; pass --overwrite"),
    ],
)
def test_render_errors_write_nothing(cartpole_run, tmp_path, capsys, args, message):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "old.gif").write_bytes(b"old")
    before = sorted(tmp_path.iterdir())
    args = [a.format(tmp=tmp_path) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "a.gif")]
    assert cli.main(["render", str(cartpole_run), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("anakin render: error:") and message in err and "\n" not in err
    assert sorted(tmp_path.iterdir()) == before
    assert (tmp_path / "old.gif").read_bytes() == b"old"


def test_bad_render_settings_stop_training_before_compiling(capsys):
    assert cli.main(["train", "impala", "--preset", "tiny", "--render-every", "-64"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "anakin train: error: render.every_env_steps=-64 must be >= 0"


def test_render_command_errors_in_a_subprocess(cartpole_run, tmp_path):
    exe = shutil.which("anakin")
    cmd = [exe] if exe else [sys.executable, "-m", "anakin.cli"]
    for args, message in [
        ([str(tmp_path / "no-such-run"), "--out", str(tmp_path / "a.gif")], "does not exist"),
        ([str(cartpole_run), "--out", str(tmp_path / "a.gif"), "--episodes", "0"], "must be >= 1"),
    ]:
        proc = subprocess.run([*cmd, "render", *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert proc.stderr.strip().startswith("anakin render: error:") and message in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())
