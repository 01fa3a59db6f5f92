"""Gates and probes: the app's extraction from a response (gate F, `extract`), its source
check (gate S, `source`), the probe runner (`steps`, `probes`), the diagnostics they emit
(`diagnostics`, typed by `evaluators.contract`), the gated reward (`reward`) and the
scorer that runs them all on one response (`score`)."""
