"""Settings of the LLM judge (``evaluators.judge``)."""

from __future__ import annotations

import dataclasses

PROBED = ("probes", "both")  # who scores rubrics that have a probe
PREFER = ("probe", "judge")  # whose verdict stands when both scored a rubric
STRUCTURED = ("json_schema", "prompt")  # how the output schema reaches the server


@dataclasses.dataclass(frozen=True)
class JudgeConfig:
    """The judge: an OpenAI-compatible chat-completions server and how it is used.

    Attributes:
      base_url: The server's API root (``http://127.0.0.1:8000/v1``); "" switches the judge
        off, and rubrics without a probe stay ``unjudged``.
      model: The ``model`` field of each request.
      api_key_env: Environment variable holding the API key; unset or empty sends none (a
        local server needs none).
      timeout_s: One request's limit (connect, read and write together).
      retries: Attempts after the first on 429, 5xx, a timeout or a connection error.
      backoff_s: First wait before a retry; doubles each time up to ``max_backoff_s``. A
        ``Retry-After`` header, when the server sends one, is waited instead (capped too).
      max_backoff_s: Longest wait before a retry.
      concurrency: Requests in flight at once per evaluator worker.
      structured: ``json_schema``: the verdict schema is sent as ``response_format``
        (OpenAI structured outputs; vLLM, SGLang and llama.cpp's server accept it);
        ``prompt``: it is written into the prompt instead, for servers without it.
      prompt_version: Folder of ``evaluators/judge/prompts`` whose files make the prompt;
        part of the cache key.
      probed: ``probes``: the judge scores only rubrics without a probe; ``both``: it also
        scores rubrics with one, and the record keeps both verdicts and whether they agree.
      prefer: Whose verdict stands when both scored a rubric (default: the probe, for what
        it checks).
      temperature: Sampling temperature of the judge (0: as deterministic as the server is).
      max_tokens: Most tokens of one answer.
      max_source_chars: Longest app source sent (longer is cut, and the prompt says so).
      cache_dir: Folder of the on-disk cache ("" : no cache). Keyed by model, prompt
        version, task, rubric set and response, so identical answers in a GRPO group and
        re-scoring cost no request.
      usd_per_mtok_in: Price of a million prompt tokens, for the record's cost (0: unknown).
      usd_per_mtok_out: Price of a million completion tokens.
      agentic: The judge drives the app with browser tools (``evaluators.judge.agent``) on a
        sandboxed page before it answers.
      agent_steps: Most tool calls in one judging.
      agent_time_s: Longest browsing, from the first request.
      images: The judge reads images (the screenshot tool answers with a picture).
    """

    base_url: str = ""
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 120.0
    retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    concurrency: int = 4
    structured: str = "json_schema"
    prompt_version: str = "v1"
    probed: str = "probes"
    prefer: str = "probe"
    temperature: float = 0.0
    max_tokens: int = 4096
    max_source_chars: int = 60_000
    cache_dir: str = ""
    usd_per_mtok_in: float = 0.0
    usd_per_mtok_out: float = 0.0
    agentic: bool = False
    agent_steps: int = 12
    agent_time_s: float = 120.0
    images: bool = False

    def __post_init__(self):
        for name, allowed in (("structured", STRUCTURED), ("probed", PROBED),
                              ("prefer", PREFER)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"JudgeConfig.{name}={getattr(self, name)!r}: expected one "
                                 f"of {list(allowed)}")
        if self.base_url and not self.model:
            raise ValueError("JudgeConfig.model: missing (the judge's base_url is set)")
        if self.retries < 0 or self.concurrency < 1 or self.timeout_s <= 0:
            raise ValueError("JudgeConfig: retries >= 0, concurrency >= 1 and timeout_s > 0 "
                             f"(got {self.retries}, {self.concurrency}, {self.timeout_s})")

    @property
    def enabled(self) -> bool:
        return bool(self.base_url)

    def budget_s(self) -> float:
        """The longest one response's judging may take: every attempt of the first request
        and of the repair request, with their waits."""
        per_request = (self.retries + 1) * self.timeout_s + self.retries * self.max_backoff_s
        browsing = self.agent_time_s + per_request if self.agentic else 0.0
        return 2 * per_request + browsing
