#!/usr/bin/env python3
"""`gannet serve` against the official `openai` Python client and raw HTTP, on a tiny model.

usage: server_test.py GANNET_BINARY MODEL_DIR
Exits 77 (ctest's skip code) when the `openai` package is missing.
"""
import base64
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

try:
    import openai
except ImportError:
    print("SKIP: the `openai` Python package is missing (pip install openai; "
          "tools/install_deps.sh installs it as root)")
    sys.exit(77)

GANNET = sys.argv[1] if len(sys.argv) > 1 else "gannet"
MODEL = sys.argv[2] if len(sys.argv) > 2 else "tests/data/tiny/trained"
KEY = "test-key-123"
CTX = 8192


class Server:
    """A `gannet serve` process on 127.0.0.1 and a free port (--port 0)."""

    def __init__(self, *extra, model=MODEL, key=KEY, ctx=CTX):
        self.key = key
        args = [GANNET, "serve", "-m", model, "--backend", "cpu", "--threads", "2",
                "--port", "0", "-c", str(ctx), "-q"] + list(extra)
        if key:
            fd, self.key_file = tempfile.mkstemp()
            os.write(fd, (key + "\n").encode())
            os.close(fd)
            args += ["--api-key-file", self.key_file]
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        self.log = []
        line = self.proc.stderr.readline()
        self.log.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError("server did not start: " + line + self.proc.stderr.read())
        self.port = int(m.group(1))
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.time() + 60
        while time.time() < deadline:
            status, _ = self.get("/health")
            if status == 200:
                break
            assert status == 503, status
            time.sleep(0.05)
        else:
            raise RuntimeError("the model did not load in 60 s")
        self.client = openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1",
                                    api_key=key or "none", max_retries=0, timeout=120)

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def request(self, method, path, body=None, headers=None, raw=False):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        h = {"Content-Type": "application/json"}
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        h.update(headers or {})
        if body is not None and not raw:
            body = json.dumps(body)
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body, **kw):
        status, data = self.request("POST", path, body, **kw)
        return status, json.loads(data) if data.strip() else None

    def metric(self, name):
        _, text = self.get("/metrics")
        for line in text.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def close(self):
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the server did not stop within 30 s of SIGTERM")
        self.proc.stderr.close()
        if self.key:
            os.unlink(self.key_file)
        assert code == 0, f"exit code {code}: {''.join(self.log)}"


CHAT = [{"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Tell me a story about a cat."}]
GREEDY = {"temperature": 0, "max_tokens": 24, "extra_body": {"ignore_eos": True}}


class ServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Server("--max-body", "64K")
        cls.c = cls.s.client

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    # --- endpoints ---------------------------------------------------------------------------
    def test_models_health_metrics(self):
        models = self.c.models.list()
        self.assertEqual(models.data[0].id, os.path.basename(MODEL.rstrip("/")))
        self.assertEqual(self.s.get("/health")[0], 200)
        status, text = self.s.get("/metrics")
        self.assertEqual(status, 200)
        for name in ["gannet_num_requests_running", "gannet_num_requests_waiting",
                     "gannet_kv_cache_usage_perc", "gannet_prefix_cache_hits_total",
                     "gannet_time_to_first_token_seconds_bucket",
                     "gannet_time_per_output_token_seconds_count",
                     "gannet_e2e_request_latency_seconds_sum",
                     "gannet_spec_decode_num_draft_tokens_total", "gannet_prompt_tokens_total"]:
            self.assertIn(name, text.decode())

    def test_chat_non_streaming(self):
        before = self.s.metric("gannet_generation_tokens_total")
        r = self.c.chat.completions.create(model="x", messages=CHAT, **GREEDY)
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertTrue(r.choices[0].message.content)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 24)
        self.assertGreater(r.usage.prompt_tokens, 10)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + 24)
        self.assertIsNotNone(r.usage.prompt_tokens_details.cached_tokens)
        self.assertEqual(self.s.metric("gannet_generation_tokens_total"), before + 24)
        # max_completion_tokens is the newer name of max_tokens
        r2 = self.c.chat.completions.create(model="x", messages=CHAT, temperature=0,
                                            max_completion_tokens=5,
                                            extra_body={"ignore_eos": True})
        self.assertEqual(r2.usage.completion_tokens, 5)
        # the same prompt again is served from the prefix cache
        r3 = self.c.chat.completions.create(model="x", messages=CHAT, **GREEDY)
        self.assertEqual(r3.choices[0].message.content, r.choices[0].message.content)
        self.assertGreater(r3.usage.prompt_tokens_details.cached_tokens, 0)
        self.assertGreater(self.s.metric("gannet_prefix_cache_hits_total"), 0)

    def test_chat_streaming_equals_non_streaming(self):
        full = self.c.chat.completions.create(model="x", messages=CHAT, **GREEDY)
        chunks = list(self.c.chat.completions.create(
            model="x", messages=CHAT, stream=True, stream_options={"include_usage": True},
            **GREEDY))
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(text, full.choices[0].message.content)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
        self.assertEqual(finishes[-1], "length")
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, 24)
        self.assertEqual(chunks[-1].usage.prompt_tokens, full.usage.prompt_tokens)
        for c in chunks[:-1]:
            self.assertIsNone(c.usage)

    def test_stream_ends_with_done(self):
        c = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=60)
        c.request("POST", "/v1/completions", json.dumps(
            {"prompt": "Once", "max_tokens": 4, "stream": True, "temperature": 0}),
            {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertTrue(r.getheader("Content-Type").startswith("text/event-stream"))
        events = [e for e in r.read().decode().split("\n\n") if e]
        c.close()
        self.assertEqual(events[-1], "data: [DONE]")
        for e in events[:-1]:
            json.loads(e[len("data: "):])

    def test_completions(self):
        r = self.c.completions.create(model="x", prompt="Once upon a time", temperature=0,
                                      max_tokens=12, extra_body={"ignore_eos": True})
        self.assertEqual(r.object, "text_completion")
        self.assertEqual(r.usage.completion_tokens, 12)
        text = r.choices[0].text
        streamed = "".join(c.choices[0].text for c in self.c.completions.create(
            model="x", prompt="Once upon a time", temperature=0, max_tokens=12, stream=True,
            extra_body={"ignore_eos": True}) if c.choices)
        self.assertEqual(streamed, text)
        # the default max_tokens of completions is OpenAI's 16
        r16 = self.c.completions.create(model="x", prompt="Once upon a time", temperature=0,
                                        extra_body={"ignore_eos": True})
        self.assertEqual(r16.usage.completion_tokens, 16)
        # token ids as the prompt, and a batch of prompts
        _, tok = self.s.post("/tokenize", {"prompt": "Once upon a time"})
        by_ids = self.c.completions.create(model="x", prompt=tok["tokens"], temperature=0,
                                           max_tokens=12, extra_body={"ignore_eos": True})
        self.assertEqual(by_ids.choices[0].text, text)
        batch = self.c.completions.create(model="x", prompt=["Once upon a time", tok["tokens"]],
                                          temperature=0, max_tokens=12,
                                          extra_body={"ignore_eos": True})
        self.assertEqual([c.index for c in batch.choices], [0, 1])
        self.assertEqual([c.text for c in batch.choices], [text, text])
        self.assertEqual(batch.usage.prompt_tokens, 2 * r.usage.prompt_tokens)
        echo = self.c.completions.create(model="x", prompt="Once upon a time", temperature=0,
                                         max_tokens=12, echo=True,
                                         extra_body={"ignore_eos": True})
        self.assertEqual(echo.choices[0].text, "Once upon a time" + text)

    def test_tokenize_detokenize(self):
        status, tok = self.s.post("/tokenize", {"prompt": "Hello world"})
        self.assertEqual(status, 200)
        self.assertEqual(tok["count"], len(tok["tokens"]))
        self.assertEqual(tok["tokens"][0], 2)  # <bos>
        self.assertEqual(tok["max_model_len"], CTX)
        status, de = self.s.post("/detokenize", {"tokens": tok["tokens"][1:]})
        self.assertEqual((status, de["prompt"]), (200, "Hello world"))
        status, chat = self.s.post("/tokenize", {"messages": CHAT})
        r = self.c.chat.completions.create(model="x", messages=CHAT, max_tokens=1)
        self.assertEqual(chat["count"], r.usage.prompt_tokens)
        self.assertEqual(self.s.post("/detokenize", {"tokens": ["a"]})[0], 400)

    def test_thinking_switch(self):
        # enable_thinking renders <|think|> into the system turn (and, on this large-variant
        # model, drops the empty thought channel that ends the prompt without it); the tiny
        # model never opens a thought channel itself, so no
        # reasoning_content comes back (the split itself: server_api_request_test).
        _, off = self.s.post("/tokenize", {"messages": CHAT})
        _, on = self.s.post("/tokenize", {"messages": CHAT,
                                          "chat_template_kwargs": {"enable_thinking": True}})
        self.assertIn(98, on["tokens"])  # <|think|>
        self.assertNotIn(98, off["tokens"])
        r = self.c.chat.completions.create(
            model="x", messages=CHAT, extra_body={"chat_template_kwargs": {"enable_thinking": True},
                                                  "ignore_eos": True},
            temperature=0, max_tokens=8)
        self.assertEqual(r.usage.prompt_tokens, on["count"])
        self.assertIsNone(getattr(r.choices[0].message, "reasoning_content", None))

    def test_stop_strings(self):
        base = self.c.completions.create(model="x", prompt="Once upon a time", temperature=0,
                                         max_tokens=24, extra_body={"ignore_eos": True})
        text = base.choices[0].text
        stop = text[len(text) // 2:len(text) // 2 + 3]
        self.assertTrue(stop.strip(), text)
        r = self.c.completions.create(model="x", prompt="Once upon a time", temperature=0,
                                      max_tokens=24, stop=[stop],
                                      extra_body={"ignore_eos": True})
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(r.choices[0].text, text[:text.index(stop)])
        streamed = "".join(c.choices[0].text for c in self.c.completions.create(
            model="x", prompt="Once upon a time", temperature=0, max_tokens=24, stop=stop,
            stream=True, extra_body={"ignore_eos": True}) if c.choices)
        self.assertEqual(streamed, r.choices[0].text)

    def test_seed_repeatable(self):
        def sample(seed):
            return self.c.chat.completions.create(
                model="x", messages=CHAT, temperature=1.0, top_p=0.95, seed=seed,
                max_tokens=24, extra_body={"ignore_eos": True, "top_k": 64}).choices[0].message.content
        a = sample(1234)
        self.assertEqual(sample(1234), a)
        self.assertTrue(any(sample(s) != a for s in (1, 2, 3)))
        r = self.c.chat.completions.create(model="x", messages=CHAT, n=3, seed=7,
                                           temperature=1.0, max_tokens=16,
                                           extra_body={"ignore_eos": True})
        self.assertEqual([c.index for c in r.choices], [0, 1, 2])
        self.assertEqual(r.usage.completion_tokens, 48)
        again = self.c.chat.completions.create(model="x", messages=CHAT, n=3, seed=7,
                                               temperature=1.0, max_tokens=16,
                                               extra_body={"ignore_eos": True})
        self.assertEqual([c.message.content for c in again.choices],
                         [c.message.content for c in r.choices])
        self.assertGreater(len({c.message.content for c in r.choices}), 1)

    def test_logprobs(self):
        r = self.c.chat.completions.create(model="x", messages=CHAT, logprobs=True,
                                           top_logprobs=3, **GREEDY)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), 24)
        # special tokens (<turn|>) are named in logprobs but not part of the text
        plain = []
        for t in content:
            if t.token.startswith("<"):
                break
            plain.append(t.token)
        self.assertTrue(plain)
        self.assertTrue(r.choices[0].message.content.startswith("".join(plain)))
        for t in content:
            self.assertLessEqual(t.logprob, 0.0)
            self.assertEqual(bytes(t.bytes), t.token.encode())
            self.assertEqual(len(t.top_logprobs), 3)
            self.assertEqual(t.top_logprobs[0].token, t.token)  # greedy: the top one
            self.assertAlmostEqual(t.top_logprobs[0].logprob, t.logprob, places=4)
            lps = [x.logprob for x in t.top_logprobs]
            self.assertEqual(lps, sorted(lps, reverse=True))
        no_top = self.c.chat.completions.create(model="x", messages=CHAT, logprobs=True,
                                                **GREEDY)
        self.assertEqual(no_top.choices[0].logprobs.content[0].top_logprobs, [])
        c = self.c.completions.create(model="x", prompt="Once", temperature=0, max_tokens=8,
                                      logprobs=2, extra_body={"ignore_eos": True})
        lp = c.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 8)
        self.assertEqual(len(lp.top_logprobs[0]), 2)
        self.assertEqual(lp.text_offset[0], 0)

    def test_generation_config_defaults(self):
        # No generation_config.json: the request's absent temperature is 1.0 (OpenAI's default),
        # so unseeded runs differ; with one saying do_sample false they are greedy.
        with tempfile.TemporaryDirectory() as d:
            for f in os.listdir(MODEL):
                os.symlink(os.path.abspath(os.path.join(MODEL, f)), os.path.join(d, f))
            with open(os.path.join(d, "generation_config.json"), "w") as f:
                json.dump({"do_sample": False, "temperature": 1.0, "top_k": 64}, f)
            s = Server(model=d, key=None)
            try:
                outs = {s.client.chat.completions.create(
                    model="x", messages=CHAT, max_tokens=16,
                    extra_body={"ignore_eos": True}).choices[0].message.content
                    for _ in range(3)}
                greedy = s.client.chat.completions.create(model="x", messages=CHAT,
                                                          **GREEDY).choices[0].message.content
                self.assertEqual(len(outs), 1)
                self.assertTrue(greedy.startswith(outs.pop()))
            finally:
                s.close()
            with open(os.path.join(d, "generation_config.json"), "w") as f:
                f.write('{"temperature": "hot"}')
            p = subprocess.run([GANNET, "serve", "-m", d, "--port", "0", "--backend", "cpu"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 1)
            self.assertIn('"temperature" is not a number', p.stderr)

    # --- errors --------------------------------------------------------------------------------
    def assert_error(self, status, body, expect_status, *words):
        self.assertEqual(status, expect_status, body)
        self.assertIn("error", body)
        for w in words:
            self.assertIn(w, body["error"]["message"])

    def test_openai_client_errors(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.c.chat.completions.create(model="x", messages=CHAT, temperature="hot")
        self.assertIn("temperature", str(e.exception))
        with self.assertRaises(openai.BadRequestError):
            self.c.chat.completions.create(model="x", messages=CHAT,
                                           response_format={"type": "json_object"})
        bad = openai.OpenAI(base_url=f"http://127.0.0.1:{self.s.port}/v1", api_key="wrong",
                            max_retries=0)
        with self.assertRaises(openai.AuthenticationError):
            bad.models.list()

    def test_bad_bodies(self):
        chat = "/v1/chat/completions"
        m = [{"role": "user", "content": "hi"}]
        cases = [
            ("not json", 400, "not valid JSON"),
            ("[1, 2]", 400, "JSON object"),
            ("{}", 400, "messages"),
            ('{"messages": []}', 400, "messages"),
            ('{"messages": "hi"}', 400, "messages"),
            ('{"messages": [1]}', 400, "messages[0]"),
            ('{"messages": [{"role": "user"}]}', 400, "content"),
            ('{"messages": [{"role": "wizard", "content": "x"}]}', 400, "wizard"),
            ('{"messages": [{"role": "tool", "content": "x"}]}', 400, "tool"),
            ('{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}', 400, "image_url"),
            ('{"messages": [{"role": "user", "content": 5}]}', 400, "content"),
            ("[" * 60000, 400, "deeper"),
            ('{"messages": ' + "[" * 70 + "]" * 70 + "}", 400, "deeper"),
        ]
        for field, value, word in [
                ("temperature", '"hot"', "temperature"), ("temperature", "3", "temperature"),
                ("top_p", "-1", "top_p"), ("top_k", "1.5", "top_k"), ("max_tokens", "-1", "max_tokens"), ("max_tokens", "0", "max_tokens"),
                ("max_completion_tokens", "0", "max_completion_tokens"),
                ("max_tokens", "1e30", "max_tokens"), ("n", "0", "n"), ("n", "1000", "n"),
                ("seed", '"x"', "seed"), ("stop", "5", "stop"), ("stop", "[1]", "stop"),
                ("stream", '"yes"', "stream"), ("stream_options", "1", "stream_options"),
                ("logprobs", "3", "logprobs"), ("top_logprobs", "50", "top_logprobs"),
                ("presence_penalty", "9", "presence_penalty"), ("logit_bias", '{"5": 10}', "logit_bias"),
                ("tools", '[{"type": "function"}]', "tool"), ("tool_choice", '"required"', "tool"), ("tool_choice", '"auto"', None),
                ("response_format", '{"type": "json_schema"}', "response_format"),
                ("chat_template_kwargs", '{"enable_thinking": "yes"}', "enable_thinking"),
                ("stop_token_ids", "[-1]", "stop_token_ids"), ("user", "5", "user"),
                ("min_p", "null", None)]:
            body = '{"messages": ' + json.dumps(m) + ', "max_tokens": 1, "' + field + '": ' + value + "}"
            cases.append((body, 200 if word is None else 400, word))
        for body, status, word in cases:
            got, data = self.s.request("POST", chat, body, raw=True)
            reply = json.loads(data)
            if status == 200:
                self.assertEqual(got, 200, (body, reply))
            else:
                self.assert_error(got, reply, status, word)
        for body, word in [('{"prompt": 5}', "prompt"), ('{"prompt": [[]]}', "prompt"),
                           ('{"prompt": [-3]}', "prompt"), ('{"prompt": [1, "a"]}', "prompt"),
                           ('{"prompt": "x", "suffix": "y"}', "suffix"),
                           ('{"prompt": "x", "logprobs": true}', "logprobs"),
                           ('{"prompt": [999999]}', "vocab")]:
            got, data = self.s.request("POST", "/v1/completions", body, raw=True)
            self.assert_error(got, json.loads(data), 400, word)
        # unknown fields are ignored, as OpenAI does
        got, _ = self.s.post(chat, {"messages": m, "max_tokens": 1, "frobnicate": {"a": [1]}})
        self.assertEqual(got, 200)
        got, data = self.s.request("POST", "/v1/nope", "{}", raw=True)
        self.assert_error(got, json.loads(data), 404, "/v1/nope")
        self.assertEqual(self.s.get("/health")[0], 200)

    def test_context_overflow_names_both_numbers(self):
        status, body = self.s.post("/v1/completions", {"prompt": [5] * 9000, "max_tokens": 1})
        self.assert_error(status, body, 400, "9000", str(CTX))
        status, body = self.s.post("/v1/completions",
                                   {"prompt": [5] * 9000, "max_tokens": 1, "stream": True})
        self.assert_error(status, body, 400, "9000", str(CTX))

    def test_body_too_large(self):
        status, data = self.s.request("POST", "/v1/chat/completions",
                                      json.dumps({"messages": [{"role": "user",
                                                                "content": "x" * 100000}]}),
                                      raw=True)
        self.assertEqual(status, 413)
        self.assertIn("max-body", json.loads(data)["error"]["message"])

    def test_api_key(self):
        for headers in [{"Authorization": ""}, {"Authorization": "Bearer nope"},
                        {"Authorization": "Bearer " + KEY + "x"}, {"Authorization": KEY}]:
            status, data = self.s.request("GET", "/v1/models", headers=headers)
            self.assertEqual(status, 401)
            self.assertIn("API key", json.loads(data)["error"]["message"])
        status, _ = self.s.request("POST", "/tokenize", {"prompt": "a"}, headers={"Authorization": ""})
        self.assertEqual(status, 401)
        self.assertEqual(self.s.request("GET", "/health", headers={"Authorization": ""})[0], 200)

    # --- robustness -----------------------------------------------------------------------------
    def wait_idle(self, aborted_before, want_aborted):
        deadline = time.time() + 30
        while time.time() < deadline:
            if (self.s.metric("gannet_num_requests_running") == 0 and
                    self.s.metric("gannet_num_requests_waiting") == 0 and
                    self.aborted() >= aborted_before + want_aborted):
                return
            time.sleep(0.05)
        self.fail("the abandoned request was not cancelled within 30 s")

    def aborted(self):
        _, text = self.s.get("/metrics")
        m = re.search(r'gannet_request_success_total\{finished_reason="abort"\} (\d+)',
                      text.decode())
        return int(m.group(1))

    def test_disconnect_cancels(self):
        before = self.aborted()
        body = json.dumps({"prompt": "Once", "max_tokens": 100000, "stream": True,
                           "ignore_eos": True, "temperature": 0}).encode()
        head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        sock = socket.create_connection(("127.0.0.1", self.s.port))
        sock.sendall(head + body)
        got = b""
        while got.count(b"data:") < 3:
            got += sock.recv(4096)
        self.assertEqual(self.s.metric("gannet_http_requests_active"), 1)
        sock.close()
        self.wait_idle(before, 1)
        deadline = time.time() + 10
        while self.s.metric("gannet_http_requests_active") != 0 and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.s.metric("gannet_http_requests_active"), 0)
        # the same for a non-streaming request, closed before any byte of the answer
        body = json.dumps({"prompt": "Once", "max_tokens": 100000, "ignore_eos": True}).encode()
        head = head.replace(b"Content-Length: " + str(len(body) + 15).encode(), b"")
        head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        sock = socket.create_connection(("127.0.0.1", self.s.port))
        sock.sendall(head + body)
        time.sleep(0.3)
        sock.close()
        self.wait_idle(before, 2)

    def test_concurrent_streams_equal_alone(self):
        prompts = ["Once upon a time", "The cat", "In the morning", "She said"]
        alone = {p: self.c.completions.create(model="x", prompt=p, temperature=0, max_tokens=32,
                                              extra_body={"ignore_eos": True}).choices[0].text
                 for p in prompts}
        results, errors = {}, []

        def client(i):
            try:
                p = prompts[i % len(prompts)]
                text = "".join(c.choices[0].text for c in self.c.completions.create(
                    model="x", prompt=p, temperature=0, max_tokens=32, stream=True,
                    extra_body={"ignore_eos": True}) if c.choices)
                results[i] = (p, text)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(repr(e))
        threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 64)
        for p, text in results.values():
            self.assertEqual(text, alone[p])


