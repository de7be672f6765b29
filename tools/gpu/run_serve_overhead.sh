#!/bin/bash
# What `gannet serve` adds to the serving workload (issue 55 item 4): gannet-serving-bench (the C
# ABI) and gannet-http-bench (the same prompts and lengths through the HTTP server) on 31B,
# concurrency 1, 16 and 64, one after the other (each holds the model on the GPU).
#   build  gannet-serving-bench, gannet-serve and gannet-http-bench (examples on: the server)
#   run    both benches per concurrency; the summary pairs their lines
# Targets: the server adds <= 3 % to TPOT p50 and <= 5 ms to TTFT p50.
# Environment: as tools/gpu/stages.sh says; GANNET_OVERHEAD_ARGS replaces the workload's lengths
# (default "--input-len 1000 --output-len 200").
source "$(dirname "$0")/stages.sh"
gpu_header "gannet serve overhead"
lens=${GANNET_OVERHEAD_ARGS:---input-len 1000 --output-len 200}

stage_build() {
  # The server needs cpp-httplib: a copy carried in .device/debs (libcpp-httplib-dev,
  # libcpp-httplib0.11; the GPU machine has none) unpacks under /opt/deps, whose .pc file still
  # says prefix=/usr. Its Requires.private (openssl, zlib, brotli) must be on the machine.
  local pc=/opt/deps/usr/lib/x86_64-linux-gnu/pkgconfig/cpp-httplib.pc
  if [ -f "$pc" ]; then
    sed -i 's#^prefix=/usr$#prefix=/opt/deps/usr#' "$pc"
    export PKG_CONFIG_PATH=/opt/deps/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DGANNET_BUILD_EXAMPLES=ON > "$out/build.log" 2>&1 &&
    ninja -C "$build" -j"$(nproc)" gannet-serving-bench gannet_serve gannet-http-bench \
      >> "$out/build.log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && tail -40 "$out/build.log"
  return $rc
}
stage_run() {
  local c rc=0 log="$out/serve.log" port
  for c in 1 16 64; do
    note "-- C ABI, concurrency $c"
    timeout 300 "$build/bench/serving/gannet-serving-bench" --model dummy:31b --name "capi-c$c" \
      $lens --concurrency "$c" 2>&1 | grep -E "conc +[0-9]+ reqs" | tee -a "$summary"
  done
  "$build/examples/cli/gannet-serve" -m dummy:31b --port 0 -q 2> "$log" &
  local pid=$!
  for _ in $(seq 1 1200); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] && break
    sleep 0.5
  done
  for c in 1 16 64; do
    note "-- HTTP, concurrency $c"
    timeout 300 "$build/bench/serving/gannet-http-bench" --url "http://127.0.0.1:$port" \
      --vocab 262144 --name "http-c$c" $lens --concurrency "$c" 2>&1 | tee -a "$summary" || rc=1
  done
  kill $pid; wait $pid 2> /dev/null
  return $rc
}
gpu_run_stages build run -- "$@"
