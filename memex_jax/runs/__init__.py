"""What running an experiment needs beside the method: start-up, config sections, sharded train
state, checkpoints and params exports, the metrics log, FLOPs accounting and plots."""

from memex_jax.runs import compiles
from memex_jax.runs.checkpoint import Checkpointer, Restored, key_from_json, key_to_json
from memex_jax.runs.config_sections import ConfigError, from_section
from memex_jax.runs.log import RunLog
from memex_jax.runs.params_export import EXPORT_DIR, export_params, import_params
from memex_jax.runs.start import exits_on_config_error, quiet_library_logs, start_run
from memex_jax.runs.training import ShardedTraining, restore_latest, sharded_training

__all__ = [
    "Checkpointer", "ConfigError", "compiles", "EXPORT_DIR", "Restored", "RunLog", "ShardedTraining", "exits_on_config_error",
    "export_params", "from_section", "import_params", "key_from_json", "key_to_json",
    "quiet_library_logs", "restore_latest", "sharded_training", "start_run",
]
