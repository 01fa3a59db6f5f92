"""The LLM judge: rubric verdicts with findings and quoted code, from any OpenAI-compatible
server. ``config`` (JudgeConfig), ``client`` (ChatClient, retries, accounting), ``prompt``
(versioned prompt files), ``verdicts`` (answer schema and parser), ``cache``, ``judge``
(``judge_record``, the scoring step); ``fake`` is a scripted server speaking the same
protocol, for tests and dry runs. Imported by module, so that ``evaluators.config`` can
nest ``JudgeConfig`` without importing the rest."""
