"""An OpenAI-compatible chat-completions server in front of the JAX sampler.

Modules: model (load any model the project reads), protocol (the wire format and the project's
tool format), batching (requests onto the sampler's slots), app (the HTTP routes), __main__
(`python -m memex_jax.serve`), process (the server as a child process, for benches and tests).
The HTTP parts need the `serve` extra.
"""