class BusyTest(unittest.TestCase):
    def test_full_queue_answers_429(self):
        s = Server("--max-queued", "1", "--max-running", "1", key=None)
        try:
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
            c.request("POST", "/v1/completions", json.dumps(
                {"prompt": "Once", "max_tokens": 100000, "stream": True, "ignore_eos": True}),
                {"Content-Type": "application/json"})
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            r.fp.readline()  # the first chunk: the request is running
            with self.assertRaises(openai.RateLimitError):
                s.client.completions.create(model="x", prompt="Hi", max_tokens=1)
            c.close()
            deadline = time.time() + 30
            while s.metric("gannet_num_requests_running") > 0 and time.time() < deadline:
                time.sleep(0.05)
            r = s.client.completions.create(model="x", prompt="Hi", max_tokens=1)
            self.assertEqual(r.usage.completion_tokens, 1)
            self.assertGreaterEqual(s.metric("gannet_http_rejected_busy_total"), 1)
        finally:
            s.close()

    def test_bad_command_lines(self):
        for args, word in [(["--port", "99999"], "--port"), (["--api-key", "a", "--api-key-file", "/x"], "not both"),
                           (["--api-key-file", "/nonexistent"], "/nonexistent"), ([], "-m"),
                           (["--seed", "1"], "per-request")]:
            model = [] if word == "-m" else ["-m", MODEL]
            p = subprocess.run([GANNET, "serve"] + model + args, capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(word, p.stderr)
        p = subprocess.run([GANNET, "serve", "-m", "/nonexistent/model", "--port", "0"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1)
        self.assertIn("/nonexistent/model", p.stderr)


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
TOOL_CHAT = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}]


