"""What each imitated engine prints at each step, in its own words.

The phase lines are the ones bringup/data/engines.yaml watches (`Load weight begin`, `KV Cache is
allocated`, `Capture cuda graph begin`, `The server is fired up and ready to roll!`; vLLM's
`Starting to load model`, `Loading weights took`, `GPU KV cache size`, `Graph capturing finished
in`, `init engine (...) took`), worded as in the engines' sources (SGLang model_runner.py,
memory_pool.py, cuda_graph_runner.py, scheduler.py; vLLM gpu_model_runner.py, gpu_worker.py,
kv_cache_utils.py, core.py, api_server.py) and in real logs.
"""

from __future__ import annotations

from bringup.scenario.config import ScenarioConfig, non_default_args, server_args_repr, vllm_engine_config
from bringup.scenario.logfmt import LogWriter
from bringup.scenario.schema import Scenario
from bringup.scenario.sizing import Sizing


def _mmss(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 60:02d}:{s % 60:02d}"


def _bar(frac: float, width: int = 10) -> str:
    full = int(frac * width)
    return "█" * full + " " * (width - full)


class Dialect:
    """Common interface; one subclass per engine."""

    death_request = "error"  # how an in-flight request ends when the engine dies while serving

    def __init__(self, sc: Scenario, cfg: ScenarioConfig, size: Sizing, log: LogWriter):
        self.sc, self.cfg, self.size, self.log = sc, cfg, size, log
        self.failing_phase: str | None = (
            None  # set by the start-up walk: lines that would contradict it stay out
        )
        self.bound_port: int | None = None  # the port really bound (differs from --port 0)

    @property
    def port(self) -> int:
        return self.bound_port if self.bound_port is not None else self.cfg.port

    def exit_code(self, phase: str) -> int:
        return 1

    # Subclasses implement the steps below.
    def header(self) -> None: ...
    def effective_config(self) -> None: ...
    def start_begin(self) -> None: ...
    def start_end(self) -> None: ...
    def dist_begin(self) -> None: ...
    def dist_end(self) -> None: ...
    def kernel_warmup_begin(self) -> None: ...
    def kernel_warmup_end(self) -> None: ...
    def load_begin(self) -> None: ...
    def load_progress(self, done: int, total: int, elapsed: float, phase_seconds: float) -> None: ...
    def load_end(self, seconds: float) -> None: ...
    def kv_lines(self) -> None: ...
    def graph_begin(self) -> None: ...
    def graph_progress(self, done: int, total: int, elapsed: float, phase_seconds: float) -> None: ...
    def graph_end(self, seconds: float) -> None: ...
    def init_done(self, init_seconds: float) -> None: ...
    def server_starting(self) -> None: ...
    def server_up(self) -> None: ...
    def warmup_begin(self) -> None: ...
    def ready(self) -> None: ...
    def startup_death(self, phase: str) -> None: ...
    def serving_death(self) -> None: ...
    def shutdown(self) -> None: ...
    def port_in_use(self) -> None: ...
    def request_prefill(self, prompt_tokens: int, running: int) -> None: ...
    def request_decode(self, running: int, tokens: int, throughput: float) -> None: ...

    def access(self, client: str, method: str, path: str, status: int) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}.get(
            status, ""
        )
        self.log.uvicorn(f'{client} - "{method} {path} HTTP/1.1" {status} {reason}'.rstrip())


