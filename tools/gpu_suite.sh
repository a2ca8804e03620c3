#!/usr/bin/env bash
# One batched GPU job for the device machine: install, GPU tests, sanitizers, benchmark.
# Usage: GEMMLAB_GIT_COMMIT=$(git rev-parse HEAD) tools/gpu_suite.sh [stage ...]
# stages: env warm verify pytest pytest-par pytest-profile memcheck racecheck memcheck-configs
#         suite-decode suite-random tune-online tune-auto menu-heldout (issue 40: decode, held-out random sample,
#         on-line tuning, the selection model's measurements) sanitize-menu sanitize-epilogue sanitize-batched
#         sanitize-out-dtype sanitize-decode sanitize-decode-fp8 workloads
#         racecheck-configs sanitize-new bench bench16 bench-bf16 bench-tf32 suite-fp32 suite-llm16
#         suite-llm-bf16 tune-fp32 strategies plain overhead overhead16 sustained ncu-record report inspect
#         (default: env warm pytest memcheck racecheck bench bench16 bench-bf16)
# The device gets a copy of the tree without .git: GEMMLAB_GIT_COMMIT records the commit in the JSON.
# Logs, JSON and the report are packed into $OUT/suite.tgz (default ./out). Each stage's exit
# status is printed at the end.
set -u
FINAL=${OUT:-out}
OUT=$(mktemp -d)/suite     # everything is written here, then packed into $FINAL/suite.tgz
mkdir -p "$OUT" "$FINAL"
export PYTHONUNBUFFERED=1
export GEMMLAB_CACHE_DIR=${GEMMLAB_CACHE_DIR:-/tmp/gemmlab-cache}
PY=${PY:-python3}
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(env warm pytest memcheck racecheck bench bench16 bench-bf16)
declare -A status

$PY -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || echo "pip install -e . failed (see install.log); using PYTHONPATH"
# wheels carried to a device without network (e.g. the tune extra's optuna): WHEELS=.whl
if [ -n "${WHEELS:-}" ] && ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
# pyproject's addopts name pytest-xdist's -n (the test extra has it); an image without the plugin
# (and no wheel of it in WHEELS) runs the serial stages without them (pytest-par needs the plugin)
$PY -c "import xdist" 2>/dev/null || export PYTEST_ADDOPTS="-o addopts=-ra${PYTEST_ADDOPTS:+ $PYTEST_ADDOPTS}"
GL="$PY -m gemmlab"

run() {  # run NAME CMD...: tee output to $OUT/NAME.log, remember the status
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$SECONDS
  "$@" >"$OUT/$name.log" 2>&1
  status[$name]=$?
  echo "=== $name: exit ${status[$name]} in $((SECONDS - t0)) s"
  tail -n "${TAIL:-15}" "$OUT/$name.log"
  pack
}
pack() {  # the device tool returns at most 8 files: logs, JSON and report go back in one archive
  tar czf "$FINAL/suite.tgz.part" -C "$(dirname "$OUT")" suite && mv "$FINAL/suite.tgz.part" "$FINAL/suite.tgz"
}

