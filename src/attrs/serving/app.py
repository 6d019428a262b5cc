"""The HTTP scoring app behind `psyattrs serve`: MLflow's scoring protocol, psyattrs' input checks.

Routes (an ASGI app for uvicorn, built with Starlette):

- `GET /ping`, `GET /health`: 200 once the model is loaded; `GET /version`: the psyattrs version.
- `POST /invocations`: a JSON body in one of the forms of `psyattrs.serving.requests`; the answer
  is `{"predictions": [...]}`, one object per sentence in request order with the columns of
  `psyattrs.experiments.pyfunc.output_columns` (`doc_id`, `sent_id`, then per head the class, its
  name, the class probabilities and the disagreement), exactly what the logged MLflow model
  returns for the same rows.

Refusals are `{"error_code": ..., "message": ...}` with a one-line UTF-8 message naming the field:
400 bad input, 413 a body over `max_body` bytes, 415 a body that is not JSON or not UTF-8, 503
when a request waited more than `queue_timeout` seconds for its turn, 500 (logged with its
traceback) for a fault of the server itself.

Memory stays bounded under load: at most `in_flight` requests are read and held at a time (the
others wait, unread, in their sockets), a body is read up to `max_body` bytes only, the model
predicts `chunk_rows` rows (whole conversations) at a time, `model_threads` chunks at once, the
requests taking turns chunk by chunk (so a small request is not stuck behind a large one), and
each chunk's answer is written by pandas' JSON writer into the answer's spool (memory up to
`SPOOL_MEMORY` bytes, a temporary file beyond: no whole large answer in memory, no Python object
per cell); the tokeniser cache is emptied when it passes `TOKEN_CACHE_LIMIT` sentences, glibc
keeps at most two malloc arenas, and memory freed after a large request is handed back to the
system (`malloc_trim`).

An answer is built whole before its first byte is sent: a 200 is only started for a body that is
complete, and a fault found while predicting (a fault of the server, logged with its traceback) is
a 500 with its one-line message, never a 200 cut short. Every input check runs before (numbers
included: see `psyattrs.data.prediction_input`).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import tempfile
import threading
from typing import Any, Callable

from psyattrs.data.prediction_input import check_prediction_table
from psyattrs.experiments.pyfunc import predict_table
from psyattrs.features.tokenizers import clear_tokenizer_cache, tokenizer_cache_info
from psyattrs.serving.predict import inputs_to_table
from psyattrs.serving.requests import RequestError, request_inputs

DEFAULT_MAX_BODY = 20 * 1024 * 1024
TOKEN_CACHE_LIMIT = 20_000
TRIM_AFTER = 1024 * 1024  # bytes of body after which freed memory is returned to the system
SPOOL_MEMORY = 8 * 1024 * 1024  # bytes of an answer held in memory; the rest waits in a temporary file
SEND_PIECE = 1024 * 1024  # bytes of a built answer sent at a time
_DRAIN_LIMIT = 256 * 1024 * 1024  # an oversized body is read and dropped up to this much, then the connection closes
_M_ARENA_MAX = -8

logger = logging.getLogger("psyattrs.serving")


def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


_LIBC = _libc()


def limit_malloc_arenas(arenas: int = 2) -> None:
    """Caps glibc's malloc arenas (one per thread by default, each keeping its freed memory)."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_ARENA_MAX, arenas)


def release_memory() -> None:
    """Hands memory that Python freed back to the system (glibc `malloc_trim`; no-op elsewhere)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _error(status: int, message: str):
    from starlette.responses import JSONResponse

    codes = {400: "BAD_REQUEST", 413: "REQUEST_TOO_LARGE", 415: "UNSUPPORTED_MEDIA_TYPE", 503: "TEMPORARILY_UNAVAILABLE",
             500: "INTERNAL_ERROR"}
    return JSONResponse({"error_code": codes.get(status, "BAD_REQUEST"), "message": message}, status_code=status)


async def _in_thread(function: Callable[..., Any], *args: Any) -> Any:
    """Runs `function` in a daemon thread (so that a stopping server never waits for a prediction)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(result)

    def work() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (function(*args), None)
        except BaseException as exc:  # handed to the awaiting request
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop closed: the server stopped
            pass

    threading.Thread(target=work, name="psyattrs-predict", daemon=True).start()
    return await future


