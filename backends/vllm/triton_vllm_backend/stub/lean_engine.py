"""Per-token work that vLLM's AsyncLLM does in a Triton stub for nobody, turned off.

The stub is one Python process per model instance: every microsecond it spends per
token is a ceiling on the tokens per second the instance can stream, whatever the GPU.
Two things AsyncLLM does on every token cost that and serve no reader here:

- vLLM reads its environment variables (`vllm.envs.X`) through a module `__getattr__`
  that calls `os.getenv` each time, and its output processor asks one per generated
  token.  vLLM's own engine processes cache them once started (`enable_envs_cache`); the
  stub, which runs AsyncLLM's client side, never does.  Measured: 8% of the stub's Python
  time.  The stub's environment is final once the engine runs (model.py sets the device
  variables before), so caching then changes nothing it reads.
- AsyncLLM always adds vLLM's PrometheusStatLogger, which updates prometheus_client
  series per step and observes a histogram per token.  In the stub those series live in
  a registry nobody scrapes: the backend reports vLLM's statistics as Triton metrics
  (metrics.py).  Measured: 12% of the stub's Python time.  vLLM's text log of its
  statistics (LoggingStatLogger) and the backend's own logger stay.
"""

from __future__ import annotations


def cache_vllm_envs(envs_module) -> bool:
    """Cache vLLM's environment variables, where this vLLM can (0.11 cannot)."""
    enable = getattr(envs_module, "enable_envs_cache", None)
    if enable is None:
        return False
    enable()
    return True


def drop_unread_prometheus_logger(engine) -> int:
    """Remove vLLM's Prometheus stat logger from the engine's logger manager; the number
    removed (0 when statistics are off: there is no manager then)."""
    manager = getattr(engine, "logger_manager", None)
    if manager is None:
        return 0
    # Imported here: model.py imports this module in auto-complete too, where importing
    # vLLM would only add seconds to the start.
    from vllm.v1.metrics.loggers import PrometheusStatLogger

    kept = [logger for logger in manager.stat_loggers
            if not isinstance(logger, PrometheusStatLogger)]
    removed = len(manager.stat_loggers) - len(kept)
    manager.stat_loggers = kept
    return removed