class SGLangDialect(Dialect):
    death_request = "drop"  # the scheduler dies and launch_server kills its whole process tree

    def exit_code(self, phase: str) -> int:
        # Errors in ServerArgs validation end the launcher with a traceback (exit 1). After that a
        # dying scheduler sends SIGQUIT and launch_server's kill_process_tree SIGKILLs itself.
        return 1 if phase == "parse-args" else -9

    def effective_config(self) -> None:
        self.log.sg(f"server_args={server_args_repr(self.cfg)}")

    def dist_begin(self) -> None:
        self.log.sg("Init torch distributed begin.", tp=0)

    def dist_end(self) -> None:
        # SGLang prints the custom all-reduce verdict between these two lines when it declines
        # (custom_all_reduce.py), then "Init torch distributed ends".
        if (
            self.cfg.tp > 2
            and self.sc.hardware.link == "pcie"
            and not self.cfg.value("disable_custom_all_reduce")
        ):
            self.log.write(
                f"[{self.log.ts()} TP0] Custom allreduce is disabled because it's not supported on more "
                "than two PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True "
                "explicitly."
            )
        self.log.sg("Init torch distributed ends. mem usage=0.62 GB", tp=0)

    def load_begin(self) -> None:
        self.log.sg(f"Load weight begin. avail mem={self.size.avail_start:.2f} GB", tp=0)

    def load_progress(self, done: int, total: int, elapsed: float, phase_seconds: float) -> None:
        if self.cfg.dummy_weights:
            return
        pct = int(100 * done / total)
        left = phase_seconds - elapsed
        rate = elapsed / done if done else 0.0
        self.log.write(
            f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {done}/{total} "
            f"[{_mmss(elapsed)}<{_mmss(left)}, {rate:.2f}s/it]"
        )

    def load_end(self, seconds: float) -> None:
        s = self.size
        self.log.sg(
            f"Load weight end. type={self.sc.model.architecture}, "
            f"dtype=torch.bfloat16, avail mem={s.avail_start - s.weights:.2f} GB, "
            f"mem usage={s.weights:.2f} GB.",
            tp=0,
        )

    def kv_lines(self) -> None:
        s = self.size
        kv = str(self.cfg.value("kv_cache_dtype") or "auto")
        torch_dtype = {"fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2"}.get(
            kv, "torch.bfloat16"
        )
        self.log.sg(f"Using KV cache dtype: {torch_dtype}", tp=0)
        if self.sc.model.attention in ("mla", "dsa"):
            self.log.sg(f"KV Cache is allocated. #tokens: {s.kv_tokens}, KV size: {s.kv_gib:.2f} GB", tp=0)
        else:
            self.log.sg(
                f"KV Cache is allocated. #tokens: {s.kv_tokens}, K size: {s.kv_gib / 2:.2f} GB, "
                f"V size: {s.kv_gib / 2:.2f} GB",
                tp=0,
            )
        self.log.sg(f"Memory pool end. avail mem={s.avail_end + s.graph_gib:.2f} GB", tp=0)

    def graph_begin(self) -> None:
        self.log.sg(
            "Capture cuda graph begin. This can take up to several minutes. "
            f"avail mem={self.size.avail_end + self.size.graph_gib:.2f} GB",
            tp=0,
        )

    def graph_progress(self, done: int, total: int, elapsed: float, phase_seconds: float) -> None:
        bs = max(1, int(self.size.graph_max_bs * (1 - done / total)))
        avail = self.size.avail_end + self.size.graph_gib * (1 - done / total)
        rate = done / elapsed if elapsed else 0.0
        self.log.write(
            f"Capturing batches (bs={bs} avail_mem={avail:.2f} GB): {int(100 * done / total):3d}%|"
            f"{_bar(done / total)}| {done}/{total} [{_mmss(elapsed)}<{_mmss(phase_seconds - elapsed)}, "
            f"{rate:.2f}it/s]"
        )

    def graph_end(self, seconds: float) -> None:
        s = self.size
        self.log.sg(
            f"Capture cuda graph end. Time elapsed: {seconds:.2f} s. mem usage={s.graph_gib:.2f} GB. "
            f"avail mem={s.avail_end:.2f} GB.",
            tp=0,
        )

    def init_done(self, init_seconds: float) -> None:
        s = self.size
        chunk = self.cfg.value("chunked_prefill_size")
        max_prefill = self.cfg.value("max_prefill_tokens")
        self.log.sg(
            f"max_total_num_tokens={s.kv_tokens}, chunked_prefill_size={chunk}, "
            f"max_prefill_tokens={max_prefill}, max_running_requests={s.max_running}, "
            f"context_len={s.context_len}, available_gpu_mem={s.avail_end:.2f} GB",
            tp=0,
        )

    def server_up(self) -> None:
        self.log.uvicorn(f"Started server process [{self.log.pid}]")
        self.log.uvicorn("Waiting for application startup.")
        self.log.uvicorn("Application startup complete.")
        self.log.uvicorn(f"Uvicorn running on http://{self.cfg.host}:{self.port} (Press CTRL+C to quit)")

    def warmup_begin(self) -> None:
        # launch_server's warm-up: GET /model_info, then one short /generate request.
        self.access("127.0.0.1:41500", "GET", "/model_info", 200)
        self.log.sg(
            "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0, ",
            tp=0,
        )

    def ready(self) -> None:
        self.access("127.0.0.1:41506", "POST", "/generate", 200)
        self.log.sg("The server is fired up and ready to roll!")

    def startup_death(self, phase: str) -> None:
        if phase != "parse-args":
            self.log.sg("Received sigquit from a child process. It usually means the child failed.")

    def serving_death(self) -> None:
        self.log.sg("Received sigquit from a child process. It usually means the child failed.")

    def port_in_use(self) -> None:
        self.log.write(
            f"[{self.log.ts()}] ERROR:    [Errno 98] error while attempting to bind on address "
            f"('{self.cfg.host}', {self.cfg.port}): address already in use"
        )

    def request_prefill(self, prompt_tokens: int, running: int) -> None:
        usage = min(prompt_tokens / max(self.size.kv_tokens, 1), 1.0)
        self.log.sg(
            f"Prefill batch. #new-seq: 1, #new-token: {prompt_tokens}, #cached-token: 0, "
            f"token usage: {usage:.2f}, #running-req: {max(running - 1, 0)}, #queue-req: 0, ",
            tp=0,
        )

    def request_decode(self, running: int, tokens: int, throughput: float) -> None:
        usage = min(tokens / max(self.size.kv_tokens, 1), 1.0)
        self.log.sg(
            f"Decode batch. #running-req: {running}, #token: {tokens}, token usage: {usage:.2f}, "
            f"cuda graph: {self.cfg.cuda_graphs}, gen throughput (token/s): {throughput:.2f}, "
            "#queue-req: 0, ",
            tp=0,
        )


