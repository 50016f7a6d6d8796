"""Videos of a policy: `anakin render` from a checkpoint (gymnax's own pictures, and the generic
picture of the observation), each step's frame showing its action's outcome, actions by name,
`--render-every` while training, and the command's errors."""

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
from filming import CAPTION, film, picture, state_at  # noqa: E402

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
    # Each episode's first state, then one frame per step, episodes one after another.
    assert len(result["lengths"]) == 2 and all(1 <= n <= 40 for n in result["lengths"])
    assert len(frames) == result["frames"] == sum(result["lengths"]) + 2
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
        assert frames.shape == (result["frames"], 448, 608, 3)  # 440x600, padded to 16s
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
    assert len(frames) == int(result.lengths.sum()) + 2 > 4
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
        state=np.zeros(4),
        obs=(rng.random((4, 10, 10, 4)) > 0.7).astype(np.float32),  # MinAtar-like channels
        action=np.array([0, 2, 1]),
        reward=np.array([0.0, 1.0, 0.0], np.float32),
    )
    frames = list(video.draw_episodes(NoPicture(), None, [steps], "img"))
    assert len(frames) == 4 and frames[0].shape == (320 + CAPTION, 400, 3)
    assert not np.array_equal(frames[0], frames[1])


class Counter:
    """An adapter whose picture of state s is an 8x8 image of grey level 10 * s, with names."""

    def render(self, state, params):
        return np.full((8, 8, 3), 10 * int(state), np.uint8)

    def action_names(self, params):
        return ["down", "up"]


def test_each_frame_is_the_state_its_action_reached_under_its_caption():
    ep = video.EpisodeSteps(
        state=np.array([0, 1, 2, 3]),  # s_0, then the state after each of the 3 actions
        obs=np.zeros((4, 1)),
        action=np.array([1, 1, 0]),
        reward=np.array([0.0, 0.5, 1.0], np.float32),
        end="terminated",
    )
    frames = list(video.draw_episodes(Counter(), None, [ep, ep._replace(end="")], "count"))
    assert len(frames) == 8 and {f.shape for f in frames} == {(8 + CAPTION, 360, 3)}
    for k, frame in enumerate(frames[:4]):
        assert (picture(frame, 8) == 10 * k).all()  # frame k: the state after action k - 1
    captions = [f[:CAPTION].tobytes() for f in frames]
    assert len(set(captions)) == 8  # step, action, reward, return, ending, episode all differ


def test_actions_are_named_where_the_environment_names_them():
    assert video.action_text(np.int32(1), ["left", "right"]) == "right (1)"
    assert video.action_text(np.int32(2), None) == "2"
    assert video.action_text(np.float32(0.25)) == "0.25"
    assert video.action_text(np.arange(8, dtype=np.float32)) == (
        "[0.00 1.00 2.00 3.00 4.00 5.00 ...]"
    )
    names = {
        n: envs.make(n)[0].unwrapped.action_names(envs.make(n)[1])
        for n in ("CartPole-v1", "Catch-bsuite", "Breakout-MinAtar", "Seaquest-MinAtar")
    }
    assert names["CartPole-v1"] == ["left", "right"]
    assert names["Catch-bsuite"] == ["left", "stay", "right"]
    assert names["Breakout-MinAtar"] == ["noop", "left", "right"]  # its minimal action set
    assert names["Seaquest-MinAtar"] == ["noop", "left", "up", "right", "down", "fire"]
    for unnamed in ("DeepSea-bsuite", "Pendulum-v1", "SimpleBandit-bsuite"):
        env, params = envs.make(unnamed)
        assert env.unwrapped.action_names(params) is None


def test_catch_frames_show_each_actions_outcome_and_the_last_the_catch_or_miss():
    env, params = envs.make("Catch-bsuite")
    adapter = env.unwrapped
    stay = 1  # the paddle stays in the middle column; the ball falls in a random one
    result, frames = film(env, params, [stay], episodes=8, max_steps=20, seed=3)
    assert list(result.lengths) == [9] * 8  # the ball falls 9 rows
    assert len(frames) == 8 * 10
    rewards = []
    for i, ep in enumerate(result.episodes):
        assert ep.end == "terminated" and float(ep.reward.sum()) == result.returns[i]
        for k in range(9):  # each recorded state is the one its action reached
            _, reached, *_ = adapter.step_env(
                jax.random.PRNGKey(0), state_at(ep, k), int(ep.action[k]), params
            )
            assert all(jax.tree.leaves(jax.tree.map(np.array_equal, reached, state_at(ep, k + 1))))
        end = state_at(ep, 9)
        assert int(end.ball_y) == 9  # the last state: the ball in the paddle's row
        caught = int(end.ball_x) == int(end.paddle_x)
        assert float(ep.reward[-1]) == (1.0 if caught else -1.0)
        rewards.append(float(ep.reward[-1]))
        last = picture(frames[10 * i + 9], 320)
        assert np.array_equal(last, adapter.render(end, params))
        assert not np.array_equal(last, picture(frames[10 * i + 8], 320))
    assert 1.0 in rewards and -1.0 in rewards  # a catch and a miss, both drawn


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
    assert 2 <= len(frames) <= 21
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
