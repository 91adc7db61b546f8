"""ALFWorld on its real engine: instructions, game generator, Memex harder wrapper, tfds."""
