#!/usr/bin/env bash
# The FSA paper's Figure 1 grid (M = 10⁵, k = 500, N = 10⁴ … 10⁶) on one GPU, in four calls of
# reproduce_fsa_fig1.py and a combine:
#   N = 10⁴, 3·10⁴      FSA on X in device memory, LogitBoost (all M learners per round)
#   N = 10⁵             FSA streamed from the counter-based source, LogitBoost on X in device memory
#   N = 3·10⁵, 10⁶      FSA streamed (X would be 120 GB / 400 GB); LogitBoost does not fit
# Usage: bash benchmarks/fig1_gpu.sh [OUT_DIR]   (results also in benchmarks/results/fig1_gpu*.json)
# Options through the environment: SIZES_SMALL, SIZES_LB, SIZES_STREAM, N_FEATURES, K, MAX_MEMORY_GB, TIMEOUT
# (seconds per method run), PYTHON.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-benchmarks/results}
mkdir -p "$out"
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.9}
py=${PYTHON:-python3}
fig=benchmarks/reproduce_fsa_fig1.py
timeout=${TIMEOUT:-300}
common=(--n-features ${N_FEATURES:-100000} --k ${K:-500} --timeout "$timeout" --max-test 100000)
save() { cp benchmarks/results/fig1_"$1".json "$out"/ 2>/dev/null; true; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
$py -c "import jax; print('jax', jax.__version__, jax.devices())"
$py "$fig" "${common[@]}" --sizes ${SIZES_SMALL:-10000 30000} --methods fsa logitboost --tag gpu_inmem; save gpu_inmem
$py "$fig" "${common[@]}" --sizes ${SIZES_LB:-100000} --methods logitboost --tag gpu_lb_1e5; save gpu_lb_1e5
$py "$fig" "${common[@]}" --sizes ${SIZES_STREAM:-100000 300000 1000000} --methods fsa --stream \
    --max-memory-gb ${MAX_MEMORY_GB:-24} --tag gpu_stream; save gpu_stream
files=()
for t in gpu_inmem gpu_lb_1e5 gpu_stream; do
  [ -f benchmarks/results/fig1_$t.json ] && files+=(benchmarks/results/fig1_$t.json)
done
[ ${#files[@]} -gt 0 ] && $py "$fig" --combine "${files[@]}" --tag gpu && save gpu \
  && cp benchmarks/results/fig1_gpu.png "$out"/ 2>/dev/null
true