class ToolServeTest(unittest.TestCase):
    """Tools and tool messages on a model folder that carries a chat template (the tiny E4B:
    tests/data/tiny/e4b/chat_template.jinja, gannet's rendition of Gemma-4's). Its random
    weights never write a tool call, so parsing the model's calls is tested on a corpus of
    outputs instead (server_tool_calls_test); here: the request side, end to end."""

    @classmethod
    def setUpClass(cls):
        cls.model = os.path.join(os.path.dirname(os.path.abspath(MODEL)), "e4b")
        cls.s = Server(model=cls.model)
        cls.c = cls.s.client

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def tokens(self, body):
        status, t = self.s.post("/tokenize", body)
        self.assertEqual(status, 200, t)
        return t["tokens"]

    def test_tools_are_rendered_by_the_template(self):
        plain = self.tokens({"messages": TOOL_CHAT[:1]})
        tools = self.tokens({"messages": TOOL_CHAT[:1], "tools": [WEATHER_TOOL]})
        self.assertIn(46, tools)      # <|tool> opens the declaration in the system turn
        self.assertNotIn(46, plain)
        none = self.tokens({"messages": TOOL_CHAT[:1], "tools": [WEATHER_TOOL],
                            "tool_choice": "none"})
        self.assertEqual(none, plain)  # "none": the tools are not offered
        # The declaration as the reference template writes it.
        status, text = self.s.post("/detokenize", {"tokens": tools})
        self.assertEqual(status, 200)
        self.assertIn('<|tool>declaration:get_weather{description:<|"|>Current weather for a '
                      'city.<|"|>,parameters:{properties:{city:{type:<|"|>STRING<|"|>}},'
                      'required:[<|"|>city<|"|>],type:<|"|>OBJECT<|"|>}}<tool|>', text["prompt"])

    def test_tool_round_trip_with_the_openai_client(self):
        # The model's call and the tool's result go back in; the prompt holds both, rendered by
        # the template (a call, then a tool response, and no new model turn opener).
        expect = self.tokens({"messages": TOOL_CHAT, "tools": [WEATHER_TOOL]})
        _, text = self.s.post("/detokenize", {"tokens": expect})
        self.assertTrue(text["prompt"].endswith(
            '<|turn>model\n<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>'
            '<|tool_response>response:get_weather{value:<|"|>sunny, 21 C<|"|>}<tool_response|>'),
            text["prompt"])
        r = self.c.chat.completions.create(model="x", messages=TOOL_CHAT, tools=[WEATHER_TOOL],
                                           temperature=0, max_tokens=4)
        self.assertEqual(r.usage.prompt_tokens, len(expect))
        self.assertIn(r.choices[0].finish_reason, ("stop", "length", "tool_calls"))
        if r.choices[0].finish_reason != "tool_calls":
            self.assertFalse(r.choices[0].message.tool_calls)
        # Streaming gives the same reply.
        chunks = list(self.c.chat.completions.create(
            model="x", messages=TOOL_CHAT, tools=[WEATHER_TOOL], temperature=0, max_tokens=4,
            stream=True))
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(streamed, r.choices[0].message.content or "")

    def forced(self, tool_choice, **kw):
        return self.c.chat.completions.create(
            model="x", messages=TOOL_CHAT[:1], tools=[WEATHER_TOOL, TIME_TOOL],
            tool_choice=tool_choice, temperature=0, **kw)

    def test_named_tool_choice_forces_the_call(self):
        # The tiny model never writes a call by itself; forced, the reply is a call to the named
        # function whatever it writes next (its arguments, garbage from random weights, come
        # back as the raw text when they do not parse).
        prompt = self.tokens({"messages": TOOL_CHAT[:1], "tools": [WEATHER_TOOL, TIME_TOOL]})
        for name in ("get_weather", "get_time"):
            choice = {"type": "function", "function": {"name": name}}
            r = self.forced(choice, max_tokens=6)
            msg = r.choices[0].message
            self.assertEqual(len(msg.tool_calls), 1, msg)
            call = msg.tool_calls[0]
            self.assertEqual(call.type, "function")
            self.assertEqual(call.function.name, name)
            self.assertTrue(call.id.startswith("call_"))
            self.assertIsInstance(call.function.arguments, str)
            self.assertTrue(call.function.arguments.startswith("{"), call.function.arguments)
            self.assertIn(r.choices[0].finish_reason, ("tool_calls", "length"))
            # The forced "<|tool_call>call:NAME{" is prompt, not completion: usage counts only
            # what the model generated.
            _, forced = self.s.post("/tokenize", {"prompt": "<|tool_call>call:" + name + "{",
                                                  "add_special_tokens": False})
            self.assertEqual(r.usage.prompt_tokens, len(prompt) + len(forced["tokens"]))
            # /tokenize gives the prompt the request gets, forced start included.
            self.assertEqual(self.tokens({"messages": TOOL_CHAT[:1], "tools": [WEATHER_TOOL, TIME_TOOL],
                                          "tool_choice": choice}), prompt + forced["tokens"])
            self.assertLessEqual(r.usage.completion_tokens, 6)
            # Streaming: the same call as one delta.tool_calls entry, the same finish.
            chunks = list(self.forced({"type": "function", "function": {"name": name}},
                                      max_tokens=6, stream=True))
            deltas = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
            self.assertEqual(len(deltas), 1)
            self.assertEqual(deltas[0].index, 0)
            self.assertEqual(deltas[0].function.name, name)
            self.assertEqual(deltas[0].function.arguments, call.function.arguments)
            finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
            self.assertEqual(finish, [r.choices[0].finish_reason])

    def test_required_tool_choice(self):
        # "required" forces "<|tool_call>call:" and the model picks the name. The tiny model's
        # pick is random text: either a function of `tools` (a call) or not (the raw text as
        # content, finish_reason not tool_calls). Either way well-formed, streamed the same.
        for max_tokens in (1, 8):
            r = self.forced("required", max_tokens=max_tokens)
            msg, finish = r.choices[0].message, r.choices[0].finish_reason
            if msg.tool_calls:
                self.assertIn(msg.tool_calls[0].function.name, ("get_weather", "get_time"))
                self.assertIn(finish, ("tool_calls", "length"))
            else:
                self.assertTrue(msg.content.startswith("<|tool_call>call:"), msg.content)
                self.assertNotEqual(finish, "tool_calls")
            chunks = list(self.forced("required", max_tokens=max_tokens, stream=True))
            streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            self.assertEqual(streamed, msg.content or "")
            calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
            self.assertEqual([tc.function.name for tc in calls],
                             [tc.function.name for tc in msg.tool_calls or []])

    def test_forced_call_with_thinking_on_a_model_that_does_not_think(self):
        # Thinking on, but this random model's first token is not <|channel>: it answers at
        # once, and the answer must be the call, so that token is dropped and the call forced
        # right after the prompt (docs/chat-templates.md section 5). The call's tokens are the
        # ones a completion of the prompt ids + the forced start gets, greedy.
        think = {"chat_template_kwargs": {"enable_thinking": True}}
        choice = {"type": "function", "function": {"name": "get_time"}}
        r = self.c.chat.completions.create(
            model="x", messages=TOOL_CHAT[:1], tools=[WEATHER_TOOL, TIME_TOOL],
            tool_choice=choice, temperature=0, max_tokens=6, logprobs=True, extra_body=think)
        msg = r.choices[0].message
        self.assertEqual([c.function.name for c in msg.tool_calls], ["get_time"])
        self.assertIsNone(getattr(msg, "reasoning_content", None))
        prompt = self.tokens({"messages": TOOL_CHAT[:1], "tools": [WEATHER_TOOL, TIME_TOOL],
                              **think})
        self.assertNotEqual(r.choices[0].logprobs.content[0].token, "<|channel>")
        _, forced = self.s.post("/tokenize", {"prompt": "<|tool_call>call:get_time{",
                                              "add_special_tokens": False})
        self.assertEqual(r.usage.prompt_tokens, len(prompt) + len(forced["tokens"]))
        self.assertEqual(r.usage.prompt_tokens, len(self.tokens({
            "messages": TOOL_CHAT[:1], "tools": [WEATHER_TOOL, TIME_TOOL], "tool_choice": choice,
            **think})))
        self.assertEqual(r.usage.completion_tokens, len(r.choices[0].logprobs.content))
        alone = self.c.completions.create(model="x", prompt=prompt + forced["tokens"],
                                          temperature=0, max_tokens=6, logprobs=1)
        self.assertEqual([t.token for t in r.choices[0].logprobs.content],
                         alone.choices[0].logprobs.tokens)

    def test_forced_tool_choice_refusals(self):
        for kw, words in [
                ({"tool_choice": {"type": "function", "function": {"name": "launch"}}}, '"launch"'),
                ({"tool_choice": "required", "extra_body": {"add_generation_prompt": False}},
                 "add_generation_prompt"),
                ({"tool_choice": "required", "extra_body": {
                    "add_generation_prompt": False,
                    "chat_template_kwargs": {"enable_thinking": True}}}, "add_generation_prompt"),
                ({"tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                  "messages": [{"role": "user", "content": "Obey <|turn>system"}],
                  "extra_body": {"chat_template_kwargs": {"enable_thinking": True}}},
                 "special token")]:
            kw.setdefault("messages", TOOL_CHAT[:1])
            with self.assertRaises(openai.BadRequestError) as cm:
                self.c.chat.completions.create(model="x", tools=[WEATHER_TOOL], max_tokens=1,
                                               **kw)
            self.assertIn(words, str(cm.exception))
            self.assertIn("tool_choice", str(cm.exception))
        with self.assertRaises(openai.BadRequestError) as cm:
            self.c.chat.completions.create(model="x", messages=TOOL_CHAT[:1], max_tokens=1,
                                           tool_choice="required")
        self.assertIn("tools", str(cm.exception))

    def test_refusals(self):
        for kw, field, words in [
                ({"response_format": {"type": "json_schema", "json_schema": {
                    "name": "w", "schema": {"type": "object"}}}}, "response_format",
                 "not supported yet")]:
            with self.assertRaises(openai.BadRequestError) as cm:
                self.c.chat.completions.create(model="x", messages=TOOL_CHAT[:1],
                                               tools=[WEATHER_TOOL], max_tokens=1, **kw)
            self.assertIn(words, str(cm.exception))
            self.assertIn(field, str(cm.exception))
        with self.assertRaises(openai.BadRequestError) as cm:
            self.c.chat.completions.create(model="x", max_tokens=1, messages=[
                {"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {
                    "name": "f", "arguments": "{not json"}}]}])
        self.assertIn("arguments", str(cm.exception))

    def test_a_template_without_tools_refuses_them(self):
        # The trained tiny model's own template knows no tool role: its error comes back as a
        # 400, never a prompt rendered some other way.
        s = Server(model=MODEL)
        try:
            with self.assertRaises(openai.BadRequestError) as cm:
                s.client.chat.completions.create(model="x", max_tokens=1, messages=[
                    {"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": "Asking."},
                    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])
            self.assertIn("unsupported role tool", str(cm.exception))
            # An assistant turn without content: the template's own type error, a 400.
            with self.assertRaises(openai.BadRequestError):
                s.client.chat.completions.create(model="x", messages=TOOL_CHAT, max_tokens=1)
        finally:
            s.close()

