"""A scripted OpenAI-compatible server on loopback, for tests and dry runs of the judge.

It speaks the real protocol (``POST /v1/chat/completions``, JSON in and out, ``usage``,
``tool_calls``, error statuses with ``Retry-After``), so the client, the retries and the
parser are exercised exactly as against vLLM, SGLang or a hosted model. Each request takes
the next scripted ``Reply``; when the script is used up, ``default`` answers (by default:
every rubric the prompt asks about passes). Every request body is kept in ``requests``.

  with FakeJudgeServer([Reply(status=429), Reply(content='{"rubrics": []}')]) as server:
      cfg = JudgeConfig(base_url=server.base_url, model="fake")
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclasses.dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
      content: The assistant message's text.
      status: HTTP status; anything but 200 sends an OpenAI-style error body.
      delay_s: Wait before answering (longer than the client's timeout: a timeout).
      tool_calls: The assistant message's tool calls.
      headers: Extra response headers (``Retry-After``).
      raw: A body sent as is (not a chat completion), overriding the rest.
    """

    content: str = ""
    status: int = 200
    delay_s: float = 0.0
    tool_calls: tuple[dict, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    raw: str | None = None


def asked_ids(body: dict) -> list[str]:
    """The rubric ids a judge prompt lists (``- id 'r1' (...)``): the fake's reading of it."""
    text = "\n".join(str(m.get("content") or "") for m in body.get("messages") or ()
                     if m.get("role") == "user")
    return list(dict.fromkeys(re.findall(r"^- id '([^']*)'", text, re.M)))


def all_pass(body: dict) -> Reply:
    return Reply(json.dumps({"rubrics": [{"id": i, "verdict": "pass", "severity": None,
                                          "issues": []} for i in asked_ids(body)]}))


class FakeJudgeServer:
    def __init__(self, replies: list[Reply] = (), default: Callable[[dict], Reply] = all_pass):
        self.replies = list(replies)
        self.default = default
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # A short poll: shutting the server down waits for one (tests start many servers).
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> "FakeJudgeServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, body: dict) -> Reply:
        with self._lock:
            self.requests.append(body)
            scripted = self.replies.pop(0) if self.replies else None
        return scripted if scripted is not None else self.default(body)  # concurrently

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                reply = fake._next(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.raw is not None:
                    return self._send(reply.status, reply.raw, reply.headers)
                if reply.status != 200:
                    return self._send(reply.status, {"error": {"message": "scripted error",
                                                               "code": reply.status}},
                                      reply.headers)
                message = {"role": "assistant", "content": reply.content or None}
                if reply.tool_calls:
                    message["tool_calls"] = list(reply.tool_calls)
                n_in = sum(len(str(m.get("content") or "")) for m in body["messages"]) // 4
                self._send(200, {
                    "id": f"fake-{len(fake.requests)}", "object": "chat.completion",
                    "model": body.get("model"), "choices": [{
                        "index": 0, "message": message,
                        "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
                    "usage": {"prompt_tokens": n_in, "completion_tokens": len(reply.content) // 4,
                              "total_tokens": n_in + len(reply.content) // 4}})

            def _send(self, status: int, body, headers=()) -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers:
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        return Handler
