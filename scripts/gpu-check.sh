#!/usr/bin/env bash
# The GPU check, run from the repo root on a machine with one NVIDIA GPU and no internet,
# after scripts/device-bundle.sh built .bundle/ (jars + a Java runtime) elsewhere:
#   1. finds the CUDA 13 libraries (driver, cudart, cuBLAS, NCCL; a Python env's
#      nvidia/*/lib folders count) and puts their folders on LD_LIBRARY_PATH,
#   2. runs the cuda-kernels and nccl-comm test suites (GPU tests included; not the CPU-only
#      emulator tests, tag "emulator", nor the stand-in CUDA's own, tag "standin", which mvn
#      verify runs) with the bundled Java, then NCCL across processes through fsdp4j launch,
#   3. benchmarks bf16 GEMMs (4096³, 8192³) against the device's peak with the fsdp4j CLI
#      (bench gemm, which also checks sampled entries against fp64), trains the default run on
#      cuda and on the cpu (same final loss) and a Llama on cuda, then bench step for gpt2-124m (T = 1024) in fp32 and
#      bf16 at N = 1 and 2 ranks on one GPU: each must show one host synchronisation per step
#      and no promoted GEMM operand; a table sums it up,
#   4. runs the PyTorch FSDP2 peer (bench/peers/torch_fsdp2.py) beside fsdp4j's bf16 step on the
#      same GPU for gpt2-124m (twice, alternated) and a ~1B GPT, and prints both with the ratio,
#   5. prints fsdp4j's GPU time per op for both (-Dfsdp4j.opTimes=true).
# Writes gpu-check.log, gpu-check.json, tests.txt and results.tar.gz (JUnit XML, gemm.json, the
# train and bench outputs) to $OUT, or to .bundle/out without it. Exit 0 only if every test passed, none skipped for want of a GPU,
# and the GEMM results check out. Budget: under 8 minutes on an H200; the timeouts add up to
# 595 s at the very worst (library search 6 x 15 s, tests 150 s, bench gemm 45 s, train 95 s,
# llama train 15 s, bench step 4 x 35 s; procs 60 s on one GPU, 150 s on more), each far longer
# than it should need.
#
# From a session with the device tool: build the bundle in the checkout the tool sends, then
#   run(command="bash scripts/gpu-check.sh", carry=[".bundle-pack"], timeout_s=580)
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
bundle=$repo/.bundle
# The device tool brings back at most 8 files from $OUT: the log, the JSON summary and one archive
# of everything else (JUnit XML, bench and train outputs) go there; the work happens in $out.
report=${OUT:-$bundle/out}
out=$(mktemp -d /tmp/gpu-check.XXXXXX)
mkdir -p "$report"
exec > >(tee "$report/gpu-check.log") 2>&1
start_s=$SECONDS

say() { echo "[gpu-check $((SECONDS - start_s))s] $*"; }

json_status=ok
json_problems=()
problem() { json_problems+=("$1"); json_status=failed; say "PROBLEM: $1"; }

write_json() {
  local problems=""
  for p in "${json_problems[@]+"${json_problems[@]}"}"; do
    problems+="${problems:+, }\"${p//\"/\'}\""
  done
  local gemm=null
  [[ -s $out/gemm.json ]] && gemm=$(cat "$out/gemm.json")
  cat > "$out/gpu-check.json" <<JSON
{
  "status": "$json_status",
  "problems": [$problems],
  "gpu": "${gpu_name:-none}",
  "driver": "${driver_version:-none}",
  "library_dirs": "${lib_dirs:-}",
  "tests": {"succeeded": ${tests_ok:-0}, "failed": ${tests_failed:-0}, "skipped": ${tests_skipped:-0}, "aborted": ${tests_aborted:-0}},
  "gemm": $gemm,
  "seconds": $((SECONDS - start_s))
}
JSON
  say "wrote $out/gpu-check.json (status $json_status)"
}

finish() {
  write_json
  cp "$out/gpu-check.json" "$report/"
  [[ -f $out/tests.txt ]] && cp "$out/tests.txt" "$report/"
  tar -C "$out" -czf "$report/results.tar.gz" . && say "all outputs: results.tar.gz in $report"
  [[ $json_status == ok ]]; exit $?
}

java=$bundle/jre/bin/java
if [[ ! -x $java && -f $repo/.bundle-pack/bundle.tar.xz ]]; then   # what the device tool carries
  say "unpacking .bundle-pack/bundle.tar.xz"
  tar -C "$repo" -xJf "$repo/.bundle-pack/bundle.tar.xz"