for st in "${stages[@]}"; do
  case $st in
    env) run env bash -c "nvidia-smi; $PY -c 'import cupy, torch, cuda.bindings, cuda.pathfinder, sys; print(sys.version); print(cupy.__version__, torch.__version__, cuda.bindings.__version__, cuda.pathfinder.__version__)'; $PY -m pip list 2>/dev/null | grep -i -E 'nvidia|cuda|cupy|rich|matplotlib|pytest'; ls /usr/local/cuda/include | head -3" ;;
    warm) run warm $GL compile --arch sm_90a --jobs 16 --no-progress ;;
    verify) run verify $GL verify --shapes 1x1x1,7x5x3,127x129x65,257x31x300,130x257x129 ;;
    pytest) run pytest $PY -m pytest tests -m gpu -q -p no:cacheprovider --maxfail=10 --ignore=tests/test_profile_gpu.py ;;
    pytest-par)  # the GPU tests on ${JOBS:-6} workers, then the timing tests alone (they measure)
      run pytest-par bash -c "$PY -m pytest tests -m gpu -q -p no:cacheprovider -n ${JOBS:-6} --maxfail=10 \
        --ignore=tests/test_profile_gpu.py --ignore=tests/test_timing_gpu.py && \
        $PY -m pytest tests/test_timing_gpu.py -m gpu -q -p no:cacheprovider" ;;
    pytest-profile) run pytest-profile $PY -m pytest tests/test_profile_gpu.py -q -s -rs -p no:cacheprovider ;;
    pytest-all) run pytest-all $PY -m pytest tests -q -p no:cacheprovider ;;
    memcheck|racecheck)
      # only our kernels (extern "C" gemm) are instrumented; cuBLAS/CuPy kernels run as usual
      run $st compute-sanitizer --tool $st --kernel-name kne=gemm --report-api-errors no --error-exitcode 9 \
        $GL verify --shapes 13x17x9,33x65x31 --alpha 1.5 --beta -0.5 ;;
    memcheck-configs|racecheck-configs)  # every configuration the registry accepts (tests/test_configs.py)
      run $st compute-sanitizer --tool ${st%-configs} --kernel-name kne=gemm --report-api-errors no --error-exitcode 9 \
        $PY -m pytest tests/test_configs.py -m gpu -q -p no:cacheprovider -x ;;
    sanitize-new)  # the rungs and paths added last: WGMMA/TMA, TF32/3xTF32 (rung 22's TMA store with beta 0), KREV's backward odd waves (more tiles than SMs), a stream-K tail on the balanced grid (BALANCE=1: 207 tiles on 104 blocks), split-K (small odd shapes; the reduction launched programmatically after the partials), operand copies and the kernel launched programmatically after them (PACK=1, 3xtf32's split copies), rung 18's
      # stream-K tail (its whole-tile kernel and gemm_sk_tail: shapes with more tiles than the H100's 132 SMs).
      # memcheck alone ran past 330 s on the H100 (session 19): give each tool its own device call,
      # SAN_TOOLS=memcheck, SAN_TOOLS=racecheck, SAN_TOOLS=synccheck
      for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
        SAN="compute-sanitizer --tool $tool --kernel-name kne=gemm --report-api-errors no --error-exitcode 9"
        ALL="compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9"   # gemm and splitk_reduce
        run $tool-new bash -c "$SAN $GL verify wgmma_tma --shapes 13x17x9,200x33x72,200x136x72 --alpha 1.5 --beta -0.5 && \
          $SAN $GL verify tf32_mma --precision tf32 --shapes 13x17x9,70x33x72 --alpha 1.5 --beta -0.5 && \
          $SAN $GL verify tf32_mma --precision 3xtf32 --shapes 13x17x9,70x33x72 --alpha 1.5 --beta -0.5 && \
          $SAN $GL verify wgmma_tf32 --precision tf32 --shapes 200x136x72,1100x1100x72 --alpha 1.5 --beta 0 && \
          $SAN $GL verify wgmma_tf32 --precision tf32 --config KREV=1,BN=64 --shapes 1100x1100x72 --alpha 1.5 --beta 0 && \
          $SAN $GL verify wgmma_ws --dtype bf16 --config KREV=1,BN=128,STAGES=6,DEFER=0,CLUSTER=2 --shapes 2000x1100x72 --alpha 1.5 --beta 0 && \
          $SAN $GL verify wgmma_ws --dtype fp16 --config BALANCE=1,STREAMK=1,CLUSTER=1 --shapes 2888x2104x264 --alpha 1.5 --beta 0 && \
          $SAN $GL verify wgmma_tf32 --precision tf32 --config BALANCE=1,STREAMK=1 --shapes 2888x2104x264 --alpha 1.5 --beta 0 && \
          $ALL $GL verify async_simt --config SPLITK=4 --shapes 13x17x9,70x33x700 --alpha 1.5 --beta -0.5 && \
          $ALL $GL verify wgmma_tma --dtype bf16 --config SPLITK=4 --shapes 13x17x9,200x136x1100 --alpha 1.5 --beta -0.5 && \
          $ALL $GL verify wgmma_tma --dtype bf16 --config PACK=1 --shapes 13x17x9,200x137x1001 --alpha 1.5 --beta -0.5 && \
          $ALL $GL verify wgmma_tf32 --precision 3xtf32 --shapes 13x17x9,200x137x101 --alpha 1.5 --beta -0.5 && \
          $ALL $GL verify async_simt --config STREAMK=1 --shapes 1200x3600x40,2888x2104x264 --alpha 1.5 --beta -0.5 && \
          $ALL $GL verify mma_sync --config SPLITK=4 --shapes 13x17x9,70x33x700 --alpha 1.5 --beta -0.5"
      done ;;
    suite-fp32) run suite-fp32 $GL bench auto async_simt --suite fp32 --json "$OUT/suite_fp32.json" ;;
    suite-decode)  # rung 24 through auto against cuBLAS and Triton, GB/s and % of the copy rate (issue 40)
      run suite-decode bash -c "$GL bench auto --suite decode --dtype bf16 --peers cublas,triton --json $OUT/suite_decode_bf16.json && \
          $GL bench auto --suite decode --dtype fp16 --peers cublas --json $OUT/suite_decode_fp16.json" ;;
    suite-random)  # auto on a random sample nobody tuned on (RANDOM_SUITE=random:48@1), in each dtype (issue 40's headline)
      for dt in ${RANDOM_DTYPES:-bf16 fp16 fp32}; do
        run suite-random-$dt $GL bench auto --suite ${RANDOM_SUITE:-random:48@1} --dtype $dt --peers cublas --max-samples 40 \
          --time-cap 1 --json "$OUT/suite_random_$dt.json"
      done ;;
    tune-online)  # on-line tuning over a tuning sample (TUNE_SAMPLE=random:200@0): each shape's first call times
      # its candidates; the winners come back in $OUT/online.json (merge into the shipped table from there)
      GEMMLAB_AUTOTUNE=1 GEMMLAB_AUTOTUNE_BUDGET=${TUNE_BUDGET:-5} GEMMLAB_CACHE_DIR=$OUT/online-cache \
        run tune-online-${TUNE_DTYPE:-bf16} $GL bench auto --suite ${TUNE_SAMPLE:-random:200@0} --dtype ${TUNE_DTYPE:-bf16} \
          --peers cublas --max-samples 10 --time-cap 0.5 --json "$OUT/tune_online_${TUNE_DTYPE:-bf16}.json"
      cp "$OUT/online-cache/online.json" "$OUT/online_${TUNE_DTYPE:-bf16}.json" 2>/dev/null || true ;;
    tune-auto)  # the selection menu on the tuning sample (SAMPLE=300@0) in each of AUTO_DTYPES, merged into one selection file
      # (SELECTION: its name; selection_sm90.json.gz is the H100's, another GPU's selection_sm90_<gpu>.json.gz)
      for dt in ${AUTO_DTYPES:-bf16 fp32}; do
        run tune-auto-$dt $GL tune auto --dtype $dt --sample ${SAMPLE:-300@0} --json "$OUT/tune_auto_$dt.json" \
          --emit-selection "$OUT/${SELECTION:-selection_sm90.json.gz}"
      done ;;
    menu-heldout)  # every option of the menu on the held-out sample (never emitted): the best any option reaches there
      for dt in ${AUTO_DTYPES:-bf16 fp32}; do
        run menu-heldout-$dt $GL tune auto --dtype $dt --suite ${RANDOM_SUITE:-random:48@1} --json "$OUT/menu_heldout_$dt.json"
      done ;;
    sanitize-menu)  # the selection menu's tiles that no other stage runs: rung 16's 32x32 preset, rung 18's
      # 32x32 tile (selection.SIMT_TINY), rung 21 with its stream-K tail and rung 19's cluster split (128x128
      # and the skinny 128x64 and 64x128 tiles, selection.WGMMA_SKINNY), under each SAN_TOOLS tool
      for tool in ${SAN_TOOLS:-memcheck racecheck}; do
        SAN="compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9"
        run $tool-menu bash -c "$SAN $GL verify wmma --dtype bf16 --config 32x32 --shapes 13x17x9,77x45x263 --alpha 1.5 --beta -0.5 && \
          $SAN $GL verify async_simt --config BM=32,BN=32,BK=16,WM=16,WN=32,TM=4,TN=4,STAGES=3 --shapes 13x17x9,77x45x263 --alpha 1.5 --beta -0.5 && \
          $SAN $GL verify wgmma_ws --dtype bf16 --config STREAMK=1 --shapes 2888x2104x264 --alpha 1.5 --beta 0 && \
          $SAN $GL verify wgmma_tma --dtype bf16 --config 128x128 --config SPLITK=4,SKCLUSTER=1 --shapes 131x67x1001,1x300x4099 --alpha 1.5 --beta -0.5 && \
          $SAN $GL verify wgmma_tma --dtype bf16 --config BM=128,BN=64,BK=64,WM=64,STAGES=8,SPLITK=3,SKCLUSTER=1 --shapes 300x40x2000 --alpha 1.5 --beta 0 && \
          $SAN $GL verify wgmma_tma --dtype fp16 --config BM=64,BN=128,BK=64,WM=64,STAGES=8,SPLITK=2,SKCLUSTER=1 --shapes 40x300x2000 --alpha 1.5 --beta -0.5"
      done ;;
    sanitize-decode)  # rung 24 at its edges: its pair loads, its edge warps, its ring in shared memory, its splits (issue 40)
      for tool in ${SAN_TOOLS:-memcheck racecheck}; do
        run $tool-decode compute-sanitizer --tool $tool --kernel-name kne=gemm --report-api-errors no --error-exitcode 9 \
          $PY tools/check_decode.py
      done ;;
    sanitize-decode-fp8)  # rung 28 at its edges: each scaling, zero-filled copies, cluster splits (issue 42)
      for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
        run $tool-decode-fp8 compute-sanitizer --tool $tool --kernel-name kne=gemm --report-api-errors no --error-exitcode 9 \
          $PY tools/check_decode_fp8.py
      done ;;
    sanitize-epilogue)  # the fused epilogue (issue 41): rung 21's TMA store, staged store, held tile and stream-K finisher,
      # rung 22's chunked TMA store, rung 18's cluster split and stream-K tail, split-K's reduction, rung 24
      for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
        SAN="compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9"
        run $tool-epilogue bash -c "$SAN $GL verify wgmma_ws --dtype bf16 --bias same --activation gelu_tanh --shapes 200x136x72 --alpha 1.5 --beta -0.5 && \
          $SAN $GL verify wgmma_ws --dtype bf16 --config STREAMK=1 --bias fp32 --activation silu --shapes 2888x2104x264 --alpha 1.5 --beta 0 && \
          $SAN $GL verify wgmma_ws --dtype fp16 --config DEFER=1 --bias same --activation gelu_tanh --shapes 2900x2600x200 --alpha 1.5 --beta 0 && \
          $SAN $GL verify wgmma_ws --dtype bf16 --config STREAMK=1,DEFER=1 --bias same --activation relu --shapes 2888x2104x264 --alpha 1.5 --beta 0 && \
          $SAN $GL verify wgmma_tf32 --precision tf32 --bias fp32 --activation gelu --shapes 200x136x72 --alpha 1.5 --beta 0 && \
          $SAN $GL verify async_simt --config SPLITK=4,SKCLUSTER=1 --bias fp32 --activation relu --shapes 70x33x900 --alpha 1.5 --beta -0.5 && \
          $SAN $GL verify mma_sync --dtype fp16 --config SPLITK=4 --bias same --activation gelu --shapes 70x33x900 --alpha 1.5 --beta -0.5 && \
          $SAN $GL verify decode --dtype bf16 --bias same --activation silu --shapes 8x1000x700 --alpha 1.5 --beta -0.5"
      done ;;
    sanitize-batched)  # a batch in one launch (issue 41): rung 21's TMA, thread-copy, stream-K and fused paths, rung 18
      for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
        run $tool-batched compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $PY tools/check_batched.py
      done ;;
    sanitize-out-dtype)  # the Hopper epilogue parts (issue 41): rung 21 writing FP32 or the other 16-bit type, rung 22
      for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
        run $tool-out-dtype compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $PY tools/check_out_dtype.py
      done ;;
    workloads)  # bench --suite batched (bf16, fp32), --suite epilogue (bf16, fp16) and --suite out_dtype (bf16, fp16)
      for dt in bf16 fp32; do run batched-$dt $GL bench --suite batched --dtype $dt --json "$OUT/batched_$dt.json"; done
      for dt in bf16 fp16; do run epilogue-$dt $GL bench --suite epilogue --dtype $dt --json "$OUT/epilogue_$dt.json"; done
      for dt in bf16 fp16; do run out-dtype-$dt $GL bench --suite out_dtype --dtype $dt --json "$OUT/out_dtype_$dt.json"; done ;;
    suite-llm16) run suite-llm16 $GL bench auto --suite llm --dtype fp16 --json "$OUT/suite_llm_fp16.json" ;;
    suite-llm-bf16) run suite-llm-bf16 $GL bench auto --suite llm --dtype bf16 --json "$OUT/suite_llm_bf16.json" ;;
    bench-tf32) run bench-tf32 bash -c "$GL bench tf32_mma --precision tf32 --shape 4096,8192 --json $OUT/bench_tf32.json && \
          $GL bench tf32_mma --precision 3xtf32 --shape 4096,8192 --json $OUT/bench_3xtf32.json" ;;
    tune-fp32)  # the tuner over the FP32 suite (or TUNE_SHAPES="1000 4096x16x4096", one run each); the best
      # per shape merged into a copy of the shipped defaults; the database comes back with the rest
      cp src/gemmlab/data/defaults_sm90.json "$OUT/defaults_sm90.json"
      TUNE="$GL tune ${TUNE_RUNG:-async_simt} --budget ${BUDGET:-20} --peers cublas --time-cap 0.5 --no-progress \
        --storage sqlite:///$OUT/tune.db --emit-defaults $OUT/defaults_sm90.json"
      if [ -n "${TUNE_SHAPES:-}" ]; then
        for s in $TUNE_SHAPES; do run tune-fp32-$s $TUNE --shape $s --json "$OUT/tune_fp32_$s.json"; done
      else
        run tune-fp32 $TUNE --suite fp32 --json "$OUT/tune_fp32.json"
      fi ;;
    strategies)  # resumable across calls: its database comes back in suite.tgz even when the stage
      # is cut (STRAT_TIMEOUT), and STRAT_DB=<that file, carried> continues it (warp_tiling's 930
      # candidates x 3 shapes took more than one 600 s call on the H100)
      [ -n "${STRAT_DB:-}" ] && cp "$STRAT_DB" "$OUT/strategies.db"
      run strategies timeout ${STRAT_TIMEOUT:-480} $PY benchmarks/tune_strategies.py --rungs ${STRAT_RUNGS:-warp_tiling} \
        --storage "sqlite:///$OUT/strategies.db" --out "$OUT/tune_strategies.json" ;;
    sustained)  # back-to-back blocks at the power cap (bench --sustained): rung 22 and auto in TF32, rung 21 and auto in bf16 and fp16, 8192^3
      run sustained bash -c "$GL bench wgmma_tf32 auto --precision tf32 --shape 8192 --sustained --json $OUT/sustained_tf32.json && \
          $GL bench wgmma_ws auto --dtype bf16 --shape 8192 --sustained --json $OUT/sustained_bf16.json && \
          $GL bench wgmma_ws auto --dtype fp16 --shape 8192 --sustained --json $OUT/sustained_fp16.json" ;;
    overhead) run overhead $GL bench --overhead --json "$OUT/overhead.json" ;;
    overhead16) run overhead16 $GL bench --overhead --dtype fp16 --json "$OUT/overhead_fp16.json" ;;
    bench) run bench $GL bench --json "$OUT/bench.json" ;;
    bench16) run bench16 $GL bench --dtype fp16 --json "$OUT/bench_fp16.json" ;;
    bench-bf16) run bench-bf16 $GL bench --dtype bf16 --json "$OUT/bench_bf16.json" ;;
    plain) run plain $PY tools/plain_cublas.py $(ls "$OUT"/bench*.json "$OUT"/report/results.json 2>/dev/null) \
             --json "$OUT/plain_cublas.json" ;;
    ncu-record) run ncu-record bash -c "$GL profile smem --shape 2048 --keep-csv $OUT/rec --vs-cublas --json && $GL profile smem_padded --shape 2048 --keep-csv $OUT/rec --json" ;;
    report) run report $GL report --out "$OUT/report" ;;
    inspect) run inspect bash -c "for r in \$($GL list --slugs); do \$GL inspect \$r; done" ;;
    *) echo "unknown stage $st" ;;
  esac
done
echo "=== summary"
for k in "${!status[@]}"; do echo "$k: ${status[$k]}"; done | tee "$OUT/summary.txt"
pack
