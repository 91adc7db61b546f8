#!/bin/bash
# SFT parity: float32 products vs bfloat16 products on the same demonstrations and seed.
cd /work/main
common="--config experiments/configs/memex_sft.py --config.games.num=24 --config.demos.num=16 --config.heldout.one_in=4 --config.heldout.every=5 --config.heldout.patience=0 --config.num_steps=20 --config.log_every=1"
start=$(date +%s)
python -m experiments.memex_sft $common --config.workdir=/work/runs/sft_f32 > /work/runs/sft_f32.log 2>&1
echo "f32 done $(( $(date +%s) - start )) s" >> /work/runs/sft_parity.times
start=$(date +%s)
python -m experiments.memex_sft $common --config.workdir=/work/runs/sft_bf16 --config.demos.dir=/work/runs/sft_f32/demonstrations --config.model.matmul_dtype=bfloat16 > /work/runs/sft_bf16.log 2>&1
echo "bf16 done $(( $(date +%s) - start )) s" >> /work/runs/sft_parity.times