fi
if [[ ! -x $java || ! -f $bundle/junit-platform-console-standalone.jar ]]; then
  problem "no bundle in $bundle: run scripts/device-bundle.sh on the build machine first"
  finish
fi
classpath=$(ls "$bundle"/lib/*.jar | tr '\n' ':')

# ---- 1. libraries ----------------------------------------------------------------------
python_lib_roots() {
  for py in python3 /opt/*/.venv/bin/python3 /usr/local/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || [[ -x $py ]] || continue
    "$py" -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null
  done | sort -u | while read -r sp; do [[ -d $sp/nvidia ]] && echo "$sp/nvidia"; done
}

# Prints the folder holding $1, or nothing.
find_lib() {
  local name=$1 d
  for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu \
           /usr/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64; do
    [[ -e $d/$name ]] && { echo "$d"; return; }
  done
  local hit
  hit=$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n {print $NF; exit}')
  [[ -n $hit ]] && { dirname "$hit"; return; }
  for d in $(python_lib_roots); do
    hit=$(find "$d" -maxdepth 3 -name "$name" 2>/dev/null | head -n 1)
    [[ -n $hit ]] && { dirname "$hit"; return; }
  done
  hit=$(timeout 15 find / -xdev -maxdepth 8 -name "$name" -not -path '/proc/*' 2>/dev/null | head -n 1)
  [[ -n $hit ]] && dirname "$hit"
}

lib_dirs=""
for lib in libcuda.so.1 libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libnvrtc.so.13; do
  dir=$(find_lib "$lib")
  if [[ -z $dir ]]; then
    case $lib in
      libcuda.so.1) problem "no GPU: no NVIDIA driver (libcuda.so.1 not found)"; finish ;;
      libnccl.so.2|libnvrtc.so.13) say "note: $lib not found (not needed by the single-GPU check)" ;;
      *) problem "missing CUDA library $lib"; finish ;;
    esac
    continue
  fi
  say "$lib in $dir"
  [[ ":$lib_dirs:" == *":$dir:"* ]] || lib_dirs=${lib_dirs:+$lib_dirs:}$dir
done
export LD_LIBRARY_PATH=$lib_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

if ! smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1); then
  problem "no GPU: nvidia-smi failed: $smi"
  finish
fi
gpu_name=$(echo "$smi" | head -n 1 | cut -d, -f1 | xargs)
driver_version=$(echo "$smi" | head -n 1 | cut -d, -f2 | xargs)
say "GPU: $smi"

# GPU_CHECK_PARTS picks sections (default: all): tests procs gemm train steps peer optimes; SHAPES (peer
# and optimes): gpt2-124m gpt-1b. A short lease can rerun just the part it changed.
parts=" ${GPU_CHECK_PARTS:-tests procs gemm train steps peer optimes} "
want() { [[ $parts == *" $1 "* ]]; }
optime_shapes=${GPU_CHECK_OPTIME_SHAPES:-gpt2-124m gpt-1b}

jvm_opts=(-Xss4m -Xmx16g -Dorg.bytedeco.javacpp.maxPhysicalBytes=0 --add-modules jdk.incubator.vector)

# ---- 2. tests -------------------------------------------------------------------------
if want tests; then
say "running the cuda-kernels and nccl-comm tests (GPU tests included)"
(cd cuda-kernels && timeout 150 "$java" "${jvm_opts[@]}" -jar "$bundle/junit-platform-console-standalone.jar" \
  execute --disable-banner --details=tree --class-path "$classpath" --exclude-tag emulator --exclude-tag standin \
  --scan-class-path "$bundle/lib/cuda-kernels-tests.jar:$bundle/lib/nccl-comm-tests.jar" \
  --reports-dir "$out/junit") | tee "$out/tests.txt"
count() { grep -E "^\[ +[0-9]+ $1 +\]" "$out/tests.txt" | grep -oE '[0-9]+' | head -n 1; }
tests_ok=$(count "tests successful"); tests_failed=$(count "tests failed")
tests_skipped=$(count "tests skipped"); tests_aborted=$(count "tests aborted")
say "tests: ${tests_ok:-?} ok, ${tests_failed:-?} failed, ${tests_skipped:-?} skipped, ${tests_aborted:-?} aborted"
[[ ${tests_ok:-0} -gt 0 ]] || problem "the test run produced no summary (see tests.txt)"
[[ ${tests_failed:-0} -eq 0 ]] || problem "${tests_failed} test(s) failed"
[[ ${tests_aborted:-0} -eq 0 ]] || problem "${tests_aborted} test(s) skipped by an assumption (GPU not usable?)"
fi

