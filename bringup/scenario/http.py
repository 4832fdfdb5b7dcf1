"""The OpenAI-compatible HTTP API of the imitated engine (Starlette, served by uvicorn).

/health, /v1/models, /v1/completions and /v1/chat/completions, streaming (SSE, with
stream_options.include_usage) or not, with usage counts, max_tokens, temperature, top_p, seed,
ignore_eos, stop, logprobs/top_logprobs. Response shapes follow vLLM's OpenAI server (SGLang's
are the same where it matters). Requests run concurrently; each one's pace comes from the
runtime's performance model.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bringup.scenario.generate import VOCAB, Sampling, TokenPlan, count_tokens
from bringup.scenario.runtime import EngineDead, Request, Runtime

DEAD_MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."


def _error(status: int, message: str, kind: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": status}}, status_code=status
    )


class BadRequest(Exception):
    def __init__(
        self, message: str, status: int = 400, kind: str = "BadRequestError", param: str | None = None
    ):
        super().__init__(message)
        self.status, self.kind, self.param = status, kind, param


def _client(request: HttpRequest) -> str:
    c = request.client
    return f"{c.host}:{c.port}" if c else "127.0.0.1:0"


def _int(body: dict, key: str, default: int | None, minimum: int) -> int | None:
    v = body.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(f"{key} must be an integer, got {v!r}", param=key)
    if v < minimum:
        raise BadRequest(f"{key} must be at least {minimum}, got {v}.", param=key)
    return v


def _float(body: dict, key: str, default: float) -> float:
    v = body.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadRequest(f"{key} must be a number, got {v!r}", param=key)
    return float(v)


def _sampling(body: dict, chat: bool) -> Sampling:
    max_tokens = _int(body, "max_tokens", None, 1)
    if chat and max_tokens is None:
        max_tokens = _int(body, "max_completion_tokens", None, 1)
    if chat:
        lp = body.get("logprobs")
        top = _int(body, "top_logprobs", 0, 0) or 0
        logprobs = max(top, 1) if lp else None
    else:
        logprobs = _int(body, "logprobs", None, 0)
        if logprobs is not None:
            logprobs = max(logprobs, 1)
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop)
    seed = body.get("seed")
    return Sampling(
        max_tokens=max_tokens,
        temperature=_float(body, "temperature", 1.0),
        top_p=_float(body, "top_p", 1.0),
        seed=seed if isinstance(seed, int) else None,
        ignore_eos=bool(body.get("ignore_eos", False)),
        logprobs=logprobs,
        stop=stop,
    )


def _prompts(body: dict) -> list[tuple[str, list[int] | None]]:
    """Each prompt's text, and its ids where it came as token ids (read back through VOCAB)."""
    p = body.get("prompt")
    if isinstance(p, str):
        return [(p, None)]
    if isinstance(p, list) and p:
        if all(isinstance(x, str) for x in p):
            return [(x, None) for x in p]
        if _ids(p):
            return [(VOCAB.decode(p), list(p))]
        if all(isinstance(x, list) and x and _ids(x) for x in p):
            return [(VOCAB.decode(x), list(x)) for x in p]
    raise BadRequest("prompt must be a string, a list of strings, or token ids", param="prompt")


def _ids(xs: list) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in xs)


def chat_prompt(body: dict) -> str:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("messages must be a non-empty list", param="messages")
    parts = []
    for m in msgs:
        if not isinstance(m, dict):
            raise BadRequest("each message must be an object", param="messages")
        content = m.get("content") or ""
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        parts.append(f"{m.get('role', 'user')}: {content}")
    return "\n".join(parts) + "\nassistant:"


def _completion_logprobs(plan: TokenPlan, offset: int = 0) -> dict | None:
    if plan.logprobs is None:
        return None
    offsets, pos = [], offset
    for t in plan.tokens:
        offsets.append(pos)
        pos += len(t)
    return {
        "text_offset": offsets,
        "token_logprobs": [lp.logprob for lp in plan.logprobs],
        "tokens": list(plan.tokens),
        "top_logprobs": [dict(lp.top) for lp in plan.logprobs],
    }