def conversation_chunks(doc_ids: Any, chunk_rows: int) -> list[tuple[int, int]]:
    """Row ranges [start, stop) of about `chunk_rows` rows that never split a conversation.

    A conversation whose rows are not contiguous (rows of two `doc_id`s interleaved) cannot be
    cut out of the table in order: then the whole table is one range.
    """
    import pandas as pd

    ids = pd.Series(doc_ids).astype(str).to_numpy()
    n = len(ids)
    if n <= chunk_rows:
        return [(0, n)] if n else []
    starts = [0] + [i for i in range(1, n) if ids[i] != ids[i - 1]]
    if len(starts) != len(set(ids[starts])):
        return [(0, n)]
    ranges, begin = [], 0
    for start in starts[1:]:
        if start - begin >= chunk_rows:
            ranges.append((begin, start))
            begin = start
    ranges.append((begin, n))
    return ranges


class ScoringApp:
    """The scoring app for one loaded model (see the module docstring).

    Args:
        model: a fitted multi-head model (as `psyattrs.Predictor` loads it).
        schema: its heads.
        max_body: the largest body accepted, in bytes (default 20 MiB).
        in_flight: requests whose bodies are read and held at once; more wait their turn, unread.
        queue_timeout: seconds a request may wait for its turn before a 503.
        chunk_rows: rows predicted at a time (whole conversations): a large request is predicted
            and answered chunk by chunk, taking turns with the other requests.
        model_threads: chunks predicted at once (default: the CPU count, at most 2).
        version: what GET /version answers.

    Attributes:
        app: the ASGI application.
    """

    def __init__(self, model: Any, schema: Any, *, max_body: int = DEFAULT_MAX_BODY, in_flight: int = 4,
                 queue_timeout: float = 60.0, chunk_rows: int = 2000, model_threads: int | None = None,
                 version: str = ""):
        from starlette.applications import Starlette
        from starlette.routing import Route

        model_threads = model_threads if model_threads is not None else max(1, min(2, os.cpu_count() or 1))
        for name, value in (("max_body", max_body), ("in_flight", in_flight), ("chunk_rows", chunk_rows),
                            ("model_threads", model_threads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not queue_timeout > 0:
            raise ValueError(f"queue_timeout must be positive, got {queue_timeout!r}")
        self.model = model
        self.schema = schema
        self.max_body = max_body
        self.queue_timeout = float(queue_timeout)
        self.chunk_rows = chunk_rows
        self.version = version
        self._slots = asyncio.Semaphore(in_flight)
        self._model_turns = asyncio.Semaphore(model_threads)
        limit_malloc_arenas()
        self.app = Starlette(routes=[
            Route("/ping", self.ping, methods=["GET"]),
            Route("/health", self.ping, methods=["GET"]),
            Route("/version", self.get_version, methods=["GET"]),
            Route("/invocations", self.invocations, methods=["POST"]),
        ])

    def warm_up(self) -> None:
        """Predicts one sentence, so that what the model loads on first use (the Korean morpheme
        analyser: about 0.5 GB) is loaded before the server reports ready, not in a request."""
        import pandas as pd

        predict_table(self.model, self.schema, pd.DataFrame({"text": ["안녕하세요"]}))

    async def ping(self, request: Any):
        from starlette.responses import Response

        return Response("\n", media_type="application/json")

    async def get_version(self, request: Any):
        from starlette.responses import Response

        return Response(self.version, media_type="text/plain")

    def _too_large(self, size: str) -> Any:
        mib = self.max_body / (1024 * 1024)
        return _error(413, f"the body is {size}; the limit is {self.max_body} bytes ({mib:g} MiB): "
                           "send fewer sentences per request")

    @staticmethod
    async def _drain(stream: Any, read: int) -> None:
        """Reads and drops the rest of a refused body (so the client sees the answer), up to a bound.

        `stream` is the body's one iterator, partly read: a second `request.stream()` raises
        "Stream consumed" when the chunk that crossed the limit was the body's last."""
        async for chunk in stream:
            read += len(chunk)
            if read > _DRAIN_LIMIT:
                break

    async def _body(self, request: Any) -> "bytes | Any":
        chunks: list[bytes] = []
        size = 0
        stream = request.stream()
        async for chunk in stream:
            size += len(chunk)
            if size > self.max_body:
                chunks.clear()
                await self._drain(stream, size)
                return self._too_large(f"over {self.max_body} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def invocations(self, request: Any):
        from starlette.responses import StreamingResponse

        media = request.headers.get("content-type", "application/json")
        mime, _, parameters = media.partition(";")
        charset = parameters.strip().lower().removeprefix("charset=").strip('"') if parameters.strip() else "utf-8"
        if mime.strip().lower() != "application/json" or charset != "utf-8":
            return _error(415, f"the content type is {media!r}; send application/json (UTF-8)")
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await self._drain(request.stream(), 0)
            return self._too_large(f"{int(length)} bytes")
        try:
            await asyncio.wait_for(self._slots.acquire(), timeout=self.queue_timeout)
        except (asyncio.TimeoutError, TimeoutError):
            return _error(503, f"the server is busy: the request waited {self.queue_timeout:g} s for its turn; retry")
        streaming = False
        size = 0
        try:
            body = await self._body(request)
            if not isinstance(body, bytes):
                return body
            size = len(body)
            status, prepared = await _in_thread(self.prepare, body)
            del body
            if status != 200:
                return _error(status, prepared)
            answer = await self._build(prepared)
            del prepared
            if answer is None:
                return _error(500, "internal error while predicting; see the server log")
            streaming = True
            return StreamingResponse(self._send(answer, size), media_type="application/json")
        finally:
            if not streaming:
                self._slots.release()
                if size > TRIM_AFTER:
                    release_memory()

    def prepare(self, body: bytes) -> tuple[int, Any]:
        """(200, the checked table of sentences) or (4xx, a message) for a request body."""
        try:
            form, data = request_inputs(body)
            if form == "table":
                return 200, check_prediction_table(data, require_text=True)
            try:
                return 200, check_prediction_table(inputs_to_table(data), require_text=True)
            except (ValueError, TypeError) as exc:
                raise RequestError(400, f"inputs: {exc}") from None
        except RequestError as exc:
            return exc.status, exc.message
        except (ValueError, TypeError) as exc:
            return 400, str(exc)
        except Exception as exc:  # a fault of ours: logged with its traceback, reported without it
            logger.exception("reading the request failed")
            return 500, f"internal error ({type(exc).__name__}); see the server log"

    def predict_json(self, table: Any) -> bytes:
        """The prediction records of a checked table as JSON objects joined by commas (no brackets)."""
        try:
            out = predict_table(self.model, self.schema, table, require_text=True)
            text = out.to_json(orient="records", force_ascii=False, double_precision=15)
            return text[1:-1].encode("utf-8")
        finally:
            if tokenizer_cache_info()["size"] > TOKEN_CACHE_LIMIT:
                clear_tokenizer_cache()

    async def _build(self, table: Any) -> Any:
        """The whole answer to a checked table, a chunk of conversations at a time, in a spool
        (a file object at its start), or None after a fault of the server (logged with its traceback)."""
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY, prefix="psyattrs-answer-")
        try:
            spool.write(b'{"predictions": [')
            for k, (start, stop) in enumerate(conversation_chunks(table["doc_id"], self.chunk_rows)):
                async with self._model_turns:
                    part = await _in_thread(self.predict_json, table.iloc[start:stop])
                spool.write((b"," if k and part else b"") + part)
                del part
            spool.write(b"]}")
            spool.seek(0)
            return spool
        except Exception:  # a fault of ours: a 500, nothing of the answer sent
            logger.exception("prediction failed")
            spool.close()
            return None
        except BaseException:  # the request was cancelled (client gone, server stopping)
            spool.close()
            raise

    async def _send(self, answer: Any, size: int):
        """The bytes of a built answer; the request's slot is released at the end (or when the
        client goes away)."""
        try:
            while piece := answer.read(SEND_PIECE):
                yield piece
        finally:
            answer.close()
            self._slots.release()
            if size > TRIM_AFTER:
                release_memory()
