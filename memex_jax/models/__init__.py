"""Functional Flax decoders (llama / qwen2 / qwen3), int4 QAT and weight I/O."""

from memex_jax.models.config import ModelConfig, RopeScaling, qwen2_5_0_5b, smollm2_135m, tiny
from memex_jax.models.logprobs import chunked_logprobs, sequence_logprobs
from memex_jax.models.pretrained import PretrainedNotInstalledError, smollm2_gguf_path
from memex_jax.models.quant import to_int4_serving
from memex_jax.models.transformer import Transformer, attention_mask, head_kernel, init_cache