def _completion_choice(i: int, plan: TokenPlan, prompt: tuple[str, list[int] | None], ids: bool) -> dict:
    choice: dict[str, Any] = {
        "index": i,
        "text": plan.text,
        "logprobs": _completion_logprobs(plan),
        "finish_reason": plan.finish_reason,
        "stop_reason": None,
    }
    if ids:  # `return_token_ids` (vLLM's, SGLang's from 0.5.23): the prompt's and the answer's ids
        choice["prompt_token_ids"] = prompt[1] if prompt[1] is not None else VOCAB.encode(prompt[0])
        choice["token_ids"] = VOCAB.ids(plan.tokens)
    return choice


def _chat_logprobs(plan: TokenPlan) -> dict | None:
    if plan.logprobs is None:
        return None
    return {
        "content": [
            {
                "token": t,
                "logprob": lp.logprob,
                "bytes": list(t.encode()),
                "top_logprobs": [{"token": a, "logprob": b, "bytes": list(a.encode())} for a, b in lp.top],
            }
            for t, lp in zip(plan.tokens, plan.logprobs, strict=True)
        ]
    }


def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj)}\n\n"


def build_app(rt: Runtime) -> Starlette:
    cfg = rt.cfg
    names = cfg.served_model_names
    context_len = rt.dialect.size.context_len
    owner = "sglang" if rt.sc.engine == "sglang" else "vllm"

    async def dead_response(request: HttpRequest) -> Response:
        if rt.drop:
            await asyncio.Event().wait()  # the process is about to die; the connection drops
        rt.dialect.access(_client(request), request.method, request.url.path, 500)
        return _error(500, DEAD_MESSAGE, "InternalServerError")

    async def health(request: HttpRequest) -> Response:
        if rt.dead:
            return await dead_response(request)
        status = 200 if rt.ready else 503
        return Response(status_code=status)

    async def models(request: HttpRequest) -> Response:
        if rt.dead:
            return await dead_response(request)
        data = [
            {
                "id": n,
                "object": "model",
                "created": int(time.time()),
                "owned_by": owner,
                "root": cfg.model_path,
                "parent": None,
                "max_model_len": context_len,
            }
            for n in names
        ]
        return JSONResponse({"object": "list", "data": data})

    async def model_info(request: HttpRequest) -> Response:
        return JSONResponse(
            {"model_path": cfg.model_path, "tokenizer_path": cfg.model_path, "is_generation": True}
        )

    async def version(request: HttpRequest) -> Response:
        return JSONResponse({"version": rt.sc.engine_version})

    def check_model(body: dict) -> str:
        m = body.get("model")
        if m is None:
            return names[0]
        if owner == "vllm" and m not in names:
            raise BadRequest(f"The model `{m}` does not exist.", 404, "NotFoundError", "model")
        return str(m)

    def check_context(prompt: str, ids: list[int] | None, s: Sampling) -> int:
        n = len(ids) if ids is not None else count_tokens(prompt)
        want = n + (s.max_tokens or 0)
        if want > context_len:
            raise BadRequest(
                f"This model's maximum context length is {context_len} tokens. However, you requested "
                f"{want} tokens ({n} in the messages, {s.max_tokens or 0} in the completion). Please "
                "reduce the length of the messages or completion."
            )
        return n

    async def completions(request: HttpRequest) -> Response:
        return await handle(request, chat=False)

    async def chat(request: HttpRequest) -> Response:
        return await handle(request, chat=True)

    async def handle(request: HttpRequest, chat: bool) -> Response:
        if rt.dead:
            return await dead_response(request)
        client = _client(request)
        try:
            try:
                body = await request.json()
            except ValueError:
                raise BadRequest("the request body is not valid JSON") from None
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            model = check_model(body)
            s = _sampling(body, chat)
            prompts = [(chat_prompt(body), None)] if chat else _prompts(body)
            counts = [check_context(p, ids, s) for p, ids in prompts]
        except BadRequest as e:
            rt.dialect.access(client, "POST", request.url.path, e.status)
            return _error(e.status, str(e), e.kind, e.param)
        default_max = None if chat else 16  # the OpenAI completions default
        reqs = [Request(p, s, default_max, len(ids) if ids is not None else None) for p, ids in prompts]
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        if body.get("stream"):
            opts = body.get("stream_options") or {}
            rt.dialect.access(client, "POST", request.url.path, 200)
            return StreamingResponse(
                stream(reqs[0], counts[0], rid, created, model, chat, bool(opts.get("include_usage"))),
                media_type="text/event-stream",
            )
        try:
            plans = await asyncio.gather(*(rt.generate(r) for r in reqs))
        except EngineDead as e:
            if e.drop:
                await asyncio.Event().wait()
            rt.dialect.access(client, "POST", request.url.path, 500)
            return _error(500, DEAD_MESSAGE, "InternalServerError")
        rt.dialect.access(client, "POST", request.url.path, 200)
        choices = []
        for i, plan in enumerate(plans):
            if chat:
                choices.append(
                    {
                        "index": i,
                        "message": {
                            "role": "assistant",
                            "content": plan.text,
                            "reasoning_content": None,
                            "tool_calls": [],
                        },
                        "logprobs": _chat_logprobs(plan),
                        "finish_reason": plan.finish_reason,
                        "stop_reason": None,
                    }
                )
            else:
                choices.append(_completion_choice(i, plan, prompts[i], bool(body.get("return_token_ids"))))
        usage = _usage(sum(counts), sum(len(p.tokens) for p in plans))
        return JSONResponse(
            {
                "id": rid,
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": model,
                "choices": choices,
                "usage": usage,
            }
        )

    async def stream(
        req: Request, prompt_tokens: int, rid: str, created: int, model: str, chat: bool, include_usage: bool
    ) -> AsyncIterator[str]:
        obj = "chat.completion.chunk" if chat else "text_completion"
        queue: asyncio.Queue[tuple[int, TokenPlan] | None] = asyncio.Queue()

        async def on_token(i: int, plan: TokenPlan) -> None:
            await queue.put((i, plan))

        async def run() -> TokenPlan:
            try:
                return await rt.generate(req, on_token)
            finally:
                await queue.put(None)

        task = asyncio.create_task(run())
        try:
            if chat:
                yield _sse(
                    {
                        "id": rid,
                        "object": obj,
                        "created": created,
                        "model": model,
                        "choices": [
                            {
                                "index": 0,
                                "delta": {"role": "assistant", "content": ""},
                                "logprobs": None,
                                "finish_reason": None,
                            }
                        ],
                    }
                )
            offset = 0
            sent = 0
            while True:
                item = await queue.get()
                if item is None:
                    break
                i, plan = item
                tok, lp = plan.tokens[i], plan.logprobs[i] if plan.logprobs else None
                # The last token's chunk carries the finish reason, as vLLM and SGLang send it: no
                # empty chunk after it (a load generator would count one chunk more than tokens).
                finish = plan.finish_reason if i == len(plan.tokens) - 1 else None
                one = TokenPlan([tok], "stop", [lp]) if lp is not None else None
                if chat:
                    choice = {
                        "index": 0,
                        "delta": {"content": tok},
                        "logprobs": _chat_logprobs(one) if one else None,
                        "finish_reason": finish,
                    }
                else:
                    choice = {
                        "index": 0,
                        "text": tok,
                        "logprobs": _completion_logprobs(one, offset) if one else None,
                        "finish_reason": finish,
                        "stop_reason": None,
                    }
                offset += len(tok)
                sent += 1
                yield _sse(
                    {"id": rid, "object": obj, "created": created, "model": model, "choices": [choice]}
                )
            try:
                plan = await task
            except EngineDead as e:
                if e.drop:
                    await asyncio.Event().wait()
                yield _sse(
                    {
                        "error": {
                            "message": DEAD_MESSAGE,
                            "type": "InternalServerError",
                            "param": None,
                            "code": 500,
                        }
                    }
                )
                yield "data: [DONE]\n\n"
                return
            if sent < len(plan.tokens) or not plan.tokens:  # nothing carried the finish reason yet
                last = (
                    {
                        "index": 0,
                        "delta": {},
                        "logprobs": None,
                        "finish_reason": plan.finish_reason,
                        "stop_reason": None,
                    }
                    if chat
                    else {
                        "index": 0,
                        "text": "",
                        "logprobs": None,
                        "finish_reason": plan.finish_reason,
                        "stop_reason": None,
                    }
                )
                yield _sse({"id": rid, "object": obj, "created": created, "model": model, "choices": [last]})
            if include_usage:
                yield _sse(
                    {
                        "id": rid,
                        "object": obj,
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": _usage(prompt_tokens, len(plan.tokens)),
                    }
                )
            yield "data: [DONE]\n\n"
        finally:
            if not task.done():
                task.cancel()

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/health_generate", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/version", version, methods=["GET"]),
        Route("/get_model_info", model_info, methods=["GET"]),
        Route("/model_info", model_info, methods=["GET"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
    ]
    return Starlette(routes=routes)
