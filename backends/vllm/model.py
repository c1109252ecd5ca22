"""Triton Python-backend model that serves LLMs with vLLM's async engine.

A model whose config.pbtxt says `backend: "vllm"` runs this file.  Its engine arguments
come from `model.json` in the version folder (see README.md).  vLLM does the scheduling
(in-flight batching, paged attention); this file only moves requests in and responses out:

- `execute()` reads each request's tensors at once (they are not valid later), and hands
  the request to an asyncio loop in a thread of its own, which runs the AsyncLLM engine;
- the loop streams vLLM's outputs back through the request's response sender, and polls
  for cancellation so that a client that goes away frees its slot in vLLM within a
  fraction of a second.
"""

from __future__ import annotations

import locale

# The Python stub starts without a UTF-8 locale, and importing vLLM/torch under the
# C locale fails with an ascii codec error.
try:
    locale.setlocale(locale.LC_ALL, "C.UTF-8")
except locale.Error:
    pass

import asyncio  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402

# Our helpers first, whatever else is on the path under these names.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from triton_vllm_backend.stub import (  # noqa: E402
    abort,
    coalesce,
    compact_json,
    engine_config,
    errors,
    feed,
    group,
    health,
    io_spec,
    jobs,
    lean_engine,
    lora,
    outputs,
    params,
    warmup,
    wire,
)
from triton_vllm_backend.stub.engine_config import ConfigError  # noqa: E402
from triton_vllm_backend.stub.inflight import RequestsInFlight  # noqa: E402
from triton_vllm_backend.stub.jobs import EmbedJob, GenerateJob  # noqa: E402

# How often the poller wakes, in seconds: it reads the engine's health (a flag, free) and
# aborts in vLLM the requests found cancelled.
POLL_S = 0.05
# How often each running request's client is asked whether it left.  Each ask is a round
# trip from the stub to tritonserver: every 0.05 s, 16 streams cost as many round trips as
# their responses at 4 tokens each, on both processes.
CANCEL_POLL_S = 0.25
# The error of a request that was still running when its model unloaded.
UNLOADING_MESSAGE = ("the model is unloading (the server is shutting down) and stopped "
                     "this request before it finished")


def _version_dir_of_stub() -> Path | None:
    """The model's version folder, during auto-complete.

    auto_complete_config() gets the model config alone, not the repository path; the
    Python stub's command line carries `<repository>/<model>/<version>/model.py`.
    """
    try:
        argv = Path("/proc/self/cmdline").read_bytes().split(b"\0")
        return Path(argv[1].decode()).parent
    except (OSError, IndexError, UnicodeDecodeError):
        return None


