"""A tiny OpenAI-compatible streaming server with known timing, for testing the load generator.

Standard library only (uvloop if asked), raw HTTP/1.1 with keep-alive and chunked SSE, so it
starts in a fraction of a second and answers as fast as Python can.

Run: python tests/fake_openai_server.py --port 0 [--ttft 0.1 --itl 0.02 ...]
It prints "PORT <n>" on its first stdout line once listening.

Tokens are whitespace words. Each request emits max_tokens tokens (ignore_eos or not), in
chunks of --tokens-per-chunk, the first chunk --ttft after the request arrived and each later
chunk --itl after the previous one (on an absolute schedule, so delays do not accumulate).
A prompt may override the behaviour for itself with a directive anywhere in its text:
    [[fake ttft=0.2 itl=0.01 tpc=2 n=5 fail=503 drop_after=3 no_usage=1 stall=2 count=-5]]
(n: emit n tokens whatever max_tokens says; fail: answer that HTTP status; drop_after: abort
the connection after that many chunks; stall: wait that long before the response headers;
count: the completion_tokens its usage reports, a number that may not be.)

Endpoints: POST /v1/completions, /v1/chat/completions, /tokenize, /detokenize;
GET /health, /v1/models, /fake/requests (bodies received so far); POST /fake/reset.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
import zlib

WORDS = [f"w{i}" for i in range(500)]
WORD_IDS = {w: i + 1 for i, w in enumerate(WORDS)}  # id 0 is the BOS
DIRECTIVE = re.compile(r"\[\[fake ([^\]]*)\]\]")


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.a = args
        self.log: list[dict] = []

    # ---- tokenizer -----------------------------------------------------------------------
    def tokenize(self, text: str, special: bool) -> list[int]:
        ids = [WORD_IDS.get(w, 1000 + zlib.crc32(w.encode()) % 50000) for w in text.split()]
        return ([0] * self.a.bos if special else []) + ids

    # ---- HTTP plumbing -------------------------------------------------------------------
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
                }
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                if (
                    self.a.api_key
                    and path.startswith("/v1/")
                    and headers.get("authorization") != f"Bearer {self.a.api_key}"
                ):
                    self.send_json(writer, {"error": {"message": "Unauthorized"}}, 401)  # as vLLM --api-key
                    await writer.drain()
                    continue
                keep = await self.route(method, path, body, writer)
                if not keep or headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    @staticmethod
    def send_json(writer: asyncio.StreamWriter, obj: object, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n".encode()
            + data
        )

    async def route(self, method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> bool:
        if method == "GET" and path == "/health":
            w.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        elif method == "GET" and path == "/v1/models":
            self.send_json(w, {"object": "list", "data": [{"id": self.a.model, "object": "model"}]})
        elif method == "GET" and path == "/fake/requests":
            self.send_json(w, self.log)
        elif method == "POST" and path == "/fake/reset":
            self.log.clear()
            self.send_json(w, {})
        elif method == "POST" and path == "/tokenize" and not self.a.no_tokenize:
            req = json.loads(body)
            ids = self.tokenize(req["prompt"], req.get("add_special_tokens", True))
            self.send_json(w, {"count": len(ids), "max_model_len": 4096, "tokens": ids})
        elif method == "POST" and path == "/detokenize" and not self.a.no_tokenize:
            ids = json.loads(body)["tokens"]
            self.send_json(
                w, {"prompt": " ".join(WORDS[i - 1] if i <= len(WORDS) else f"x{i}" for i in ids if i)}
            )
        elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            return await self.generate(json.loads(body), path.endswith("chat/completions"), w)
        else:
            self.send_json(w, {"error": {"message": f"no route {method} {path}"}}, 404)
        await w.drain()
        return True

    # ---- generation ----------------------------------------------------------------------
    async def generate(self, req: dict, chat: bool, w: asyncio.StreamWriter) -> bool:
        t_arrive = time.perf_counter()
        if not self.a.no_log:
            self.log.append(req)
        prompt = req["messages"][-1]["content"] if chat else req["prompt"]
        opts = {"ttft": self.a.ttft, "itl": self.a.itl, "tpc": self.a.tokens_per_chunk}
        for m in DIRECTIVE.finditer(prompt):
            for kv in m.group(1).split():
                k, _, v = kv.partition("=")
                opts[k] = float(v)
        if opts.get("stall"):
            await asyncio.sleep(opts["stall"])
        if opts.get("fail"):
            self.send_json(w, {"error": {"message": "injected failure"}}, int(opts["fail"]))
            await w.drain()
            return True
        n = int(opts.get("n") or req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        tpc = max(int(opts["tpc"]), 1)
        usage = (req.get("stream_options") or {}).get("include_usage") and not opts.get("no_usage")
        prompt_tokens = len(self.tokenize(prompt, True))
        if not req.get("stream"):
            text = "".join(f" t{i}" for i in range(n))
            choice = (
                {"index": 0, "message": {"role": "assistant", "content": text}}
                if chat
                else {"index": 0, "text": text}
            )
            self.send_json(
                w, {"choices": [choice], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n}}
            )
            await w.drain()
            return True
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        kind = "chat.completion.chunk" if chat else "text_completion"

        def event(obj: object) -> None:
            data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
            w.write(b"%x\r\n%s\r\n" % (len(data), data))

        if chat:  # like vLLM: the role comes first, with empty content
            event({"object": kind, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        sent, chunk_no = 0, 0
        while sent < n:
            due = t_arrive + opts["ttft"] + chunk_no * opts["itl"]
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            k = min(tpc, n - sent)
            text = "".join(f" t{sent + j}" for j in range(k))
            sent += k
            fin = "length" if sent == n else None
            choice = (
                {"index": 0, "delta": {"content": text}, "finish_reason": fin}
                if chat
                else {"index": 0, "text": text, "finish_reason": fin}
            )
            event({"object": kind, "choices": [choice], "usage": None})
            chunk_no += 1
            if opts.get("drop_after") and chunk_no >= opts["drop_after"]:
                await w.drain()
                w.transport.abort()  # the connection drops mid-stream
                return False
            await w.drain()
        if usage:
            event(
                {
                    "object": kind,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": int(opts.get("count", n)),
                        "total_tokens": prompt_tokens + int(opts.get("count", n)),
                    },
                }
            )
        event(b"[DONE]")
        w.write(b"0\r\n\r\n")
        await w.drain()
        return True


async def main(args: argparse.Namespace) -> None:
    args.api_key = (
        args.api_key or os.environ.get("VLLM_API_KEY") or None
    )  # the flag first, as vLLM reads them
    srv = Server(args)
    server = await asyncio.start_server(srv.handle, args.host, args.port, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    async with server:
        await server.serve_forever()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--model", default="fake-model")
    p.add_argument("--ttft", type=float, default=0.0)
    p.add_argument("--itl", type=float, default=0.0)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--bos", type=int, default=0, help="special tokens /tokenize adds (like a BOS)")
    p.add_argument("--no-tokenize", action="store_true", help="no /tokenize or /detokenize")
    p.add_argument("--no-log", action="store_true", help="do not keep request bodies")
    p.add_argument("--uvloop", action="store_true")
    p.add_argument(
        "--api-key",
        default=None,
        help="answer 401 on /v1/* without 'Authorization: Bearer KEY' (else VLLM_API_KEY)",
    )
    return p.parse_args(argv)


if __name__ == "__main__":
    a = parse()
    if a.uvloop:
        import uvloop

        uvloop.run(main(a))
    else:
        try:
            asyncio.run(main(a))
        except KeyboardInterrupt:
            sys.exit(0)