# the CLI starts as ./fsdp4j and the image start it (scripts/launcher.sh: the same JVM flags); an
# array, since timeout cannot run a shell function
cli=(env FSDP4J_JAVA="$java" FSDP4J_JAR="$classpath" FSDP4J_JAVA_OPTS="-Xss4m -Xmx16g" sh "$repo/scripts/launcher.sh")
json_field() { grep -oE "\"$2\" *: *[0-9.eE+-]+" "$1" 2>/dev/null | head -n 1 | grep -oE '[0-9.eE+-]+$'; }

# ---- 2b. NCCL across processes (its unique id through fsdp4j's store) --------------------
# Two GPUs or more: 2 processes x 1 GPU train the default run and must end at the loss of 2 GPUs
# of one process. One GPU: 2 processes cannot share it through NCCL, so the launch must end
# within seconds with exit 7 and NCCL's refusal in one line (the bootstrap through the store, the
# non-blocking init and the failure path, on the real library).
if want procs; then
gpus=$(echo "$smi" | grep -c .)
if [[ $gpus -ge 2 ]]; then
  say "fsdp4j launch: 2 processes x 1 GPU over real NCCL, against 2 GPUs of one process"
  timeout 60 "${cli[@]}" train --device cuda --world-size 2 --steps 100 --out "$out/procs-one" \
    || problem "train --device cuda --world-size 2 (one process) failed"
  timeout 90 "${cli[@]}" launch --standalone --nproc-per-node 2 -- train --device cuda --world-size 2 --steps 100 \
    --collective-timeout 60 --out "$out/procs-two" || problem "launch: 2 processes x 1 GPU failed"
  one=$(json_field "$out/procs-one/summary.json" final_loss); two=$(json_field "$out/procs-two/summary.json" final_loss)
  say "final loss: one process ${one:-?}, two processes ${two:-?}"
  [[ -n $one && "$one" == "$two" ]] || problem "2 processes end at loss ${two:-?}, one process at ${one:-?}"
else
  say "fsdp4j launch: 2 processes on the one GPU (NCCL must refuse them: one line, exit 7)"
  start_procs=$SECONDS
  timeout 60 "${cli[@]}" launch --standalone --nproc-per-node 2 -- bench collectives --device cuda --world-size 2 \
    --max-bytes 1MiB --collective-timeout 30 > "$out/procs.txt" 2>&1
  code=$?
  cat "$out/procs.txt"
  say "exit $code after $((SECONDS - start_procs)) s"
  [[ $code -eq 7 ]] || problem "2 processes on one GPU: exit $code, expected 7 (NCCL's duplicate-GPU refusal)"
fi
fi

# ---- 3. benchmarks and runs -----------------------------------------------------------
if want gemm; then
say "fsdp4j bench gemm: bf16 4096³ and 8192³ against the device's peak (fp32 accumulation)"
if ! timeout 45 "${cli[@]}" bench gemm --device cuda --dtype bf16 --sizes 4096,8192 --warmup 3 --iters 20 --out "$out"; then
  problem "fsdp4j bench gemm failed or found wrong results"
fi
fi

if want train; then
say "fsdp4j train on the default data: cuda, then cpu (same losses expected)"
timeout 45 "${cli[@]}" train --device cuda --out "$out/train-cuda" || problem "train --device cuda failed"
timeout 50 "${cli[@]}" train --device cpu --out "$out/train-cpu" || say "note: train --device cpu did not finish"
loss_cuda=$(json_field "$out/train-cuda/summary.json" final_loss)
loss_cpu=$(json_field "$out/train-cpu/summary.json" final_loss)
say "final loss: cuda ${loss_cuda:-?}, cpu ${loss_cpu:-?}"
if [[ -n $loss_cuda && -n $loss_cpu ]] && ! awk -v a="$loss_cuda" -v b="$loss_cpu" \
     'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * b) }'; then
  problem "train --device cuda ends at loss $loss_cuda, the cpu at $loss_cpu (more than 0.1% apart)"
fi