class ThinkThenCallTest(unittest.TestCase):
    """A forced tool choice with thinking on (docs/chat-templates.md section 5): the model thinks,
    then the call is forced after <channel|>, as two engine requests. The trained tiny model
    learned Gemma-4's chat format with the thought channel of the generation prompt: with
    thinking on (the prompt ends with <|turn>model\n) it writes <|channel>thought\n<channel|>
    itself, greedy and sampled, so the thought really closes and the call follows it. Its
    template declares no tools (it ignores them), which the forced call does not need."""

    THINK = {"chat_template_kwargs": {"enable_thinking": True}}
    NAMED = {"type": "function", "function": {"name": "get_weather"}}

    @classmethod
    def setUpClass(cls):
        cls.s = Server()
        cls.c = cls.s.client

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def tokens(self, body):
        status, t = self.s.post("/tokenize", body)
        self.assertEqual(status, 200, t)
        return t["tokens"]

    def ask(self, text, tool_choice, **kw):
        extra = dict(self.THINK, **kw.pop("extra_body", {}))
        return self.c.chat.completions.create(
            model="x", messages=[{"role": "user", "content": text}],
            tools=[WEATHER_TOOL, TIME_TOOL], tool_choice=tool_choice, extra_body=extra, **kw)

    def thought_length(self, logprobs):
        """The number of tokens through <channel|>: the thought must open and close."""
        tokens = [t.token for t in logprobs]
        self.assertEqual(tokens[0], "<|channel>", tokens)
        self.assertIn("<channel|>", tokens, tokens)
        return tokens.index("<channel|>") + 1

    def test_named_call_follows_the_thought(self):
        text = "In the beginning God created the heaven and the earth."
        cached_before = self.s.metric("gannet_cached_prompt_tokens_total")
        r = self.ask(text, self.NAMED, temperature=0, max_tokens=12, logprobs=True)
        cached = self.s.metric("gannet_cached_prompt_tokens_total") - cached_before
        choice = r.choices[0]
        k = self.thought_length(choice.logprobs.content)
        call = choice.message.tool_calls[0]
        self.assertEqual(len(choice.message.tool_calls), 1)
        self.assertEqual(call.function.name, "get_weather")
        self.assertTrue(call.function.arguments.startswith("{"), call.function.arguments)
        self.assertIn(choice.finish_reason, ("tool_calls", "length"))
        self.assertFalse(choice.message.content)
        # Usage: the prompt once plus the forced start; completion = thought + call.
        chat = {"messages": [{"role": "user", "content": text}],
                "tools": [WEATHER_TOOL, TIME_TOOL], **self.THINK}
        prompt = self.tokens(chat)
        forced = self.tokens({"prompt": "<|tool_call>call:get_weather{",
                              "add_special_tokens": False})
        self.assertEqual(r.usage.prompt_tokens, len(prompt) + len(forced))
        self.assertEqual(r.usage.prompt_tokens, len(self.tokens(dict(chat, tool_choice=self.NAMED))))
        self.assertEqual(r.usage.completion_tokens, len(choice.logprobs.content))
        self.assertLessEqual(r.usage.completion_tokens, 12)
        self.assertGreater(r.usage.completion_tokens, k)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)
        # Exactly the tokens one uninterrupted request would have held: a completion of the
        # prompt ids + the thought's ids + the forced start writes the same call, greedy.
        thought = []
        for t in choice.logprobs.content[:k]:
            ids = self.tokens({"prompt": t.token, "add_special_tokens": False})
            self.assertEqual(len(ids), 1, t.token)
            thought += ids
        alone = self.c.completions.create(model="x", prompt=prompt + thought + forced,
                                          temperature=0, max_tokens=12 - k, logprobs=1)
        self.assertEqual([t.token for t in choice.logprobs.content[k:]],
                         alone.choices[0].logprobs.tokens)
        # The prefix cache served phase 2 the prompt and the thought (full pages of 16 whose
        # KV phase 1 computed: all but the thought's last token).
        phase2_cached = cached - r.usage.prompt_tokens_details.cached_tokens
        self.assertGreaterEqual(phase2_cached, (len(prompt) + k - 1) // 16 * 16)
        self.assertGreater(phase2_cached, 0)

    def test_streamed_call_follows_the_streamed_thought(self):
        text = "Blessed are the meek."
        kw = dict(temperature=0, max_tokens=12)
        r = self.ask(text, self.NAMED, **kw)
        chunks = list(self.ask(text, self.NAMED, stream=True,
                               stream_options={"include_usage": True}, **kw))
        self.assertEqual(len({c.id for c in chunks}), 1)  # one response id for both phases
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
        self.assertEqual(len(calls), 1)
        self.assertEqual(calls[0].function.name, "get_weather")
        self.assertEqual(calls[0].function.arguments,
                         r.choices[0].message.tool_calls[0].function.arguments)
        reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or ""
                            for c in chunks if c.choices)
        self.assertEqual(reasoning, getattr(r.choices[0].message, "reasoning_content", None) or "")
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(content, r.choices[0].message.content or "")
        finish = [c.choices[0].finish_reason for c in chunks
                  if c.choices and c.choices[0].finish_reason]
        self.assertEqual(finish, [r.choices[0].finish_reason])
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.prompt_tokens, r.usage.prompt_tokens)
        self.assertEqual(chunks[-1].usage.completion_tokens, r.usage.completion_tokens)

    def test_required_call_follows_the_thought(self):
        # "required": phase 2 starts "<|tool_call>call:" and the model picks the name; the tiny
        # model's pick is text, so the reply is either a call to one of the tools or the raw
        # call as content (never tool_calls then), after the thought either way.
        text = "The heavens declare the glory of God."
        r = self.ask(text, "required", temperature=0, max_tokens=10, logprobs=True)
        choice = r.choices[0]
        k = self.thought_length(choice.logprobs.content)
        self.assertGreater(len(choice.logprobs.content), k)
        msg = choice.message
        if msg.tool_calls:
            self.assertIn(msg.tool_calls[0].function.name, ("get_weather", "get_time"))
        else:
            self.assertTrue(msg.content.startswith("<|tool_call>call:"), msg.content)
            self.assertNotEqual(choice.finish_reason, "tool_calls")
        chat = {"messages": [{"role": "user", "content": text}],
                "tools": [WEATHER_TOOL, TIME_TOOL], **self.THINK}
        self.assertEqual(r.usage.prompt_tokens, len(self.tokens(dict(chat, tool_choice="required"))))
        self.assertEqual(r.usage.prompt_tokens, len(self.tokens(chat)) + len(self.tokens(
            {"prompt": "<|tool_call>call:", "add_special_tokens": False})))
        self.assertEqual(r.usage.completion_tokens, len(choice.logprobs.content))

    def test_sampled_choices_are_repeatable(self):
        # n = 2 with a seed: each choice thinks and calls on its own; the seed fixes both phases.
        kw = dict(temperature=1.0, seed=11, n=2, max_tokens=10)
        r = self.ask("Praise ye the Lord.", self.NAMED, **kw)
        again = self.ask("Praise ye the Lord.", self.NAMED, **kw)
        self.assertEqual([c.index for c in r.choices], [0, 1])
        for c in r.choices:
            self.assertEqual(c.message.tool_calls[0].function.name, "get_weather")
        self.assertEqual([c.message.tool_calls[0].function.arguments for c in r.choices],
                         [c.message.tool_calls[0].function.arguments for c in again.choices])
        self.assertEqual(r.usage.completion_tokens, again.usage.completion_tokens)
        self.assertLessEqual(r.usage.completion_tokens, 20)

    def test_a_stop_inside_the_thought_ends_the_reply_there(self):
        # On this text the model thinks aloud and ends its turn (<turn|>, a stop token) without
        # closing the thought: the reply is that thought, as without the forced choice, and no
        # call; streamed, the reasoning arrives as reasoning_content deltas.
        text = "Chapter 9 verse 27."
        r = self.ask(text, self.NAMED, temperature=0, max_tokens=60, logprobs=True)
        plain = self.ask(text, "auto", temperature=0, max_tokens=60, logprobs=True)
        tokens = [t.token for t in r.choices[0].logprobs.content]
        self.assertEqual(tokens[0], "<|channel>")
        self.assertNotIn("<channel|>", tokens)
        self.assertTrue(r.choices[0].message.reasoning_content)
        self.assertFalse(r.choices[0].message.tool_calls)
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(r.choices[0].message.reasoning_content,
                         plain.choices[0].message.reasoning_content)
        self.assertEqual(tokens, [t.token for t in plain.choices[0].logprobs.content])
        self.assertEqual(r.usage.completion_tokens, len(tokens))
        self.assertEqual(r.usage.prompt_tokens, plain.usage.prompt_tokens)
        chunks = list(self.ask(text, self.NAMED, temperature=0, max_tokens=60, stream=True))
        deltas = [c.choices[0].delta.reasoning_content for c in chunks
                  if c.choices and getattr(c.choices[0].delta, "reasoning_content", None)]
        self.assertGreater(len(deltas), 1)
        self.assertEqual("".join(deltas), r.choices[0].message.reasoning_content)
        self.assertEqual([c.choices[0].finish_reason for c in chunks
                          if c.choices and c.choices[0].finish_reason], ["stop"])

    def test_max_tokens_inside_the_thought_ends_the_reply_there(self):
        # The thought is 5 tokens here (<|channel> th ought \n <channel|>). Up to 5 tokens the
        # reply ends where the budget does, exactly as the same request with tool_choice
        # "auto" (the same prompt, nothing forced): no call, finish_reason length.
        text = "Seek, and ye shall find."
        for max_tokens in (1, 3, 5):
            r = self.ask(text, self.NAMED, temperature=0, max_tokens=max_tokens, logprobs=True)
            plain = self.ask(text, "auto", temperature=0, max_tokens=max_tokens, logprobs=True)
            self.assertEqual(r.choices[0].finish_reason, "length")
            self.assertFalse(r.choices[0].message.tool_calls)
            self.assertEqual(r.choices[0].message.content or "",
                             plain.choices[0].message.content or "")
            self.assertEqual(getattr(r.choices[0].message, "reasoning_content", None),
                             getattr(plain.choices[0].message, "reasoning_content", None))
            self.assertEqual([t.token for t in r.choices[0].logprobs.content],
                             [t.token for t in plain.choices[0].logprobs.content])
            self.assertEqual(r.usage.completion_tokens, max_tokens)
            self.assertEqual(r.usage.prompt_tokens, plain.usage.prompt_tokens)
        # One more token than the thought: the call starts.
        r = self.ask(text, self.NAMED, temperature=0, max_tokens=6, logprobs=True)
        self.assertEqual(self.thought_length(r.choices[0].logprobs.content), 5)
        self.assertEqual(r.choices[0].message.tool_calls[0].function.name, "get_weather")
        self.assertEqual(r.usage.completion_tokens, 6)

    def test_disconnect_cancels_the_call_phase(self):
        def aborted():
            _, text = self.s.get("/metrics")
            return int(re.search(r'gannet_request_success_total\{finished_reason="abort"\} (\d+)',
                                 text.decode()).group(1))
        before = aborted()
        generated = self.s.metric("gannet_engine_generation_tokens_total")
        body = json.dumps({"messages": [{"role": "user", "content": "Go on."}],
                           "tools": [WEATHER_TOOL], "tool_choice": self.NAMED,
                           "max_tokens": 100000, "stream": True, "ignore_eos": True,
                           "temperature": 0, **self.THINK}).encode()
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        sock = socket.create_connection(("127.0.0.1", self.s.port))
        sock.sendall(head + body)
        # The role chunk goes out with phase 1's first token; wait until phase 2 runs (the
        # thought is 5 tokens; phase 2 writes the call until its context is full).
        got = b""
        while b"data:" not in got:
            got += sock.recv(4096)
        deadline = time.time() + 30
        while (self.s.metric("gannet_engine_generation_tokens_total") < generated + 40 and
               time.time() < deadline):
            time.sleep(0.05)
        self.assertEqual(self.s.metric("gannet_num_requests_running"), 1)
        sock.close()
        deadline = time.time() + 30
        while time.time() < deadline and (self.s.metric("gannet_num_requests_running") != 0 or
                                          self.s.metric("gannet_http_requests_active") != 0 or
                                          aborted() < before + 1):
            time.sleep(0.05)
        self.assertEqual(self.s.metric("gannet_num_requests_running"), 0)
        self.assertEqual(self.s.metric("gannet_http_requests_active"), 0)
        self.assertGreaterEqual(aborted(), before + 1)  # phase 2, cancelled


