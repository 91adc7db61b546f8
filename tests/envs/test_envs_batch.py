"""envs.batch: one pool call per round for pooled views, plain envs in turn, errors per episode."""

from memex_jax.envs import batch
from memex_jax.envs.pool import EnvPool
from memex_jax.envs.pooled import PooledEnv
from memex_jax.envs.toy import VaultEnv, VaultTask


class RecordingPool(EnvPool):
  """A real EnvPool that also records which episodes each start/step call carried."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.calls = []

  def start(self, episodes):
    self.calls.append(("start", sorted(e.episode_id for e in episodes)))
    return super().start(episodes)

  def step(self, commands):
    self.calls.append(("step", sorted(commands)))
    return super().step(commands)


class SilentVault(VaultEnv):
  """A VaultEnv whose step info omits changed_state: the seam's changes_state answers it."""

  def step(self, command):
    observation, done, won, _ = super().step(command)
    return observation, done, won, {}


class BrokenStepVault(VaultEnv):
  def step(self, command):
    raise OSError(f"engine lost while running {command!r}")


def test_pooled_views_share_one_call_and_replies_keep_input_order():
  tasks = [VaultTask(seed=s, corridor_length=2) for s in (1, 2, 3)]
  with RecordingPool(VaultEnv, num_workers=3, step_timeout_s=20) as pool:
    views = [PooledEnv(pool, episode_id=i) for i in (2, 0)]
    plain, silent = VaultEnv(), SilentVault()
    envs = [views[0], plain, views[1], silent, VaultEnv()]
    resets = batch.reset_envs(envs, [tasks[0], tasks[1], tasks[2], tasks[0], "not a task"])
    assert pool.calls == [("start", [0, 2])]
    # Each reply is its own env's: compare with fresh in-process envs on the same tasks.
    for reply, task in zip(resets[:4], [tasks[0], tasks[1], tasks[2], tasks[0]]):
      assert (reply.task_text, reply.observation) == VaultEnv().reset(task) and not reply.error
    assert resets[4].error.startswith("TypeError: VaultEnv.reset takes a VaultTask")

    commands = ["read note", "go east", "look", "read note"]
    replies = batch.step_envs(envs[:4], commands)
    assert pool.calls[1:] == [("step", [0, 2])]
    for reply, task, command in zip(replies, [tasks[0], tasks[1], tasks[2], tasks[0]], commands):
      reference = VaultEnv()
      reference.reset(task)
      observation, done, won, info = reference.step(command)
      assert (reply.observation, reply.done, reply.won, reply.changed, reply.error) == (
          observation, done, won, info["changed_state"], "")
    assert replies[3].changed  # from SilentVault.changes_state: its info had no changed_state


def test_a_raising_env_gets_an_error_reply_and_the_others_still_step():
  task = VaultTask(seed=5, corridor_length=2)
  with RecordingPool(VaultEnv, num_workers=1, step_timeout_s=20) as pool:
    envs = [BrokenStepVault(), PooledEnv(pool, episode_id=7), VaultEnv()]
    assert not any(r.error for r in batch.reset_envs(envs, [task] * 3))
    replies = batch.step_envs(envs, ["go east"] * 3)
    assert replies[0].error == "OSError: engine lost while running 'go east'"
    assert not replies[0].done and not replies[0].observation
    assert replies[1].changed and replies[2].changed and not replies[1].error
    # Views of a pool whose episode is not running: the whole group errs, nothing raises.
    [stale] = batch.step_envs([PooledEnv(pool, episode_id=99)], ["look"])
    assert stale.error.startswith("KeyError")
