#!/usr/bin/env bash
# gannet-http-bench against `gannet serve` on a tiny model (CPU): the driver works end to end.
#   http_bench_smoke.sh GANNET_SERVE HTTP_BENCH MODEL_DIR
set -euo pipefail
serve=$1 bench=$2 model=$3
log=$(mktemp)
"$serve" -m "$model" --backend cpu --threads 2 --port 0 -c 128 -q 2> "$log" &
pid=$!
trap 'kill $pid 2> /dev/null; wait $pid 2> /dev/null; rm -f "$log"' EXIT
port=
for _ in $(seq 1 600); do
  port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
  [ -n "$port" ] && break
  kill -0 $pid 2> /dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "server did not start"; cat "$log"; exit 1; }
# /health answers 503 while the model loads; the bench's first request would only wait.
for _ in $(seq 1 600); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" || true)
  [ "$code" = 200 ] && break
  sleep 0.1
done
"$bench" --url "http://127.0.0.1:$port" --vocab 512 --input-len 40 --output-len 8 \
  --concurrency 4 --requests 8 --name smoke
