#!/usr/bin/env python3
"""A standard OpenAI load generator (NVIDIA's AIPerf, from PyPI) against `gannet serve`.

usage: loadgen_test.py GANNET_BINARY MODEL_DIR REPORT_DIR

Starts the server on the tiny model (CPU backend), runs a short fixed workload (32 streamed chat
requests, 32 prompt and 16 output tokens each, concurrency 4), then checks AIPerf's report: every
request succeeded, throughput is nonzero, and its token totals equal the server's own /metrics
counters. AIPerf's artifacts (profile_export_aiperf.json/.csv, per-request jsonl, console table)
are left in REPORT_DIR, which the build tree keeps. Exits 77 (ctest's skip code) when AIPerf is
missing; tools/install_deps.sh puts it in its own virtual environment (its ~140 pinned packages
stay out of the python3 the other tests use).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

# Where tools/install_deps.sh installs AIPerf; GANNET_AIPERF or PATH may name another.
VENV_AIPERF = "/opt/gannet-aiperf/bin/aiperf"

REQUESTS, CONCURRENCY, PROMPT_TOKENS, OUTPUT_TOKENS = 32, 4, 32, 16
KEY = "loadgen-key"


def find_aiperf():
    for cand in (os.environ.get("GANNET_AIPERF"), VENV_AIPERF, shutil.which("aiperf")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


class Server:
    """`gannet serve` on 127.0.0.1 and a free port (--port 0), with an API key."""

    def __init__(self, gannet, model):
        fd, self.key_file = tempfile.mkstemp()
        os.write(fd, (KEY + "\n").encode())
        os.close(fd)
        self.proc = subprocess.Popen(
            [gannet, "serve", "-m", model, "--backend", "cpu", "--threads", "2", "--port", "0",
             "-c", "4096", "-q", "--api-key-file", self.key_file],
            stderr=subprocess.PIPE, text=True)
        self.log = [self.proc.stderr.readline()]
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log[0])
        if not m:
            self.proc.kill()
            raise RuntimeError("server did not start: " + self.log[0] + self.proc.stderr.read())
        self.url = "http://127.0.0.1:" + m.group(1)
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.time() + 60
        while self.status("/health") != 200:
            if time.time() > deadline:
                raise RuntimeError("the model did not load in 60 s")
            time.sleep(0.05)

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def _get(self, path):
        req = urllib.request.Request(self.url + path, headers={"Authorization": "Bearer " + KEY})
        return urllib.request.urlopen(req, timeout=30)

    def status(self, path):
        try:
            with self._get(path) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def metrics(self):
        """The /metrics counters this test compares, by their Prometheus names."""
        with self._get("/metrics") as r:
            text = r.read().decode()
        want = ("gannet_prompt_tokens_total", "gannet_generation_tokens_total",
                'gannet_request_success_total{finished_reason="length"}',
                "gannet_request_failure_total")
        values = {}
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name in want:
                values[name] = float(value)
        missing = [w for w in want if w not in values]
        assert not missing, f"/metrics lacks {missing}"
        return values

    def close(self):
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the server did not stop within 30 s of SIGTERM")
        os.unlink(self.key_file)
        assert code == 0, f"server exit code {code}: {''.join(self.log)}"


def run_aiperf(aiperf, server, model, out_dir):
    args = [aiperf, "profile", "--model", os.path.basename(model.rstrip("/")),
            "--url", server.url, "--api-key", KEY, "--endpoint-type", "chat", "--streaming",
            # A folder's tokenizer.json, not a hub name: nothing is downloaded. The path must be
            # absolute for AIPerf to take it as a folder.
            "--tokenizer", os.path.abspath(model),
            "--prompt-input-tokens-mean", str(PROMPT_TOKENS), "--prompt-input-tokens-stddev", "0",
            "--prompt-output-tokens-mean", str(OUTPUT_TOKENS), "--prompt-output-tokens-stddev", "0",
            # Every reply is exactly OUTPUT_TOKENS long, so the totals below are exact.
            "--extra-inputs", "ignore_eos:true",
            # Token counts from each reply's `usage`: the tiny model's text does not re-tokenize
            # to the tokens it was sampled as, and the chat template's tokens count as prompt.
            "--use-server-token-count",
            "--request-count", str(REQUESTS), "--concurrency", str(CONCURRENCY),
            "--random-seed", "1", "--request-timeout-seconds", "60",
            # No GPU to watch (it would probe ports 9400/9401); the server's /metrics is scraped
            # during the run (on by default) and kept beside the report.
            "--no-gpu-telemetry",
            "--output-artifact-dir", out_dir, "--no-auto-plot", "--ui-type", "none"]
    env = dict(os.environ)
    # AIPerf 0.13 in HF offline mode looks every tokenizer up in the hub cache, local folders
    # too; a local absolute path needs no network without it.
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TRANSFORMERS_OFFLINE", None)
    with open(os.path.join(out_dir, "aiperf_stdout.txt"), "w") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its worker processes too
            proc.wait()
            code = "timeout (240 s)"
    if code != 0:
        with open(os.path.join(out_dir, "aiperf_stdout.txt")) as f:
            tail = f.read()[-6000:]
        raise AssertionError(f"aiperf exited {code}:\n{tail}")


def metric(report, name, stat="avg"):
    entry = report.get(name)
    assert isinstance(entry, dict) and stat in entry, f"the report lacks {name}.{stat}"
    return entry[stat]


def check_report(report, before, after):
    n = REQUESTS
    assert report.get("was_cancelled") is False and report.get("is_complete") is True, \
        (report.get("was_cancelled"), report.get("is_complete"))
    assert not report.get("error_summary"), report.get("error_summary")
    assert metric(report, "request_count") == n, metric(report, "request_count")
    assert metric(report, "request_error_rate") == 0, metric(report, "request_error_rate")
    for name in ("request_throughput", "output_token_throughput", "time_to_first_token",
                 "inter_token_latency", "request_latency"):
        assert metric(report, name) > 0, f"{name} = {metric(report, name)}"
    # Lengths as the server's `usage` reported them, request by request.
    for stat in ("min", "max"):
        assert metric(report, "output_sequence_length", stat) == OUTPUT_TOKENS, \
            (stat, metric(report, "output_sequence_length", stat))
    total_out = metric(report, "total_osl")
    total_in = metric(report, "total_isl")
    assert total_out == n * OUTPUT_TOKENS, total_out
    # The chat template wraps each prompt, so the server counts more than the 32 asked for.
    assert total_in >= n * PROMPT_TOKENS, total_in
    # AIPerf's totals against the server's own counters over the same interval.
    delta = {k: after[k] - before[k] for k in before}
    assert delta["gannet_generation_tokens_total"] == total_out, (delta, total_out)
    assert delta["gannet_prompt_tokens_total"] == total_in, (delta, total_in)
    assert delta['gannet_request_success_total{finished_reason="length"}'] == n, delta
    assert delta["gannet_request_failure_total"] == 0, delta


def check_server_metrics(export, url):
    """AIPerf's Prometheus scraper read gannet's /metrics: the families it reports, typed."""
    summary = export.get("summary", {})
    assert url + "/metrics" in summary.get("endpoints_successful", []), summary
    families = export.get("metrics", {})
    for name, kind in (("gannet_generation_tokens", "counter"), ("gannet_prompt_tokens", "counter"),
                       ("gannet_time_to_first_token_seconds", "histogram"),
                       ("gannet_num_requests_running", "gauge")):
        assert families.get(name, {}).get("type") == kind, (name, families.get(name))


def main():
    gannet, model, report_dir = sys.argv[1:4]
    aiperf = find_aiperf()
    if aiperf is None:
        print("SKIP: AIPerf (PyPI package aiperf) is missing: tools/install_deps.sh installs it "
              f"as root into {os.path.dirname(os.path.dirname(VENV_AIPERF))}; or set "
              "GANNET_AIPERF to an aiperf executable")
        return 77
    shutil.rmtree(report_dir, ignore_errors=True)
    os.makedirs(report_dir)
    start = time.time()
    server = Server(gannet, model)
    try:
        before = server.metrics()
        run_aiperf(aiperf, server, model, report_dir)
        after = server.metrics()
    finally:
        server.close()
    path = os.path.join(report_dir, "profile_export_aiperf.json")
    with open(path) as f:
        report = json.load(f)
    check_report(report, before, after)
    with open(os.path.join(report_dir, "server_metrics_export.json")) as f:
        check_server_metrics(json.load(f), server.url)
    print(f"aiperf {report.get('aiperf_version')}: {REQUESTS} requests at concurrency "
          f"{CONCURRENCY}, {metric(report, 'request_throughput'):.1f} req/s, "
          f"{metric(report, 'output_token_throughput'):.0f} output tok/s, TTFT avg "
          f"{metric(report, 'time_to_first_token'):.0f} ms, ITL avg "
          f"{metric(report, 'inter_token_latency'):.1f} ms; report in {report_dir} "
          f"({time.time() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
