"""Static task suites (HumanEval, MMLU, GSM-symbolic, BIG-bench) as tfds builders and one-step Envs.

Modules: sources (package data -> TaskRecord), bigbench_sdist (BIG-bench task files),
builders (tfds array_record builders), metrics (official metrics), sandbox (contained code
execution), env (StaticTaskEnv).
"""