say "fsdp4j train --model llama on cuda (its numerics against PyTorch: CudaLlamaParityTest above)"
timeout 15 "${cli[@]}" train --model llama --steps 50 --device cuda --out "$out/train-llama-cuda" \
  || problem "train --model llama --device cuda failed"
loss_llama=$(json_field "$out/train-llama-cuda/summary.json" final_loss)
say "llama final loss after 50 steps: ${loss_llama:-?}"
fi

rows=()
want steps && for dtype in fp32 bf16; do
  for n in 1 2; do
    dir=$out/step-$dtype-n$n
    say "fsdp4j bench step: gpt2-124m, batch 8 x 1024, $dtype, $n rank(s) on cuda:0"
    if timeout 35 "${cli[@]}" bench step --device cuda:0 --world-size "$n" --preset gpt2-124m --batch-size 8 \
         --seq-len 1024 --param-dtype "$dtype" --warmup 3 --steps 5 --out "$dir"; then
      syncs=$(json_field "$dir/step.json" host_syncs_per_step)
      promoted=$(json_field "$dir/step.json" promoted_copies)
      rows+=("$(printf '%-5s %2d %10s %12s %8s %6s %9s' "$dtype" "$n" "$(json_field "$dir/step.json" step_time_ms_median)" \
        "$(json_field "$dir/step.json" tokens_per_second)" "$(json_field "$dir/step.json" mfu)" "${syncs:-?}" "${promoted:-?}")")
      [[ ${syncs:-9} -le 1 ]] || problem "$dtype N=$n: a step synchronised the host ${syncs:-?} times (budget 1)"
      [[ ${promoted:-9} -eq 0 ]] || problem "$dtype N=$n: ${promoted:-?} GEMMs promoted an operand by a copy"
    else
      problem "bench step $dtype N=$n did not finish"
    fi
  done
done
# ---- 4. the PyTorch FSDP2 peer on the same GPU ------------------------------------------
# bench/peers/torch_fsdp2.py: the same GPT in FSDP2 (bf16 params, fp32 reduce, AdamW), timed as
# bench step times (warm-up 3, median of 5). One GPU, so N = 1 (NCCL takes one GPU per rank).
# Shapes: gpt2-124m and a ~1B GPT (18 blocks, width 2048, 16 heads), both B = 8, T = 1024.
peer_rows=()
peer_python=""
for py in python3 /opt/torch/.venv/bin/python3; do
  if "$py" -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then peer_python=$py; break; fi
done
if ! want peer; then
  :
elif [[ -z $peer_python ]]; then
  say "note: no python3 with a CUDA PyTorch here: the FSDP2 peer is skipped"