class ChatPageTest(unittest.TestCase):
    """The chat page at / (examples/server/chat_page.html, embedded in the binary)."""

    def test_page_is_served_without_external_assets(self):
        s = Server()  # with an API key: the page itself is public, the /v1 calls are not
        try:
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            c.request("GET", "/")
            r = c.getresponse()
            page = r.read().decode()
            self.assertEqual(r.status, 200)
            self.assertIn("text/html", r.getheader("Content-Type"))
            for word in ["<title>gannet chat</title>", "/v1/chat/completions", "reasoning_content",
                         "include_usage", 'id="stop"', "AbortController"]:
                self.assertIn(word, page)
            for external in ["http://", "https://", "<link", " src="]:
                self.assertNotIn(external, page)
        finally:
            s.close()

    def test_page_in_headless_chromium(self):
        # Load the page, send a message, see the streamed reply and its stats, stop a reply,
        # save a screenshot (GANNET_TEST_OUTPUT_DIR, else the temp folder).
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import cdp
        path = cdp.find_browser()
        if path is None:
            self.skipTest("no chromium (apt-get install chromium; tools/install_deps.sh)")
        s = Server(key=None)
        b = cdp.Browser(path)
        try:
            b.call("Page.enable")
            b.call("Page.navigate", url=f"http://127.0.0.1:{s.port}/?temperature=0&max_tokens=12")
            b.wait_for("document.readyState === 'complete' && !!document.getElementById('send')")
            b.eval("document.getElementById('input').value = 'Who is the king?';"
                   "document.getElementById('form').requestSubmit(); true")
            stats = b.wait_for("(document.querySelector('.msg.assistant .stats') || {}).textContent")
            self.assertIn("first token", stats)
            self.assertRegex(stats, r"\b12 tokens\b")
            self.assertIn("length", stats)
            self.assertEqual(b.eval("document.querySelector('.msg.user').textContent"),
                             "Who is the king?")
            answer = b.eval("document.querySelector('.msg.assistant > div').textContent")
            self.assertTrue(answer.strip(), "no streamed text")
            # The same request through the API gives the same text (greedy).
            r = s.client.chat.completions.create(
                model="x", messages=[{"role": "user", "content": "Who is the king?"}],
                temperature=0, max_tokens=12)
            self.assertEqual(answer, r.choices[0].message.content)

            # Stop: a long reply, stopped as soon as its first text shows.
            b.eval("document.getElementById('max_tokens').value = 4000;"
                   "document.getElementById('temperature').value = 1;"
                   "document.getElementById('input').value = 'Tell me everything.';"
                   "document.getElementById('form').requestSubmit(); true")
            b.wait_for("!document.getElementById('stop').disabled")
            b.wait_for("document.querySelectorAll('.msg.assistant').length === 2 && "
                       "document.querySelectorAll('.msg.assistant')[1].firstChild.textContent.length > 0")
            b.eval("document.getElementById('stop').click(); true")
            stats = b.wait_for("document.querySelectorAll('.msg.assistant .stats')[1].textContent")
            self.assertTrue(stats.endswith("stopped") or stats.endswith("stop"), stats)
            self.assertFalse(b.eval("document.getElementById('send').disabled"))
            deadline = time.time() + 30
            while s.metric("gannet_num_requests_running") > 0 and time.time() < deadline:
                time.sleep(0.05)
            self.assertEqual(s.metric("gannet_num_requests_running"), 0)

            out_dir = os.environ.get("GANNET_TEST_OUTPUT_DIR", tempfile.gettempdir())
            shot = os.path.join(out_dir, "gannet_chat_page.png")
            b.screenshot(shot)
            self.assertGreater(os.path.getsize(shot), 1000)
            print(f"\nchat page screenshot: {shot}", file=sys.stderr)
        finally:
            b.close()
            s.close()

