"""Entry points run as `python -m experiments.<name> --config experiments/configs/<name>.py`.

The MemexRL learner entry points (memex_sft, memex_grpo, evaluate) arrive with the learner.
"""
