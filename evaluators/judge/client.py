"""An asynchronous OpenAI-compatible chat-completions client with retries and accounting.

One ``ChatClient`` per evaluator worker: its semaphore bounds the requests in flight, so a
worker scoring many apps never floods the judge's server. A request is retried on what a
server under load answers (429, 5xx) and on what the network does (timeouts, refused or
dropped connections), with exponential backoff or the server's ``Retry-After``; any other
status is final. Either way the caller gets a ``JudgeUnavailable`` naming the last cause:
the evaluator's failure, never the scored response's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

import httpx

from evaluators.judge.config import JudgeConfig

RETRY_STATUS = frozenset((408, 409, 425, 429, 500, 502, 503, 504))


class JudgeUnavailable(Exception):
    """The judge gave no usable answer after every attempt (or a final error status)."""


@dataclasses.dataclass
class Usage:
    """Tokens, requests and cost spent, summed over calls."""

    requests: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: int = 0

    def add(self, other: "Usage") -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def cost_usd(self, cfg: JudgeConfig) -> float:
        return (self.prompt_tokens * cfg.usd_per_mtok_in
                + self.completion_tokens * cfg.usd_per_mtok_out) / 1e6

    def to_json(self, cfg: JudgeConfig) -> dict:
        return {**dataclasses.asdict(self), "cost_usd": round(self.cost_usd(cfg), 6)}


@dataclasses.dataclass(frozen=True)
class Completion:
    """One answer: the assistant message's text and tool calls, and what it cost."""

    content: str
    tool_calls: tuple[dict, ...]
    finish_reason: str
    usage: Usage
    message: dict


class ChatClient:
    """``POST {base_url}/chat/completions`` with the config's limits (see the module)."""

    def __init__(self, cfg: JudgeConfig, transport: httpx.AsyncBaseTransport | None = None):
        self.cfg = cfg
        key = os.environ.get(cfg.api_key_env, "") if cfg.api_key_env else ""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.AsyncClient(base_url=cfg.base_url.rstrip("/"), headers=headers,
                                       timeout=httpx.Timeout(cfg.timeout_s),
                                       transport=transport, trust_env=False)
        self._slots = asyncio.Semaphore(cfg.concurrency)

    async def close(self) -> None:
        await self._http.aclose()

    async def complete(self, messages: list[dict], response_format: dict | None = None,
                       tools: list[dict] | None = None) -> Completion:
        """One chat completion (non-streaming).

        Raises:
          JudgeUnavailable: after the last retry, or at once on a final error status or a
            body that is not a chat completion.
        """
        body: dict[str, Any] = {"model": self.cfg.model, "messages": messages,
                                "temperature": self.cfg.temperature,
                                "max_tokens": self.cfg.max_tokens, "stream": False}
        if response_format is not None:
            body["response_format"] = response_format
        if tools:
            body["tools"] = tools
        usage = Usage(requests=1)
        async with self._slots:
            data = await self._post(body, usage)
        return _completion(data, usage)

    async def _post(self, body: dict, usage: Usage) -> dict:
        last = ""
        for attempt in range(self.cfg.retries + 1):
            usage.attempts += 1
            wait = min(self.cfg.max_backoff_s, self.cfg.backoff_s * 2 ** attempt)
            try:
                resp = await self._http.post("/chat/completions", json=body)
            except httpx.TimeoutException:
                last = f"timed out after {self.cfg.timeout_s:g} s"
            except httpx.TransportError as e:
                last = f"connection error: {type(e).__name__}: {e}"[:300]
            else:
                if resp.status_code == 200:
                    try:
                        return resp.json()
                    except ValueError:
                        raise JudgeUnavailable("the judge answered 200 with a body that is "
                                               "not JSON") from None
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code not in RETRY_STATUS:
                    raise JudgeUnavailable(last)
                wait = _retry_after(resp, self.cfg.max_backoff_s) or wait
            if attempt < self.cfg.retries:
                await asyncio.sleep(wait)
        raise JudgeUnavailable(f"no answer after {self.cfg.retries + 1} attempts: {last}")


def _retry_after(resp: httpx.Response, cap: float) -> float | None:
    try:
        return min(cap, max(0.0, float(resp.headers.get("retry-after", ""))))
    except ValueError:
        return None


def _completion(data: Any, usage: Usage) -> Completion:
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise JudgeUnavailable("the judge's answer has no choices[0].message") from None
    u = data.get("usage") or {}
    usage.prompt_tokens += int(u.get("prompt_tokens") or 0)
    usage.completion_tokens += int(u.get("completion_tokens") or 0)
    return Completion(content=message.get("content") or "",
                      tool_calls=tuple(message.get("tool_calls") or ()),
                      finish_reason=str(choice.get("finish_reason") or ""), usage=usage,
                      message=message)
