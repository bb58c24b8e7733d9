"""Health that tells the truth: pure policies over engine samples, with an injected clock.

`samples` turns a /metrics scrape into an `EngineSample`; `rates` derives rates from counters; `stall` and
`drift` are detectors (samples in, findings out); `config` compares the effective engine configuration with
the spec; `rolls` decides whether a roll may happen now. No module here does I/O or reads a clock.
"""
