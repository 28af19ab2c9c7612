#!/usr/bin/env bash
# SceneGraphs comparison with one training budget for every method (CPU, one thread each,
# one run at a time). Methods in priority order; each trains for
# steps of 8 examples (STEPS, the budget that is equal for all) capped at BUDGET wall seconds
# (preprocessing and LLM loading not counted; --resume continues a run cut short, on the same
# data order, so a killed chain can simply be started again), then all are scored on the same stratified
# test subset by experiments/scenes_eval.py. Outputs and logs: runs/scenes_<name>/ (gitignored).
#
#   nohup bash experiments/scenes_compare.sh > runs/scenes_compare.log 2>&1 &
#   BUDGET=900 METHODS="toporag gretriever" bash experiments/scenes_compare.sh
set -u
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
BUDGET=${BUDGET:-900}
STEPS=${STEPS:-12}
K2=${K2:-3}
PER_TYPE=${PER_TYPE:-30}
METHODS=${METHODS:-"toporag gretriever no_crl no_tsr no_mtr"}
PY=.venv/bin/python
COMMON="--dataset scene_graphs --k0 3 --k1 5 --hidden 128 --projector-hidden 512 --lr 1e-3 --batch-size 8
        --epochs 1 --max-eval 32 --eval-every 8 --max-steps $STEPS --time-budget $BUDGET --threads 1 --seed 0 --resume"

flags() {  # method name -> retrieval / encoder flags
  case "$1" in
    toporag)    echo "--method toporag --k2 $K2 --encoder cwn" ;;
    gretriever) echo "--method g-retriever --k2 0 --encoder gcn --no-cells2" ;;   # G-Retriever-style
    no_crl)     echo "--method toporag --k2 $K2 --encoder cwn --no-cells2" ;;      # w/o CRL
    no_tsr)     echo "--method shortest-path --k2 $K2 --encoder cwn" ;;            # w/o TSR
    no_mtr)     echo "--method toporag --k2 $K2 --encoder gcn" ;;                  # w/o MTR
    *) echo "unknown method $1" >&2; return 1 ;;
  esac
}

runs=()
for m in $METHODS; do
  out=runs/scenes_$m
  echo "=== $(date +%T) train $m: $(flags "$m")"
  if [ ! -f "$out/summary.json" ]; then
    $PY -m toporag_core.cli train $COMMON $(flags "$m") --out "$out" >> "$out.train.log" 2>&1 \
      || { echo "train $m failed (see $out.train.log)"; continue; }
  fi
  tail -n 2 "$out.train.log"
  echo "=== $(date +%T) eval $m"
  $PY experiments/scenes_eval.py --per-type "$PER_TYPE" "$out" > "$out.eval.log" 2>&1 || echo "eval $m failed"
  tail -n 4 "$out.eval.log"
  runs+=("$out")
done
echo "=== $(date +%T) all done"
$PY experiments/scenes_eval.py --table-only "${runs[@]}"
