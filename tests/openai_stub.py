"""The one scripted OpenAI-compatible server on 127.0.0.1 of the tests (the OpenAI engine's and
the memory conditions'): /v1/chat/completions answered by the test, GET /v1/models listing one
model, every request body kept in `requests`.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OpenAIStub:
    """`OpenAIStub(reply)`: `reply(body) -> str` is the assistant message of each request.
    `OpenAIStub(behave=fn)`: `fn(body, n, stub) -> (status, payload, headers)` answers the n-th
    request as it likes (errors, bytes, rate limits). Requests, their headers and the most
    requests in flight at once are kept."""

    def __init__(self, reply=None, model: str = "stub-model", behave=None):
        if (reply is None) == (behave is None):
            raise ValueError("give reply or behave")
        self.reply = reply
        self.behave = behave or self._reply
        self.model = model
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.inflight = 0
        self.max_inflight = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, status: int, payload, headers=None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": outer.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with outer.lock:
                    outer.requests.append(body)
                    outer.headers.append(dict(self.headers))
                    count = len(outer.requests)
                    outer.inflight += 1
                    outer.max_inflight = max(outer.max_inflight, outer.inflight)
                try:
                    status, payload, headers = outer.behave(body, count, outer)
                finally:
                    with outer.lock:
                        outer.inflight -= 1
                self._send(status, payload, headers)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.spec = f"openai:{model}@{self.base_url}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def _reply(self, body, n, stub):
        return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": self.model,
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": self.reply(body)}}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}, None

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def last_user(body: dict) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def system_text(body: dict) -> str:
    return next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