class TritonPythonModel:
    # The backend's own error and engine-health series (REPORT_CUSTOM_METRICS).
    serving_metrics = None
    # The workers of a multi-node engine (group.py), None on one node.
    _group = None

    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        runner = wire.GENERATE
        version_dir = _version_dir_of_stub()
        if version_dir is not None:
            try:
                runner = engine_config.runner_of(engine_config.load_model_json(version_dir))
            except ConfigError:
                pass  # initialize() reports it, with the model's own path.
        for spec in io_spec.inputs_for(runner):
            auto_complete_model_config.add_input(spec)
        for spec in io_spec.outputs_for(runner):
            auto_complete_model_config.add_output(spec)
        # vLLM batches in flight itself; Triton must hand requests over one by one and let
        # the model answer each with a stream of responses.
        auto_complete_model_config.set_max_batch_size(0)
        auto_complete_model_config.set_model_transaction_policy({"decoupled": True})
        return auto_complete_model_config

    # ------------------------------------------------------------------ load
    def initialize(self, args):
        self.logger = pb_utils.Logger
        self.model_config = json.loads(args["model_config"])
        self.model_name = args["model_name"]
        self.version = args["model_version"]
        version_dir = Path(args["model_repository"]) / self.version
        if not pb_utils.using_decoupled_model_transaction_policy(self.model_config):
            raise ConfigError("the vLLM backend needs `model_transaction_policy { decoupled: "
                              "true }` (auto-complete sets it unless the config says otherwise)")
        parameters = self.model_config.get("parameters", {})
        self.health_check = engine_config.bool_setting(parameters, "ENABLE_VLLM_HEALTH_CHECK")
        report_metrics = engine_config.bool_setting(parameters, "REPORT_CUSTOM_METRICS")
        per_token_metrics = engine_config.bool_setting(parameters, "REPORT_PER_TOKEN_METRICS")
        if per_token_metrics and not report_metrics:
            raise ConfigError("REPORT_PER_TOKEN_METRICS adds a histogram to "
                              "REPORT_CUSTOM_METRICS: set that too")
        max_interval = coalesce.max_interval(parameters, os.environ)
        max_delay = coalesce.max_delay_s(parameters, os.environ)

        # Before vLLM and torch look at the GPUs: each KIND_GPU instance gets its own.
        os.environ.update(engine_config.instance_device_env(
            args.get("model_instance_kind", "CPU"), args.get("model_instance_device_id", -1),
            os.environ))

        import dataclasses

        from vllm.engine.arg_utils import AsyncEngineArgs

        raw = engine_config.load_model_json(version_dir)
        engine_config.check_keys(raw, {f.name for f in dataclasses.fields(AsyncEngineArgs)})
        engine_config.check_devices(raw, args.get("model_instance_kind", "CPU"))
        raw = engine_config.resolve_paths(raw, version_dir)
        group_settings = group.settings(raw, os.environ)
        if group_settings is not None:
            raw = group.with_leader_address(raw, os.environ)
        self._compact_json = compact_json.engine_is_compact(raw)
        self._priority_scheduling = raw.get("scheduling_policy") == "priority"
        self.runner = engine_config.runner_of(raw)
        engine_config.check_published(parameters, raw)
        from vllm.platforms import current_platform
        raw = engine_config.with_amx_worker(raw, current_platform.is_cpu())
        self.adapters = lora.load_adapters(version_dir, bool(raw.get("enable_lora")))
        lora.check_published(parameters, self.adapters)
        try:
            engine_args = AsyncEngineArgs(**raw)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"model.json: {e}") from None

        self.stat_loggers: list = []
        stat_factories = None
        if report_metrics:
            if engine_args.disable_log_stats:
                raise ConfigError('REPORT_CUSTOM_METRICS needs vLLM\'s statistics: set '
                                  '"disable_log_stats": false in model.json')
            from triton_vllm_backend.stub.metrics import (
                ServingMetrics,
                make_factory,
                series_labels,
            )
            labels = series_labels(self.model_name, self.version)
            stat_factories = [make_factory(labels, self.stat_loggers, per_token_metrics)]
            self.serving_metrics = ServingMetrics(labels, wire.ERROR_KINDS)

        self._start_loop()
        try:
            if group_settings is not None:
                self._start_group(*group_settings)
            engine = self._run(self._make_engine(engine_args, stat_factories))
        except Exception:
            if self._group is not None:
                self._group.close()
            self._stop_loop()
            raise
        import vllm.envs
        lean_engine.cache_vllm_envs(vllm.envs)
        lean_engine.drop_unread_prometheus_logger(engine)
        from vllm import SamplingParams
        self._SamplingParams = SamplingParams
        self._sampling_fields = set(SamplingParams.__struct_fields__)
        # A vLLM without per-request stream intervals (the GPU image's 0.11) streams every
        # token, as before.
        if "stream_interval" in self._sampling_fields:
            self._max_interval = max_interval
            self._lag = coalesce.LagMeter(max_interval)
        self._max_delay = max_delay
        if self.runner == wire.GENERATE and engine_config.bool_setting(
                parameters, "ENGINE_WARMUP", default=True):
            self._warm_up(engine, SamplingParams, not engine_args.skip_tokenizer_init)
        self._serve_with(engine)
        self.logger.log_info(f"[vllm] {self.model_name} ready ({self.runner}, "
                             f"model {raw['model']})")

    def _start_group(self, size: int, port: int, join_s: float):
        """Waits for the group's workers (GroupError, naming the missing ones, after
        join_s), starts them, and watches them from now on: a lost worker is this
        engine's death (vLLM's own engine would hang on the lost ranks)."""
        self.logger.log_info(f"[vllm] {self.model_name}: waiting up to {join_s:.0f} s for "
                             f"the group's {size - 1} worker(s) on port {port}")
        self._group = group.Leader(size, port)
        self._group.wait_for_workers(join_s)
        self._group.start(on_lost=self._on_group_lost)
        self.logger.log_info(f"[vllm] {self.model_name}: the group's workers joined")

    def _on_group_lost(self, why: str):
        error = group.GroupError(why)
        self._death = error
        self._loop.call_soon_threadsafe(self._on_engine_death, error)

    async def _make_engine(self, engine_args, stat_factories):
        # Made on the loop, so its output handler runs on that loop.
        from vllm.v1.engine.async_llm import AsyncLLM
        return AsyncLLM.from_engine_args(engine_args, stat_loggers=stat_factories)

    def _warm_up(self, engine, sampling_params, has_tokenizer: bool):
        sampling = sampling_params(max_tokens=warmup.MAX_TOKENS, ignore_eos=True,
                                   detokenize=has_tokenizer)
        once = warmup.generate_once(engine, sampling, warmup.prompt(has_tokenizer),
                                    self.stat_loggers)
        try:
            # Timed out on the loop, so that the generation is cancelled (vLLM aborts it)
            # and the loggers resume, rather than left running after initialize() gave up.
            took = self._run(asyncio.wait_for(once, warmup.TIMEOUT_S))
        except Exception as e:  # noqa: BLE001 - the first request would then pay, as before
            self.logger.log_warn(f"[vllm] {self.model_name}: warm-up generation failed: {e}")
            return
        self.logger.log_info(f"[vllm] {self.model_name}: warm-up generation took {took:.2f} s")

    def _start_loop(self):
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self._loop.run_forever,
                                             name="vllm-engine-loop", daemon=True)
        self._loop_thread.start()
        # Each request holds (request, response sender) until it ends: once the stub
        # lets go of the request object, the Python backend releases the request in
        # Triton, and a client that leaves after that is never flagged as cancelled.
        self._requests = RequestsInFlight()
        self._pace = coalesce.TokenPace()  # told by the streams, on the loop
        self._lag = coalesce.LagMeter(1)  # told by the streams, on the loop
        self._max_interval, self._max_delay = 1, None
        self._feeds = feed.Feeds()  # on the loop
        self._death: BaseException | None = None  # what the engine died of
        self._death_handled = False
        # Requests already answered with the engine's death (health.py): nothing more is
        # sent for them when their coroutines end.
        self._answered_dead: set[str] = set()

    def _serve_with(self, engine):
        self.engine = engine
        self._cancel_poller = asyncio.run_coroutine_threadsafe(self._poll_cancelled(),
                                                               self._loop)

    def _run(self, coroutine, timeout=None):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    # --------------------------------------------------------------- requests
    def execute(self, requests):
        if not self._healthy or (self.health_check and not self._check_health()):
            # The engine died (health.py): the server's fault, not the client's, and final.
            kind, message = health.dead_answer(self.model_name, self._death)
            for request in requests:
                self._fail(request.get_response_sender(), kind, message)
            return None
        for request in requests:
            sender = request.get_response_sender()
            # Parsed once: the health check and the abort target both read them.
            request_parameters = params.request_parameters(request.parameters())
            if health.is_health_check(request_parameters):
                # One response, with no outputs: Triton's generate endpoint needs exactly one.
                self._send(sender, {}, final=True)
                continue
            try:
                target = abort.target_of(request_parameters)
                feed_id = feed.open_request(request_parameters)
                delivery = feed.delivery_of(request_parameters)
            except (abort.AbortError, feed.FeedError) as e:
                self._fail(sender, wire.INVALID_ARGUMENT, str(e))
                continue
            if target is not None:
                asyncio.run_coroutine_threadsafe(self._abort_request(target, sender),
                                                 self._loop)
                continue
            if feed_id is not None:
                self._loop.call_soon_threadsafe(self._open_feed, feed_id, request, sender)
                continue
            try:
                job = self._read_request(request, delivery)
            except (params.ParameterError, lora.UnknownAdapter, ValueError) as e:
                self._fail(sender, wire.INVALID_ARGUMENT, str(e))
                continue
            except Exception as e:  # noqa: BLE001 - e.g. vLLM's own validation errors
                # Raising from execute() would fail the whole batch inside the Python
                # backend, not just this request: answer it and go on.
                self._fail(sender, *errors.described(e))
                continue
            asyncio.run_coroutine_threadsafe(self._serve(job, request, sender), self._loop)
        return None

    def _read_request(self, request, delivery=None) -> GenerateJob | EmbedJob:
        """Everything the request says, read now (tensors are not valid later)."""
        # One walk over the inputs: the stub makes every input tensor anew (a BYTES one
        # deserialized in Python) on each request.inputs(), which
        # pb_utils.get_input_tensor_by_name calls for every name it is asked.
        tensors = {tensor.name(): tensor for tensor in request.inputs()}

        def get(name):
            tensor = tensors.get(name)
            return None if tensor is None else tensor.as_numpy()

        prompt, wanted = jobs.read_prompt(get), jobs.read_wanted(get)
        client_id = request.request_id()
        request_id = jobs.new_id(client_id)
        if self.runner == wire.POOLING:
            return EmbedJob(request_id, client_id, prompt, wanted)
        given = jobs.read_generate_inputs(get, lambda: feed.sampling_of(request.parameters()))
        # vLLM computes logprobs (and so the cumulative one) only when asked: 0 asks for
        # the sampled token's alone.
        need_logprobs = wanted.logprobs or wanted.cumulative_logprob
        sampling, lora_request, priority = self._sampling_params(
            given.sampling_parameters, given.stream, need_logprobs)
        params.check_priority(priority, self._priority_scheduling)
        if not given.stream or sampling.n != 1:
            delivery = None  # a feed carries one choice's stream
        return GenerateJob(request_id, client_id, prompt, wanted, sampling, lora_request,
                           given.stream, given.exclude_input, priority, delivery)

    def _sampling_params(self, raw, stream, need_logprobs=False):
        from triton_vllm_backend.stub.compat import SAMPLING_ERRORS
        # Not `from vllm import SamplingParams` here: vLLM's package resolves that name
        # with importlib on every import, a tenth of the stub's Python time per request.
        SamplingParams = self._SamplingParams  # noqa: N806 - vLLM's class
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        kwargs = params.parse_sampling_parameters(raw, self._sampling_fields)
        lora_name = kwargs.pop(wire.LORA_NAME, None)
        structured = kwargs.pop(wire.STRUCTURED_OUTPUTS, None)
        priority = kwargs.pop(wire.PRIORITY, 0)
        if need_logprobs and kwargs.get("logprobs") is None:
            kwargs["logprobs"] = 0
        try:
            if structured is not None:
                structured = compact_json.enforce(structured, self._compact_json)
                kwargs["structured_outputs"] = StructuredOutputsParams(**structured)
            # Streams take each step's delta; a complete answer needs only the last output.
            kind = RequestOutputKind.DELTA if stream else RequestOutputKind.FINAL_ONLY
            if "skip_clone" in self._sampling_fields:
                # Made for this request alone: vLLM would otherwise deep-copy it in
                # add_request (vLLM's own server marks its requests' parameters the same).
                kwargs["skip_clone"] = True
            sampling = SamplingParams(**kwargs, output_kind=kind)
        except SAMPLING_ERRORS as e:
            raise params.ParameterError(f"invalid sampling parameters: {e}") from None
        return sampling, self._lora_request(lora_name), priority

    def _lora_request(self, name):
        if name is None:
            return None
        from vllm.lora.request import LoRARequest
        adapter_id, path = lora.adapter_id(self.adapters, name)
        return LoRARequest(name, adapter_id, str(path))

    async def _serve(self, job: GenerateJob | EmbedJob, request, sender):
        request_id = job.id
        if not self._requests.start(request_id, job.client_id, (request, sender)):
            # Its abort request came first: nobody waits for an answer.
            self._send(sender, None, final=True)
            return
        try:
            if isinstance(job, GenerateJob):
                await self._generate(job, sender)
            else:
                await self._embed(job, sender)
        except asyncio.CancelledError:
            await self.engine.abort(request_id)
            self._send(sender, None, final=True)
        except Exception as e:  # noqa: BLE001 - any failure answers the request
            death = health.death_of(self.engine)
            if death is not None:
                # The engine died under this request (before the poller saw it).
                self._on_engine_death(death)
            if request_id in self._answered_dead:
                return
            self.logger.log_error(f"[vllm] request {request_id} failed: {e!r}")
            self._fail(sender, *errors.described(e))
        finally:
            self._requests.finish(request_id)
            self._answered_dead.discard(request_id)

    async def _abort_request(self, client_id, sender):
        """Answer an abort request: stop every running request with that Triton id, or,
        when none runs, remember the id for a request that has not come yet."""
        ids = self._requests.abort_client(client_id)
        if ids:
            self.logger.log_info(f"[vllm] request {client_id} aborted by its client")
            try:
                await self.engine.abort(ids)
            except Exception as e:  # noqa: BLE001 - the poller aborts them again
                self.logger.log_error(f"[vllm] abort of {client_id} failed: {e!r}")
        else:
            self.logger.log_info(f"[vllm] abort of {client_id}: no such request running "
                                 f"(it ended, or has not come yet)")
        self._send(sender, None, final=True)

    async def _generate(self, job: GenerateJob, sender):
        if not job.stream:
            await self._generate_outputs(job, sender)
            return
        # One token a response unless the stub falls behind the engine (see coalesce.py);
        # a client's own stream_interval is kept, and vLLM streams at least its
        # --stream-interval's.
        if self._max_interval > 1 and job.sampling.stream_interval is None:
            job.sampling.stream_interval = self._lag.next_interval(
                self._loop.time(), self._pace.seconds_per_token, self._max_delay)
        to = self._feeds.get(job.delivery.feed_id) if job.delivery is not None else None
        if to is not None:
            await self._generate_to_feed(job, sender, to)
        else:
            await self._generate_outputs(job, sender)

    def _observe(self, result, sampling, sent_at: float | None) -> float:
        """Tell the pace and the lag of a streamed output; the time it was handled."""
        now = self._loop.time()
        tokens = outputs.new_tokens(result)
        if sent_at is not None:
            self._pace.observe(now - sent_at, tokens)
        self._lag.observe(tokens, sampling.stream_interval or 1)
        return now

    async def _generate_outputs(self, job: GenerateJob, sender):
        sampling = job.sampling
        # Streams ask vLLM for deltas: each output then carries only what is new, and
        # when this loop falls behind the engine, vLLM merges the deltas waiting for it
        # into one, so a slow consumer costs fewer responses, not more copying.
        # Cancellation is noticed and aborted in vLLM by _poll_cancelled().
        last, sent_at = None, None
        async for result in self.engine.generate(job.prompt, sampling, job.id,
                                                 lora_request=job.lora_request,
                                                 priority=job.priority):
            if self._requests.is_cancelled(job.id):
                break
            last = result
            if job.stream and not result.finished:
                sent_at = self._observe(result, sampling, sent_at)
                self._send(sender, outputs.generate_outputs(result, sampling.n, job.wanted))
        if last is None or self._requests.is_cancelled(job.id):
            # Cancelled before the end: nobody is listening, only Triton needs the flag.
            self._send(sender, None, final=True)
            return
        prefix = "" if job.exclude_input else (last.prompt or "")
        self._send(sender, outputs.generate_outputs(last, sampling.n, job.wanted, prefix),
                   final=True)

    async def _generate_to_feed(self, job: GenerateJob, sender, to: feed.Feed):
        """A stream whose text goes out on a feed, each step's as its client's event
        (feed.py); the request's own answer is an empty final response."""
        key, template = job.delivery.key, job.delivery.template
        tokens, finish, prompt_tokens, sent_at = 0, None, 0, None
        to.streams += 1
        try:
            async for result in self.engine.generate(job.prompt, job.sampling, job.id,
                                                     lora_request=job.lora_request,
                                                     priority=job.priority):
                if self._requests.is_cancelled(job.id):
                    break
                if not result.finished:
                    sent_at = self._observe(result, job.sampling, sent_at)
                for o in result.outputs:
                    tokens += len(o.token_ids)
                    finish = None if o.finish_reason is None else str(o.finish_reason)
                    if o.text or finish is not None:
                        to.put(key, wire.FEED_DATA + template.event(o.text, finish))
                if result.finished:
                    prompt_tokens = len(result.prompt_token_ids or ())
                    to.put(key, feed.end_record(finish, prompt_tokens, tokens))
                    # Out before the final response: the client ends the stream on it.
                    to.flush()
        finally:
            to.streams -= 1
            to.idle_since = self._loop.time()
        self._send(sender, None, final=True)

    def _open_feed(self, feed_id: str, request, sender):
        """On the loop: open a feed (feed.py), answered at once with an empty response."""
        opened = feed.Feed((request, sender), lambda records: self._send_records(sender, records),
                           self._loop.call_soon, self._loop.time())
        try:
            self._feeds.open(feed_id, opened)
        except feed.FeedError as e:
            self._fail(sender, wire.INVALID_ARGUMENT, str(e))
            return
        self._send_records(sender, [])

    def _send_records(self, sender, records: list[bytes]):
        self._send(sender, {wire.TEXT_OUTPUT: np.array(records, dtype=np.object_)})

    def _close_feeds(self, error: tuple[str, str] | None = None, only_unused: bool = False):
        """End the feeds (with only_unused, those whose client went away or that carried
        nothing for a while: feed.IDLE_S): a final response, or `error` (kind, message)."""
        now = self._loop.time()
        for feed_id, opened in self._feeds.items():
            _, sender = opened.held
            try:
                if only_unused and not (opened.idle(now) or sender.is_cancelled()):
                    continue
                self._feeds.close(feed_id)
                opened.flush()
                if error is None:
                    self._send(sender, None, final=True)
                else:
                    self._fail(sender, *error)
            except Exception as e:  # noqa: BLE001 - its client is gone already
                self.logger.log_verbose(f"[vllm] could not end a feed: {e!r}")

    async def _embed(self, job: EmbedJob, sender):
        last = None
        async for result in self.engine.encode(job.prompt, self._pooling_params(), job.id):
            last = result
        self._send(sender, outputs.pooling_outputs(last, job.wanted), final=True)

    def _pooling_params(self):
        from vllm.pooling_params import PoolingParams
        return PoolingParams(task="embed")

    async def _poll_cancelled(self):
        """Abort requests whose client went away, whether they stream, wait in vLLM's
        queue or generate a complete answer.  Runs for the model's lifetime: one failure
        must not end it, or cancellation would stop working for good."""
        loop = asyncio.get_running_loop()
        next_ask = loop.time()
        while True:
            await asyncio.sleep(POLL_S)
            if not self._healthy:
                continue  # nothing runs on a dead engine, nothing to abort
            death = health.death_of(self.engine)
            if death is not None:
                self._on_engine_death(death)
                continue
            try:
                if loop.time() >= next_ask:
                    next_ask = loop.time() + CANCEL_POLL_S
                    self._flag_cancelled()
                    self._close_feeds(only_unused=True)
                await self._abort_cancelled()
            except Exception as e:  # noqa: BLE001 - log, and keep polling
                self.logger.log_error(f"[vllm] cancellation check failed: {e!r}")

    def _flag_cancelled(self):
        for rid, (_, sender) in self._requests.running():
            try:
                if sender.is_cancelled():
                    self._requests.cancel(rid)
                    self.logger.log_info(f"[vllm] request {rid} cancelled by the client")
            except Exception:  # noqa: BLE001 - a request that ended meanwhile
                continue

    async def _abort_cancelled(self):
        # Aborted again on every poll until its coroutine ends: an abort that comes while
        # vLLM is still registering the request (tokenizing, queued) finds nothing to stop.
        pending = self._requests.to_abort()
        if pending:
            await self.engine.abort(pending)

    def _send(self, sender, arrays, final=False):
        flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if final else 0
        try:
            if arrays is None:
                sender.send(flags=flags)
                return
            tensors = [pb_utils.Tensor(name, value) for name, value in arrays.items()]
            sender.send(pb_utils.InferenceResponse(output_tensors=tensors), flags=flags)
        except Exception as e:  # noqa: BLE001 - e.g. the client is gone; nothing to tell it
            self.logger.log_verbose(f"[vllm] could not send a response: {e!r}")

    def _fail(self, sender, kind, message):
        """Answer a request with an error: every error the backend sends goes through
        here, tagged with its kind (errors.py), which clients read instead of the words."""
        error = errors.triton_error(pb_utils, kind, message)
        if self.serving_metrics is not None:
            self.serving_metrics.error(kind)
        sender.send(pb_utils.InferenceResponse(error=error),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    # ----------------------------------------------------------------- health
    def _check_health(self) -> bool:
        """vLLM's own check, once per execute() (ENABLE_VLLM_HEALTH_CHECK).  The poller
        finds a dead engine within POLL_S anyway; this check only makes sure that a
        request never reaches an engine that died since."""
        if not self._healthy:
            return False
        try:
            self._run(self.engine.check_health(), timeout=10)
            return True
        except Exception as e:  # noqa: BLE001 - any failure means unhealthy
            self._death = e
            self._loop.call_soon_threadsafe(self._on_engine_death, e)
            return False

    @property
    def _healthy(self) -> bool:
        return self._death is None

    def _on_engine_death(self, error):
        """Once, on the loop, when the engine is found dead: every request in flight gets
        its error now (ENGINE_DEAD), instead of waiting on outputs that cannot come."""
        if self._death_handled:
            return
        self._death_handled = True
        if self.serving_metrics is not None:
            self.serving_metrics.engine_died()
        self._death = error
        self.logger.log_error(f"[vllm] the engine of {self.model_name} died ({error!r}): "
                              f"answering UNAVAILABLE [{wire.ENGINE_DEAD}] from now on")
        dead = health.dead_answer(self.model_name, error)
        # A feed is a request in flight, which Triton waits for before it unloads the model.
        self._close_feeds(dead)
        for rid, (_, sender) in list(self._requests.running()):
            self._answered_dead.add(rid)
            try:
                self._fail(sender, *dead)
            except Exception as e:  # noqa: BLE001 - its client is gone already
                self.logger.log_verbose(f"[vllm] could not answer {rid}: {e!r}")
        # Not unloaded: pb_utils.unload_model() here has crashed tritonserver (a lock
        # exception in the stub's IPC, killing vLLM's worker).  The model answers
        # ENGINE_DEAD, and the image's watch restarts the server (health.py).

    # --------------------------------------------------------------- unload
    def finalize(self):
        self.logger.log_info(f"[vllm] stopping the engine of {self.model_name}")
        if self._group is not None:
            self._group.close()  # the workers end with the group, not as a loss
        if getattr(self, "_cancel_poller", None) is not None:
            self._cancel_poller.cancel()
        engine = getattr(self, "engine", None)
        if engine is not None:
            try:
                self._run(self._stop_unfinished(), timeout=10)
            except Exception:  # noqa: BLE001 - the engine may be dead already
                pass
            engine.shutdown()
            self.engine = None
        if self.serving_metrics is not None:
            self.serving_metrics.close()
            self.serving_metrics = None
        for logger in getattr(self, "stat_loggers", []):
            logger.finalize()
        self.stat_loggers = []
        self._stop_loop()
        # Requests still held go now, while the stub can still release them.
        self._requests.clear()
        gc.collect()

    async def _stop_unfinished(self):
        """Requests still running when the model unloads (Triton's exit timeout ran out,
        or an unload): each client gets an error, never a stream that just ends."""
        unfinished = list(self._requests.running())
        for rid, (_, sender) in unfinished:
            self._requests.cancel(rid)
            self.logger.log_warn(f"[vllm] request {rid} stopped unfinished: "
                                 f"{self.model_name} is unloading")
            try:
                self._fail(sender, wire.UNAVAILABLE, UNLOADING_MESSAGE)
            except Exception as e:  # noqa: BLE001 - its client is gone already
                self.logger.log_verbose(f"[vllm] could not answer {rid}: {e!r}")
        ids = self._requests.ids()
        if ids:
            await self.engine.abort(ids)
        self._close_feeds((wire.UNAVAILABLE, UNLOADING_MESSAGE))

    def _stop_loop(self):
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join(timeout=10)
