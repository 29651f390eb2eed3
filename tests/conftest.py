"""Test configuration shared by every test module.

float64 is enabled so that float64 cases exist; float32 inputs stay float32 (the library keeps the
input's precision). Strict promotion catches accidental dtype/rank mixing inside the library.
"""

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
