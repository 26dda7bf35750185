#!/usr/bin/env bash
# The GPU check, run from the repo root on a machine with one NVIDIA GPU and no internet,
# after scripts/device-bundle.sh built .bundle/ (jars + a Java runtime) elsewhere:
#   1. finds the CUDA 13 libraries (driver, cudart, cuBLAS, NCCL; a Python env's
#      nvidia/*/lib folders count) and puts their folders on LD_LIBRARY_PATH,
#   2. runs the cuda-kernels and nccl-comm test suites (GPU tests included; not the CPU-only
#      emulator tests, tag "emulator", nor the stand-in CUDA's own, tag "standin", which mvn
#      verify runs) with the bundled Java,
#   3. benchmarks bf16 GEMMs (4096³, 8192³) against the device's peak with the fsdp4j CLI
#      (bench gemm, which also checks sampled entries against fp64), trains the default run on
#      cuda and on the cpu (same final loss) and a Llama on cuda, then bench step for gpt2-124m (T = 1024) in fp32 and
#      bf16 at N = 1 and 2 ranks on one GPU: each must show one host synchronisation per step
#      and no promoted GEMM operand; a table sums it up.
# Writes gpu-check.log and gpu-check.json (plus JUnit XML and gemm.json) to $OUT, or to
# .bundle/out without it. Exit 0 only if every test passed, none skipped for want of a GPU,
# and the GEMM results check out. Budget: under 8 minutes on an H200; the timeouts add up to
# 535 s at the very worst (library search 6 x 15 s, tests 150 s, bench gemm 45 s, train 95 s,
# llama train 15 s, bench step 4 x 35 s), each far longer than it should need.
#
# From a session with the device tool: build the bundle in the checkout the tool sends, then
#   run(command="bash scripts/gpu-check.sh", carry=[".bundle"], timeout_s=540)
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
bundle=$repo/.bundle
out=${OUT:-$bundle/out}
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1
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

finish() { write_json; [[ $json_status == ok ]]; exit $?; }

java=$bundle/jre/bin/java
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

jvm_opts=(-Xss4m -Xmx16g -Dorg.bytedeco.javacpp.maxPhysicalBytes=0 --add-modules jdk.incubator.vector)

# ---- 2. tests -------------------------------------------------------------------------
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

cli() { "$java" "${jvm_opts[@]}" -cp "$classpath" org.fsdp4j.cli.Main "$@"; }
json_field() { grep -oE "\"$2\" *: *[0-9.eE+-]+" "$1" 2>/dev/null | head -n 1 | grep -oE '[0-9.eE+-]+$'; }

# ---- 3. benchmarks and runs -----------------------------------------------------------
say "fsdp4j bench gemm: bf16 4096³ and 8192³ against the device's peak (fp32 accumulation)"
if ! timeout 45 cli bench gemm --device cuda --dtype bf16 --sizes 4096,8192 --warmup 3 --iters 20 --out "$out"; then
  problem "fsdp4j bench gemm failed or found wrong results"
fi

say "fsdp4j train on the default data: cuda, then cpu (same losses expected)"
timeout 45 cli train --device cuda --out "$out/train-cuda" || problem "train --device cuda failed"
timeout 50 cli train --device cpu --out "$out/train-cpu" || say "note: train --device cpu did not finish"
loss_cuda=$(json_field "$out/train-cuda/summary.json" final_loss)
loss_cpu=$(json_field "$out/train-cpu/summary.json" final_loss)
say "final loss: cuda ${loss_cuda:-?}, cpu ${loss_cpu:-?}"
if [[ -n $loss_cuda && -n $loss_cpu ]] && ! awk -v a="$loss_cuda" -v b="$loss_cpu" \
     'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * b) }'; then
  problem "train --device cuda ends at loss $loss_cuda, the cpu at $loss_cpu (more than 0.1% apart)"
fi

say "fsdp4j train --model llama on cuda (its numerics against PyTorch: CudaLlamaParityTest above)"
timeout 15 cli train --model llama --steps 50 --device cuda --out "$out/train-llama-cuda" \
  || problem "train --model llama --device cuda failed"
loss_llama=$(json_field "$out/train-llama-cuda/summary.json" final_loss)
say "llama final loss after 50 steps: ${loss_llama:-?}"

rows=()
for dtype in fp32 bf16; do
  for n in 1 2; do
    dir=$out/step-$dtype-n$n
    say "fsdp4j bench step: gpt2-124m, batch 8 x 1024, $dtype, $n rank(s) on cuda:0"
    if timeout 35 cli bench step --device cuda:0 --world-size "$n" --preset gpt2-124m --batch-size 8 \
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
say "summary: tests ${tests_ok:-?} ok / ${tests_failed:-?} failed / ${tests_skipped:-?} skipped; loss cuda ${loss_cuda:-?} vs cpu ${loss_cpu:-?}"
printf '%-5s %2s %10s %12s %8s %6s %9s\n' dtype N "ms/step" "tok/s" MFU syncs promoted
for r in "${rows[@]+"${rows[@]}"}"; do echo "$r"; done

finish