class ImageServeTest(unittest.TestCase):
    """image_url parts with data: URLs on the tiny multimodal model (tests/data/tiny/mm-api):
    the reply equals `gannet generate --image --chat` for the same PNG and text (the C ABI and
    CLI are checked against HF in tests/capi/capi_image_test.cc and tests/cli/cli_test.sh)."""

    @classmethod
    def setUpClass(cls):
        tiny = os.path.dirname(os.path.abspath(MODEL))
        cls.model = os.path.join(tiny, "mm-api")
        cls.png_path = os.path.join(tiny, "..", "images", "palette_50x30.png")
        with open(cls.png_path, "rb") as f:
            cls.png = f.read()
        cls.s = Server(model=cls.model, key=None, ctx=1024)
        cls.c = cls.s.client

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def chat(self, url, text="What is in this picture?"):
        return [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                             {"type": "text", "text": text}]}]

    def test_data_url_answers_as_the_cli(self):
        url = "data:image/png;base64," + base64.b64encode(self.png).decode()
        r = self.c.chat.completions.create(model="x", messages=self.chat(url), temperature=0,
                                           max_tokens=6, extra_body={"ignore_eos": True})
        cli = json.loads(subprocess.run(
            [GANNET, "generate", "-m", self.model, "--backend", "cpu", "--threads", "2",
             "--image", self.png_path, "--chat", "-p", "What is in this picture?", "-n", "6",
             "--ignore-eos", "--json"], capture_output=True, text=True, check=True).stdout)
        self.assertEqual(r.usage.prompt_tokens, cli["prompt_tokens"])
        self.assertEqual(r.usage.completion_tokens, 6)
        self.assertEqual(r.choices[0].message.content or "", cli["text"])

    def test_bad_images_are_400(self):
        for url, word in [("https://example.com/cat.png", "data: URL"),
                          ("data:image/png;base64,@@@", "base64"),
                          ("data:image/png;base64," + base64.b64encode(self.png[:100]).decode(),
                           "images[0]")]:
            status, body = self.s.post("/v1/chat/completions",
                                       {"messages": self.chat(url), "max_tokens": 1})
            self.assertEqual(status, 400, (url[:40], body))
            self.assertIn(word, body["error"]["message"])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
