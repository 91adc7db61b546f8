"""ALFWorld on its real engine: game generator, Memex harder wrapper, env pool."""
