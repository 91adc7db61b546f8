"""MemexRL learning: segment packing, GRPO advantages, the policy loss and the learner step."""

from memex_jax.rl.advantages import (ADVANTAGE_ESTIMATORS, AdvantageResult, estimate_advantages,
                                     grpo, trajectory_rewards)
from memex_jax.rl.batch import (PADDING_SEGMENT, PADDING_TRAJECTORY, PackedBatch, PackStats,
                                empty_batch, pack_segments)
from memex_jax.rl.learner import (LOGPROB_FIELDS, TrainState, fill_logprobs, jit_sft_step,
                                  jit_train_step, make_optimizer, ppo_iteration, sft_step,
                                  token_logprobs, train_step)
from memex_jax.rl.losses import (NORMALISATIONS, LossConfig, policy_loss, sequence_mean_weights,
                                 sft_loss, token_mean_weights, trajectory_mean_weights)

__all__ = [
    "ADVANTAGE_ESTIMATORS", "AdvantageResult", "LOGPROB_FIELDS", "LossConfig", "NORMALISATIONS",
    "PADDING_SEGMENT", "PADDING_TRAJECTORY", "PackStats", "PackedBatch", "TrainState",
    "empty_batch", "estimate_advantages", "fill_logprobs", "grpo", "jit_sft_step",
    "jit_train_step", "make_optimizer", "pack_segments", "policy_loss", "ppo_iteration",
    "sequence_mean_weights", "sft_loss", "sft_step", "token_logprobs", "token_mean_weights",
    "train_step", "trajectory_mean_weights", "trajectory_rewards",
]
