#!/usr/bin/env bash
# Every GPU check of issues 22 and 23, for a session that is lent a GPU, in one run (under 10
# minutes on one H200): behaviour tests (bf16 activations, fp16 GradScaler and a skipped overflow,
# the loss falls, CUDA peak memory against its prediction), then one figure per line: rank step
# times, pinned vs pageable copies, checkpointing on vs off, and 1, 2 and 4 MiniLM trials packed
# on one GPU. Results land in bench/results/*.json. A part that fails is reported and the rest
# still runs: device time is short, and one broken part should not cost the others.
set -uo pipefail
cd "$(dirname "$0")/.."
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('gpu', torch.cuda.get_device_name(0), 'torch', torch.__version__)" || exit 1
status=0
part() { echo "== $*"; timeout 300 "$@" || { echo "gpu_check FAILED: $*"; status=1; }; }
part python -m pytest -q -s -p no:cacheprovider tests/gpu
part python bench/gpu_timings.py
part python bench/checkpointing.py --repeats 2
part python bench/gpu_packing.py
exit $status
