"""The HTTP front of the recognition service: routes, request limits, JSON answers, access log.

Routes: ``POST /recognize`` (a raw image or ``multipart/form-data`` files, see
:mod:`tfnhr.service.payload`) and ``GET /health``. Every answer is JSON and closes the
connection (one request per connection, so shutting down never waits on idle keep-alive
connections). A request thread decodes and checks its images, scales them to the model's
height, submits them to the :class:`~tfnhr.service.batcher.Batcher` and waits for the results;
only the batcher's worker thread touches the model.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TextIO
from urllib.parse import urlsplit

import numpy as np

import tfnhr
from tfnhr.service.batcher import Batcher, BatcherClosed
from tfnhr.service.payload import RequestError, body_kind, image_parts, read_gray

Recognition = tuple[str, float]
"""What the batch function returns per image: (text, confidence in (0, 1])."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """What ``POST /recognize`` accepts: body size (bytes) and image size (pixels)."""

    max_body_bytes: int = 10_000_000
    max_height: int = 512
    max_width: int = 8192


class RecognitionServer(ThreadingHTTPServer):
    """One thread per request; :meth:`server_close` waits for the requests in flight.

    ``prepare`` turns a decoded uint8 ``[H, W]`` gray into the batcher's item (scaling to the
    model's height, on the request thread, so that the batch budget counts the pixels the model
    sees); ``batcher`` maps items to :data:`Recognition` results. ``model_name`` and
    ``charset_size`` are shown by ``/health``; access-log lines go to ``access_log``."""

    daemon_threads = False
    block_on_close = True

    def __init__(self, address: tuple[str, int], batcher: Batcher[np.ndarray, Recognition],
                 prepare: Callable[[np.ndarray], np.ndarray], *, model_name: str, charset_size: int,
                 limits: Limits, access_log: TextIO) -> None:
        super().__init__(address, RecognitionHandler)
        self.batcher, self.prepare, self.limits = batcher, prepare, limits
        self.model_name, self.charset_size = model_name, charset_size
        self.access_log = access_log
        self._lock = threading.Lock()
        self._requests_served = self._in_flight = 0
        self._started = time.monotonic()

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of the bound socket (the real port when bound to port 0)."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def count_in_flight(self, change: int) -> None:
        """A ``/recognize`` request starts (+1) or is answered (-1)."""
        with self._lock:
            self._in_flight += change

    def count_served(self) -> None:
        """One more ``/recognize`` request answered with results."""
        with self._lock:
            self._requests_served += 1

    def health(self) -> dict:
        """The ``GET /health`` answer (``uptime_s`` in seconds)."""
        return {
            "status": "ok",
            "model": self.model_name,
            "charset_size": self.charset_size,
            "requests_served": self._requests_served,
            "requests_in_flight": self._in_flight,
            "images_recognized": self.batcher.items_done,
            "batches_run": self.batcher.batches_run,
            "queue_length": self.batcher.queue_length,
            "uptime_s": round(time.monotonic() - self._started, 1),
            "batching": {"batch_pixels": self.batcher.budget, "max_wait_ms": self.batcher.max_wait_s * 1000},
        }

    def write_log(self, line: str) -> None:
        """Append one line to the access log (thread-safe, flushed)."""
        with self._lock:
            self.access_log.write(line + "\n")
            self.access_log.flush()

    def serve_until(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set, then shut down gracefully: stop accepting, answer the
        requests in flight (the batcher runs their images), then stop the batcher."""
        loop = threading.Thread(target=self.serve_forever, name="http-accept", daemon=True)
        loop.start()
        stop.wait()
        self.shutdown()
        self.server_close()
        self.batcher.close()