class VLLMDialect(Dialect):
    death_request = "error"  # the API server answers 500 (EngineDeadError) and shuts down

    def _api(self, msg: str, src: str, level: str = "INFO") -> None:
        self.log.vl(msg, src, proc="APIServer", level=level)

    def _core(self, msg: str, src: str, level: str = "INFO") -> None:
        self.log.vl(msg, src, proc="EngineCore_DP0", level=level)

    def header(self) -> None:
        self._api(f"vLLM API server version {self.sc.engine_version}", "api_server.py:1885")
        self._api(f"non-default args: {non_default_args(self.cfg)!r}", "utils.py:253")
        self._api(f"Resolved architecture: {self.sc.model.architecture}", "model.py:547")
        self._api(f"Using max model len {self.size.context_len}", "model.py:1510")

    def effective_config(self) -> None:
        pass  # the engine process prints its config once it has started (start_end)

    def start_end(self) -> None:
        self._core(
            f"Initializing a V1 LLM engine (v{self.sc.engine_version}) with config: "
            f"{vllm_engine_config(self.cfg, self.size.context_len)}",
            "core.py:93",
        )
        self._core(
            f"rank 0 in world size {self.cfg.tp} is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0",
            "parallel_state.py:1208",
        )

    def dist_begin(self) -> None:
        # vLLM parallel_state.py / pynccl.py / cuda_communicator.py, as real multi-GPU logs show
        # them (e.g. vllm #8058: "world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://...").
        tp = self.cfg.tp
        if str(self.cfg.env.get("VLLM_LOGGING_LEVEL", "INFO")).upper() != "DEBUG":
            tp_lines = 0  # parallel_state.py logs these at DEBUG only
        else:
            tp_lines = tp
        for r in range(tp_lines):
            proc = f"Worker_TP{r}" if tp > 1 else "EngineCore_DP0"
            self.log.vl(
                f"world_size={tp} rank={r} local_rank={r} distributed_init_method=tcp://127.0.0.1:54127 "
                "backend=nccl",
                "parallel_state.py:1134",
                proc=proc,
                level="DEBUG",
            )
        if tp > 1:
            self.log.vl("vLLM is using nccl==2.28.9", "pynccl.py:113", proc="Worker_TP0")

    def dist_end(self) -> None:
        tp = self.cfg.tp
        if tp < 2:
            return
        if self.cfg.value("disable_custom_all_reduce"):
            self.log.vl(
                "Using ['SYMM_MEM', 'PYNCCL'] all-reduce backends",
                "cuda_communicator.py:264",
                proc="Worker_TP0",
            )
            return
        if self.sc.hardware.link == "pcie" and tp > 2:
            self.log.vl(
                "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
                "To silence this warning, specify disable_custom_all_reduce=True explicitly.",
                "custom_all_reduce.py:144",
                proc="Worker_TP0",
                level="WARNING",
            )
        else:
            self.log.vl(
                "Using ['CUSTOM', 'SYMM_MEM', 'PYNCCL'] all-reduce backends",
                "cuda_communicator.py:264",
                proc="Worker_TP0",
            )

    def kernel_warmup_begin(self) -> None:
        if self.sc.timing.kernel_warmup > 0:  # vllm kernel_warmup.py: FlashInfer's autotuner, its own logger
            self.log.write(
                f"(EngineCore_DP0 pid={self.log.core_pid}) {self.log.clock.now():%Y-%m-%d %H:%M:%S},000 "
                "- INFO - autotuner.py:256 - flashinfer.jit: [Autotuner]: Autotuning process starts ..."
            )

    def load_begin(self) -> None:
        self._core(f"Starting to load model {self.cfg.model_path}...", "gpu_model_runner.py:2602")
        backend = self.cfg.value("attention_backend")
        if backend and self.failing_phase != "load-weights":  # a rejected backend is never "used"
            self._core(
                f"Using {backend} attention backend out of potential backends: ['{backend}'].", "cuda.py:366"
            )

    def load_progress(self, done: int, total: int, elapsed: float, phase_seconds: float) -> None:
        if self.cfg.dummy_weights:
            return
        pct = int(100 * done / total)
        self.log.write(
            f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {done}/{total} "
            f"[{_mmss(elapsed)}<{_mmss(phase_seconds - elapsed)}, {elapsed / max(done, 1):.2f}s/it]"
        )

    def load_end(self, seconds: float) -> None:
        self._core(f"Loading weights took {seconds:.2f} seconds", "default_loader.py:291")
        self._core(
            f"Model loading took {self.size.weights:.4f} GiB memory and {seconds + 1.5:.6f} seconds",
            "gpu_model_runner.py:2653",
        )

    def kv_lines(self) -> None:
        s = self.size
        self._core(f"Available KV cache memory: {s.kv_gib:.2f} GiB", "gpu_worker.py:298")
        self._core(f"GPU KV cache size: {s.kv_tokens:,} tokens", "kv_cache_utils.py:1087")
        self._core(
            f"Maximum concurrency for {s.context_len:,} tokens per request: "
            f"{s.kv_tokens / max(s.context_len, 1):.2f}x",
            "kv_cache_utils.py:1091",
        )

    def graph_begin(self) -> None:
        pass  # vLLM announces capture with its tqdm bar only

    def graph_progress(self, done: int, total: int, elapsed: float, phase_seconds: float) -> None:
        rate = done / elapsed if elapsed else 0.0
        self.log.write(
            f"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): {int(100 * done / total):3d}%|"
            f"{_bar(done / total)}| {done}/{total} [{_mmss(elapsed)}<{_mmss(phase_seconds - elapsed)}, "
            f"{rate:.2f}it/s]"
        )

    def graph_end(self, seconds: float) -> None:
        self._core(
            f"Graph capturing finished in {round(seconds):.0f} secs, took {self.size.graph_gib:.2f} GiB",
            "gpu_model_runner.py:3480",
        )

    def init_done(self, init_seconds: float) -> None:
        self._core(
            f"init engine (profile, create kv cache, warmup model) took {init_seconds:.2f} seconds",
            "core.py:210",
        )

    def server_starting(self) -> None:
        self._api(f"Starting vLLM server on http://{self.cfg.host}:{self.port}", "api_server.py:1971")

    def server_up(self) -> None:
        self.log.uvicorn(f"Started server process [{self.log.pid}]")
        self.log.uvicorn("Waiting for application startup.")
        self.log.uvicorn("Application startup complete.")

    def startup_death(self, phase: str) -> None:
        if phase == "parse-args":
            return
        # The EngineCore's own "EngineCore failed to start." and traceback are the scenario's lines.
        self.log.write(f"(APIServer pid={self.log.pid}) Traceback (most recent call last):")
        self.log.write(
            f'(APIServer pid={self.log.pid})   File ".../vllm/v1/engine/utils.py", line 1069, '
            "in wait_for_engine_startup"
        )
        self.log.write(f"(APIServer pid={self.log.pid})     raise RuntimeError(")
        self.log.write(
            f"(APIServer pid={self.log.pid}) RuntimeError: Engine core initialization failed. "
            "See root cause above. Failed core proc(s): {}"
        )

    def serving_death(self) -> None:
        self._core("EngineCore encountered a fatal error.", "core.py:1021", level="ERROR")
        self._api("AsyncLLM output_handler failed.", "async_llm.py:539", level="ERROR")
        self.log.write(
            f"(APIServer pid={self.log.pid}) vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
            "encountered an issue. See stack trace (above) for the root cause."
        )

    def shutdown(self) -> None:
        self.log.uvicorn("Shutting down")
        self.log.uvicorn("Waiting for application shutdown.")
        self.log.uvicorn("Application shutdown complete.")
        self.log.uvicorn(f"Finished server process [{self.log.pid}]")

    def port_in_use(self) -> None:
        self.log.write(
            f"(APIServer pid={self.log.pid}) ERROR:    [Errno 98] error while attempting to bind on "
            f"address ('{self.cfg.host}', {self.cfg.port}): address already in use"
        )

    def request_prefill(self, prompt_tokens: int, running: int) -> None:
        pass  # vLLM logs no per-request line at INFO

    def request_decode(self, running: int, tokens: int, throughput: float) -> None:
        self._api(
            f"Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: {throughput:.1f} "
            f"tokens/s, Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: "
            f"{100 * min(tokens / max(self.size.kv_tokens, 1), 1):.1f}%, Prefix cache hit rate: 0.0%",
            "loggers.py:236",
        )


def dialect_for(sc: Scenario, cfg: ScenarioConfig, size: Sizing, log: LogWriter) -> Dialect:
    return (SGLangDialect if sc.engine == "sglang" else VLLMDialect)(sc, cfg, size, log)
