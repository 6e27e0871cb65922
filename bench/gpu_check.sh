#!/usr/bin/env bash
# Every GPU check of issue 22, for a session that is lent a GPU, in one run (under 10 minutes on
# one H200): behaviour tests (bf16 activations, fp16 GradScaler and a skipped overflow, the loss
# falls, CUDA peak memory against its prediction), then one figure per line: rank step times,
# pinned vs pageable copies, checkpointing on vs off. Results land in bench/results/*.json.
set -euo pipefail
cd "$(dirname "$0")/.."
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('gpu', torch.cuda.get_device_name(0))"
python -m pytest -q -s -p no:cacheprovider tests/gpu
python bench/gpu_timings.py
python bench/checkpointing.py --repeats 2