class RecognitionHandler(BaseHTTPRequestHandler):
    """Routes one request; every answer is a JSON object, errors ``{"error": message}``."""

    server: RecognitionServer
    server_version = f"tfnhr/{tfnhr.__version__}"
    protocol_version = "HTTP/1.1"  # for "Expect: 100-continue"; every answer still closes
    timeout = 30  # seconds a client may stall while sending its request

    ROUTES = {"/recognize": "POST", "/health": "GET"}

    def parse_request(self) -> bool:
        self._started = time.perf_counter()  # the request line has arrived
        return super().parse_request()

    def handle_expect_100(self) -> bool:
        """Refuse an upload that breaks a limit before the client sends its body."""
        if self._route() == "/recognize" and self.command == "POST":
            try:
                self._check_recognize_headers()
            except RequestError as error:
                self._send_json(error.status, {"error": str(error)})
                return False
        return super().handle_expect_100()

    def _route(self) -> str:
        return urlsplit(self.path).path

    def _dispatch(self) -> None:
        """Answer any method on any path: 404, 405, the health report or a recognition."""
        path, method = self._route(), self.command
        allowed = self.ROUTES.get(path)
        if allowed is None:
            self._send_json(404, {"error": f"no such path: {path} (try POST /recognize or GET /health)"})
        elif method != allowed:
            self._send_json(405, {"error": f"{path} takes {allowed}, not {method}"}, {"Allow": allowed})
        elif path == "/health":
            self._send_json(200, self.server.health())
        else:
            self.server.count_in_flight(+1)
            try:
                status, answer = 200, self._recognize()
            except RequestError as error:
                status, answer = error.status, {"error": str(error)}
            except Exception as error:  # noqa: BLE001  (a bug must still get an answer)
                status, answer = 500, {"error": f"{type(error).__name__}: {error}"}
            finally:
                self.server.count_in_flight(-1)
            self._send_json(status, answer)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _dispatch

    def _check_recognize_headers(self) -> int:
        """The body length (bytes) of a ``POST /recognize``, checked before reading the body."""
        body_kind(self.headers.get("Content-Type"))
        header = self.headers.get("Content-Length")
        if header is None:
            raise RequestError(411, "Content-Length required")
        try:
            length = int(header)
        except ValueError:
            length = -1
        if length < 0:
            raise RequestError(400, f"bad Content-Length: {header!r}")
        if length > self.server.limits.max_body_bytes:
            raise RequestError(413, f"the body has {length} bytes, more than the limit of "
                                    f"{self.server.limits.max_body_bytes}")
        if length == 0:
            raise RequestError(400, "empty body: send an image")
        return length

    def _recognize(self) -> dict:
        """Read, check and recognize the images of the body; the answer of a raw image, or
        ``{"results": [...]}`` (with file names) for multipart."""
        length = self._check_recognize_headers()
        body = self.rfile.read(length)
        if len(body) < length:
            raise RequestError(400, f"the body ended after {len(body)} of {length} bytes")
        content_type = self.headers.get("Content-Type")
        limits = self.server.limits
        parts = image_parts(body, content_type)
        items = [self.server.prepare(read_gray(data, name, limits.max_height, limits.max_width))
                 for name, data in parts]
        try:
            futures = [self.server.batcher.submit(item) for item in items]
        except BatcherClosed as error:
            raise RequestError(503, str(error)) from error
        results = []
        for (name, _), future in zip(parts, futures):
            try:
                text, confidence = future.result()
            except Exception as error:  # noqa: BLE001  (reported to the client, the server stays up)
                raise RequestError(500, f"recognition failed: {type(error).__name__}: {error}") from error
            results.append({"name": name, "text": text, "confidence": confidence,
                            "time_ms": round(self._elapsed_ms(), 1)})
        self.server.count_served()
        if body_kind(content_type) == "image":
            del results[0]["name"]
            return results[0]
        return {"results": results}

    def _elapsed_ms(self) -> float:
        return (time.perf_counter() - getattr(self, "_started", time.perf_counter())) * 1000

    def _send_json(self, status: int, answer: dict, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(answer).encode() + b"\n"
        self._body_bytes = len(body)
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", "Content-Length": str(len(body)),
                            "Connection": "close", **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own errors (bad request line, unsupported method, ...) as JSON."""
        self._send_json(code, {"error": message or self.responses.get(code, ("error",))[0]})

    def log_request(self, code: int = 0, size: int | str = "-") -> None:
        """One access-log line per answer, common-log style plus the time in ms:
        ``client - - [date] "request line" status bytes time_ms``."""
        date = time.strftime("%d/%b/%Y:%H:%M:%S %z")
        self.server.write_log(f"{self.client_address[0]} - - [{date}] {json.dumps(self.requestline)} "
                              f"{int(code)} {getattr(self, '_body_bytes', '-')} {self._elapsed_ms():.1f}")