else
  # gpt2-124m twice (fsdp4j, PyTorch, fsdp4j, PyTorch): its PyTorch step is launch-bound and
  # varies between runs of the same call, so one pair alone can mislead.
  for round in gpt2-124m gpt-1b gpt2-124m#2; do
    shape=${round%#*}
    case $shape in
      gpt2-124m) dims=(--layers 12 --hidden 768 --heads 12) ;;
      gpt-1b) dims=(--layers 18 --hidden 2048 --heads 16) ;;
    esac
    mine=$out/step-bf16-n1
    if [[ $round != gpt2-124m || ! -f $mine/step.json ]]; then
      [[ $round != gpt2-124m ]] && mine=$out/step-${round/\#/-}
      say "fsdp4j bench step: $shape, batch 8 x 1024, bf16, 1 rank"
      timeout 75 "${cli[@]}" bench step --device cuda:0 --world-size 1 --preset gpt2-124m "${dims[@]}" --batch-size 8 \
        --seq-len 1024 --param-dtype bf16 --warmup 3 --steps 5 --out "$mine" || problem "bench step $shape did not finish"
    fi
    timeout 30 "${cli[@]}" plan --preset gpt2-124m "${dims[@]}" --gpu H200-141GB --gpus 1 --nodes 1 --param-dtype bf16 \
      --batch-size 8 --seq-len 1024 --json > "$out/plan-$shape.json" 2>/dev/null || say "note: plan $shape failed"
    peak=$(json_field "$mine/step.json" peak_tflops_per_rank)
    say "PyTorch FSDP2 peer: $shape, batch 8 x 1024, bf16, 1 rank (peak ${peak:-?} TFLOP/s for MFU)"
    PYTHONUNBUFFERED=1 timeout 80 "$peer_python" bench/peers/torch_fsdp2.py "${dims[@]}" --vocab 50257 --batch-size 8 \
      --seq-len 1024 --dtype bf16 --warmup 3 --steps 5 ${peak:+--peak-tflops "$peak"} --json-out "$out/peer-${round/\#/-}.json" \
      || problem "the PyTorch FSDP2 peer failed on $shape"
    peer_rows+=("$("$peer_python" - "$round" "$mine/step.json" "$out/peer-${round/\#/-}.json" "$out/plan-$shape.json" <<'PY'
import json, sys
shape, mine, peer, plan = sys.argv[1:]
def load(p):
    try:
        with open(p) as f: return json.load(f)
    except Exception: return {}
a, b = load(mine), load(peer)
def g(d, *ks):
    for k in ks:
        if d.get(k) is not None: return d[k]
    return None
ta, tb = g(a, "tokens_per_second"), g(b, "tokens_per_second")
ma, mb = g(a, "mfu"), g(b, "mfu")
pa = g(a, "peak_bytes_per_rank"); pa = max(pa) if isinstance(pa, list) and pa else pa
pb = g(b, "peak_allocated_bytes")
mem = load(plan).get("memory") or {}
pp = sum(mem.values()) if mem else None
f = lambda v, fmt: "?" if v is None else fmt % v
print("%-10s %10s %10s %12s %12s %7s %7s %9s %9s %9s %6s" % (shape, f(g(a, "step_time_ms_median"), "%.1f"),
      f(g(b, "step_time_ms_median"), "%.1f"), f(ta, "%.0f"), f(tb, "%.0f"), f(ma and 100 * ma, "%.1f%%"),
      f(mb and 100 * mb, "%.1f%%"), f(pa and pa / 2**30, "%.2f"), f(pp and pp / 2**30, "%.2f"),
      f(pb and pb / 2**30, "%.2f"), f(ta / tb if ta and tb else None, "%.2f")))
PY
)")
  done
fi

# ---- 5. where fsdp4j's GPU step goes ------------------------------------------------------
# -Dfsdp4j.opTimes=true: each op's GPU time (its timing event to the next op's on the stream),
# GEMMs per shape with TFLOP/s; the table goes to stderr at exit (GpuOpTimes). The events cost a
# little, so these runs are not the timed ones above.
cli_times=(env FSDP4J_JAVA="$java" FSDP4J_JAR="$classpath" FSDP4J_JAVA_OPTS="-Xss4m -Xmx16g -Dfsdp4j.opTimes=true" \
    sh "$repo/scripts/launcher.sh")
want optimes && for shape in $optime_shapes; do
  case $shape in
    gpt2-124m) dims=(--layers 12 --hidden 768 --heads 12) ;;
    gpt-1b) dims=(--layers 18 --hidden 2048 --heads 16) ;;
  esac
  say "fsdp4j GPU op times: $shape, batch 8 x 1024, bf16, 1 rank"
  timeout 75 "${cli_times[@]}" bench step --device cuda:0 --world-size 1 --preset gpt2-124m "${dims[@]}" --batch-size 8 \
    --seq-len 1024 --param-dtype bf16 --warmup 3 --steps 5 --out "$out/op-times-$shape" 2> "$out/op-times-$shape.txt" \
    >/dev/null || say "note: the op-times run of $shape did not finish"
  head -n 45 "$out/op-times-$shape.txt"
done

say "summary: tests ${tests_ok:-?} ok / ${tests_failed:-?} failed / ${tests_skipped:-?} skipped; loss cuda ${loss_cuda:-?} vs cpu ${loss_cpu:-?}"
printf '%-5s %2s %10s %12s %8s %6s %9s\n' dtype N "ms/step" "tok/s" MFU syncs promoted
for r in "${rows[@]+"${rows[@]}"}"; do echo "$r"; done
if (( ${#peer_rows[@]} > 0 )); then
  echo "fsdp4j vs PyTorch FSDP2 (bf16, 1 rank, B = 8, T = 1024; peak = peak GPU memory, GiB: fsdp4j's tracker, its plan, PyTorch's allocated)"
  printf '%-10s %10s %10s %12s %12s %7s %7s %9s %9s %9s %6s\n' shape "ms fsdp4j" "ms torch" "tok/s fsdp4j" "tok/s torch" \
    "MFU f4j" "MFU pt" "peak f4j" "plan f4j" "peak pt" ratio
  for r in "${peer_rows[@]}"; do echo "$r"; done
fi

finish
