"""Decoding on a device mesh equals decoding on one device: the jitted stages and the sampler."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from memex_jax import parallel
from memex_jax.agent.policy import TurnRequest
from memex_jax.models import config
from memex_jax.models import transformer
from memex_jax.sampling import decode
from memex_jax.sampling import sampler as sampler_lib
from memex_jax.sampling import sharded
from memex_jax.sampling import stops

CFG = config.tiny("qwen2")


@pytest.mark.slow
def test_sharded_stages_equal_generate_on_one_device():
  mesh = parallel.make_mesh(parallel.MeshConfig(data=2, fsdp=2, tensor=2))
  ids = jnp.zeros((1, 1), jnp.int32)
  params = nn.meta.unbox(
      transformer.Transformer(CFG).init(jax.random.PRNGKey(0), ids, ids)["params"])
  b, prompt_len, slots, new = 4, 5, 16, 6
  table = stops.build_stop_table([chr(33 + i % 90) for i in range(CFG.vocab_size)], ["}}"], [1])
  prompt = np.random.default_rng(2).integers(2, CFG.vocab_size, (b, prompt_len)).astype(np.int32)
  args = (table, jnp.asarray(prompt), jnp.zeros((b,), jnp.int32),
          jnp.asarray([5, 3, 4, 5], jnp.int32), jnp.full((b,), new, jnp.int32),
          jax.random.PRNGKey(3), jnp.float32(0.0), jnp.float32(1.0))
  want = decode.generate(CFG, params, transformer.init_cache(CFG, b, slots), *args,
                         max_new_tokens=new)

  params_sh = parallel.param_shardings(CFG, mesh)
  params_mesh = jax.device_put(params, params_sh)
  table_, prompt_, start, length, max_tokens, rng, temperature, top_p = args
  cache = jax.device_put(transformer.init_cache(CFG, b, slots), sharded.cache_sharding(mesh))
  cache, logits = sharded.shard_prefill(CFG, mesh, params_sh)(params_mesh, cache, prompt_, start,
                                                               length)
  got = sharded.shard_decode_steps(CFG, mesh, params_sh, new)(
      params_mesh, cache, logits, stops.empty_window(table_, b), table_, start + length,
      length > 0, max_tokens, rng, temperature, top_p)
  np.testing.assert_array_equal(got.tokens, want.tokens)
  np.testing.assert_array_equal(got.num_tokens, want.num_tokens)
  np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5)
  np.testing.assert_allclose(got.cache["k"], want.cache["k"], atol=1e-5)
  assert got.cache["k"].sharding.spec == P(None, ("data", "fsdp"))


@pytest.mark.slow
def test_sampler_on_a_mesh_takes_the_same_turns_as_on_one_device(smollm2, smollm2_tokenizer):
  cfg, params = smollm2
  tok = smollm2_tokenizer
  # SmolLM2 has 9 heads, so no tensor split; the 8 slots split over data x fsdp = 2 x 4.
  mesh = parallel.make_mesh(parallel.MeshConfig(data=2, fsdp=4, tensor=1))
  config_ = sampler_lib.SamplerConfig(num_slots=8, cache_length=128, prompt_bucket=32,
                                      new_tokens_bucket=16, temperature=0.0)
  prompts = ["Name a colour.", "Count to three.", "Say hello."]
  first = [TurnRequest(i, tuple(tok.encode(f"<|im_start|>user\n{p}<|im_end|>\n"
                                           "<|im_start|>assistant\n")), True, 6)
           for i, p in enumerate(prompts)]
  follow = tuple(tok.encode("<|im_end|>\n<|im_start|>user\nMore?<|im_end|>\n"
                            "<|im_start|>assistant\n"))
  turns = {}
  for name, mesh_ in (("one device", None), ("mesh", mesh)):
    sampler = sampler_lib.Sampler(cfg, params, tok, config_, mesh=mesh_)
    turns[name] = sampler.generate(first)
    turns[name] += sampler.generate([TurnRequest(i, follow, False, 5) for i in range(3)])
    if mesh_ is not None:  # the cache stays split over the batch axes across turns
      assert sampler.cache["k"].sharding.spec == P(None, ("data", "fsdp"))
      sampler.params = params  # swapped params are placed in the training layout
      assert jax.tree.leaves(sampler.params)[0].sharding.mesh == mesh
  for want, got in zip(turns["one device"], turns["mesh"]):
    assert got.ids == want.ids
    np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-4)


def test_slots_that_do_not_split_over_the_mesh_are_a_one_line_error(smollm2, smollm2_tokenizer):
  cfg, params = smollm2
  mesh = parallel.make_mesh(parallel.MeshConfig(data=2, fsdp=4, tensor=1))
  with pytest.raises(ValueError, match="sampler num_slots 6 is not divisible by data\\*fsdp"):
    sampler_lib.Sampler(cfg, params, smollm2_tokenizer,
                        sampler_lib.SamplerConfig(num_slots=6, cache_length=64), mesh=mesh)
