"""Rotary position embeddings with the frequency-scaling variants of the llama/qwen families."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from memex_jax.models.config import RopeScaling


def _yarn(inv_freq: np.ndarray, head_dim: int, theta: float,
          s: RopeScaling) -> tuple[np.ndarray, float]:
  """YaRN: interpolate low frequencies, keep high ones, blend linearly between the two bands."""

  def dim_of_rotations(rotations: float) -> float:
    # The head dimension whose wavelength fits `rotations` times in the pretraining context.
    return (head_dim * math.log(s.original_max_position / (rotations * 2 * math.pi))
            / (2 * math.log(theta)))

  low, high = dim_of_rotations(s.beta_fast), dim_of_rotations(s.beta_slow)
  if s.truncate:
    low, high = math.floor(low), math.ceil(high)
  low, high = max(low, 0), min(high, head_dim - 1)
  if low == high:
    high += 1e-3
  ramp = np.clip((np.arange(head_dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
  keep = 1.0 - ramp  # 1 where the frequency is extrapolated (left unscaled)
  blended = inv_freq / s.factor * (1.0 - keep) + inv_freq * keep
  attention_factor = s.attention_factor
  if attention_factor is None:
    attention_factor = 1.0 if s.factor <= 1 else 0.1 * math.log(s.factor) + 1.0
  return blended, attention_factor


def _llama3(inv_freq: np.ndarray, s: RopeScaling) -> np.ndarray:
  """Llama-3: scale long wavelengths by 1/factor, keep short ones, smooth in between."""
  low_wavelen = s.original_max_position / s.low_freq_factor
  high_wavelen = s.original_max_position / s.high_freq_factor
  wavelen = 2 * math.pi / inv_freq
  scaled = np.where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq)
  smooth = (s.original_max_position / wavelen - s.low_freq_factor) / (
      s.high_freq_factor - s.low_freq_factor)
  smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled
  medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
  return np.where(medium, smoothed, scaled)


def inverse_frequencies(head_dim: int, theta: float,
                        scaling: RopeScaling | None) -> tuple[np.ndarray, float]:
  """Returns (inv_freq [Dh/2] float32, attention_factor) for the given scaling variant."""
  inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
  factor = 1.0
  if scaling is None or scaling.rope_type == "default":
    pass
  elif scaling.rope_type == "linear":
    inv_freq = inv_freq / scaling.factor
  elif scaling.rope_type == "llama3":
    inv_freq = _llama3(inv_freq, scaling)
  elif scaling.rope_type == "yarn":
    inv_freq, factor = _yarn(inv_freq, head_dim, theta, scaling)
  return inv_freq.astype(np.float32), float(factor)


def rotary_tables(positions: jnp.ndarray, inv_freq: np.ndarray,
                  attention_factor: float) -> tuple[jnp.ndarray, jnp.ndarray]:
  """cos, sin tables [B T Dh] for integer positions [B T]."""
  angles = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)  # B T Dh/2
  angles = jnp.concatenate([angles, angles], axis=-1)  # B T Dh
  return jnp.cos(angles) * attention_factor, jnp.sin(angles) * attention_factor


def apply_rotary(x: jnp.ndarray, cos: jnp.ndarray, sin: jnp.ndarray) -> jnp.ndarray:
  """Rotates x [B T N Dh] by the tables [B T Dh] (half-split convention)."""
  half = x.shape[-1] // 2
  rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
  cos, sin = cos[:, :, None, :], sin[:, :, None, :]
  return (x.astype(jnp.float32) * cos + rotated.astype(jnp.float32) * sin).astype(x.dtype)
