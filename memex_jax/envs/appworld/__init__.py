"""AppWorld on its real engine, run out of process in its own venv (see `install`)."""
