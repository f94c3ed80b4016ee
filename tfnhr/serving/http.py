"""The HTTP front of the recognition service: routes, request limits, JSON answers, access log.

Routes: ``POST /recognize`` (a raw image or ``multipart/form-data`` files, see
:mod:`tfnhr.serving.payload`), ``POST /recognize/page`` (a page image and its PAGE-XML/ALTO file,
see :mod:`tfnhr.serving.pages`; answered with the filled file) and ``GET /health``. Every other
answer is JSON; every answer has an HTTP status line and closes the connection (one request per connection, so shutting down never waits on
idle keep-alive connections). A request thread decodes and checks its images, scales them to the
model's height, submits them to the :class:`~tfnhr.serving.batcher.Batcher` and waits for the
results; only the batcher's worker thread touches the model.

Under load (:class:`Capacity`): the kernel queues up to ``backlog`` connections not yet
accepted; at most ``max_requests`` recognition requests are admitted at once, and one more is
answered 503 with ``Retry-After`` (seconds, from the recent time per image) without reading its
body. Stalled clients (:class:`Limits`): the request line and headers must arrive within
``header_timeout_s`` and the body within ``body_timeout_s`` (totals, not per packet), else 408.
After every answer the server stops sending, reads and discards what the client still sends
(up to :data:`LINGER_SECONDS`), then closes: closing a socket with unread input makes the
kernel reset the connection, which can destroy the answer before the client reads it.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TextIO
from urllib.parse import urlsplit

import numpy as np

import tfnhr
from tfnhr.recognition.alignment import Reading
from tfnhr.data.images import unreadable_reason
from tfnhr.serving.batcher import Batcher, BatcherClosed
from tfnhr.serving.pages import fill_page_request
from tfnhr.serving.payload import RequestError, body_kind, image_parts, read_gray

Recognition = Reading
"""What the batch function returns per image: text, confidence in (0, 1] and (optionally) the
alignment, in the columns of the image the batcher was given."""


LINGER_SECONDS = 2.0
"""How long a closing connection waits for the client's rest of input (and end of stream)."""
LINGER_BYTES = 16_000_000
"""How much of the client's unread input a closing connection reads and discards at most."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """What ``POST /recognize`` accepts: body size (bytes), line-image size (pixels), page-image
    size (pixels, ``/recognize/page``), and the seconds a client may take to send its request
    line and headers, and its body (totals)."""

    max_body_bytes: int = 10_000_000
    max_height: int = 512
    max_width: int = 8192
    max_page_height: int = 12_000
    max_page_width: int = 12_000
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0


@dataclasses.dataclass(frozen=True)
class Capacity:
    """How many clients the server holds: ``backlog`` connections waiting to be accepted (the
    kernel caps it at ``net.core.somaxconn``) and ``max_requests`` recognition requests admitted
    at once (reading, waiting for the model or being recognized); more get 503. Of those,
    ``max_pages`` page requests hold their page image at once."""

    backlog: int = 1024
    max_requests: int = 256
    max_pages: int = 4
    """Page requests (``/recognize/page``) whose page image is decoded and cut at once; more wait
    their turn (a page image in memory is its pixel count in bytes, up to the page limit)."""


class _DeadlineSocketReader(io.RawIOBase):
    """The reading side of a socket where every ``recv`` waits at most until ``deadline()``
    (monotonic seconds): a client trickling bytes cannot stretch a total timeout."""

    def __init__(self, sock: socket.socket, deadline: Callable[[], float]) -> None:
        self._socket, self._deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        remaining = self._deadline() - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline passed")
        self._socket.settimeout(remaining)
        return self._socket.recv_into(buffer)


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
                 limits: Limits, access_log: TextIO, capacity: Capacity = Capacity()) -> None:
        self.request_queue_size = capacity.backlog  # read by server_activate() in __init__
        super().__init__(address, RecognitionHandler)
        self.batcher, self.prepare, self.limits, self.capacity = batcher, prepare, limits, capacity
        self.page_slots = threading.BoundedSemaphore(capacity.max_pages)
        self.model_name, self.charset_size = model_name, charset_size
        self.access_log = access_log
        self._lock = threading.Lock()
        self._requests_served = self._in_flight = self._refused = 0
        self._started = time.monotonic()

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of the bound socket (the real port when bound to port 0)."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def admit(self) -> bool:
        """Admit one more ``/recognize`` request if fewer than ``capacity.max_requests`` are in
        flight (then call :meth:`leave` when it is answered); else count it as refused."""
        with self._lock:
            if self._in_flight >= self.capacity.max_requests:
                self._refused += 1
                return False
            self._in_flight += 1
            return True

    def leave(self) -> None:
        """An admitted ``/recognize`` request was answered."""
        with self._lock:
            self._in_flight -= 1

    def retry_after(self) -> int:
        """Seconds a refused client should wait: the requests in flight times the recent
        seconds per image, at least 1."""
        return max(1, math.ceil(self._in_flight * self.batcher.seconds_per_item))

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
            "requests_refused": self._refused,
            "images_recognized": self.batcher.items_done,
            "batches_run": self.batcher.batches_run,
            "queue_length": self.batcher.queue_length,
            "uptime_s": round(time.monotonic() - self._started, 1),
            "batching": {"batch_pixels": self.batcher.budget, "max_wait_ms": self.batcher.max_wait_s * 1000},
            "capacity": dataclasses.asdict(self.capacity),
        }

    def handle_error(self, request: socket.socket, client_address: tuple) -> None:
        """A request thread failed outside the answer's own error handling: a client that went
        away (nothing to say) or a bug (one line on stderr, not the standard library's traceback)."""
        error = sys.exc_info()[1]
        if not isinstance(error, (ConnectionError, TimeoutError)):
            print(f"tfnhr serve: error while answering {client_address[0]}: {type(error).__name__}: {error}",
                  file=sys.stderr, flush=True)

    def shutdown_request(self, request: socket.socket) -> None:
        """Close a connection without resetting it: stop sending, then read and discard what
        the client still sends (a body never read, e.g. after 413 or 503) until it closes, for
        at most :data:`LINGER_SECONDS` and :data:`LINGER_BYTES`."""
        try:
            request.shutdown(socket.SHUT_WR)
            deadline, drained = time.monotonic() + LINGER_SECONDS, 0
            while drained < LINGER_BYTES and (remaining := deadline - time.monotonic()) > 0:
                request.settimeout(remaining)
                chunk = request.recv(65536)
                if not chunk:
                    break
                drained += len(chunk)
        except OSError:  # the client is gone or silent: nothing left to wait for
            pass
        self.close_request(request)

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
    default_request_version = "HTTP/1.0"  # a garbled request line still gets a status line

    ROUTES = {"/recognize": "POST", "/recognize/page": "POST", "/health": "GET"}

    def setup(self) -> None:
        super().setup()
        self._deadline = time.monotonic() + self.server.limits.header_timeout_s
        self._started = time.perf_counter()
        self.requestline, self.command, self.request_version = "", "", self.default_request_version
        self.rfile.close()
        self.rfile = io.BufferedReader(_DeadlineSocketReader(self.connection, lambda: self._deadline))

    def handle_one_request(self) -> None:
        """Read the request line and headers within ``limits.header_timeout_s`` (else 408),
        then answer (:meth:`_dispatch`); any method goes to the router."""
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if not self.raw_requestline:  # connected and closed without a request
                self.close_connection = True
                return
            if len(self.raw_requestline) > 65536:
                self._send_json(414, {"error": "the request line is longer than 65536 bytes"})
                return
            if not self.parse_request():  # parse_request answered already
                return
        except TimeoutError:
            self._send_json(408, {"error": f"the request line and headers did not arrive within "
                                           f"{self.server.limits.header_timeout_s:g} s"})
            return
        self._dispatch()

    def parse_request(self) -> bool:
        self._started = time.perf_counter()  # the request line has arrived
        return super().parse_request()

    def handle_expect_100(self) -> bool:
        """Refuse an upload that breaks a limit before the client sends its body."""
        if self._route() in ("/recognize", "/recognize/page") and self.command == "POST":
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
        elif not self.server.admit():
            retry = self.server.retry_after()
            self._send_json(503, {"error": f"the server is busy ({self.server.capacity.max_requests} requests in "
                                           f"flight): retry in {retry} s"}, {"Retry-After": str(retry)})
        else:
            try:
                if path == "/recognize/page":
                    status, answer = 200, self._recognize_page()
                else:
                    status, answer = 200, self._recognize()
            except RequestError as error:
                status, answer = error.status, {"error": str(error)}
            except Exception as error:  # noqa: BLE001  (a bug must still get an answer)
                status, answer = 500, {"error": f"{type(error).__name__}: {error}"}
            finally:
                self.server.leave()
            if isinstance(answer, tuple):
                self._send(status, *answer)
            else:
                self._send_json(status, answer)

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
        ``{"results": [...]}`` (with file names) for multipart. An image too small to read
        (:func:`~tfnhr.data.images.unreadable_reason`) gets an empty text, confidence 0 and a
        ``warning``, without a model call."""
        body = self._read_body(self._check_recognize_headers())
        content_type = self.headers.get("Content-Type")
        limits = self.server.limits
        parts = image_parts(body, content_type)
        grays = [read_gray(data, name, limits.max_height, limits.max_width) for name, data in parts]
        reasons = [unreadable_reason(gray) for gray in grays]
        items = [None if reason else self.server.prepare(gray) for gray, reason in zip(grays, reasons)]
        try:
            futures = [None if item is None else self.server.batcher.submit(item) for item in items]
        except BatcherClosed as error:
            raise RequestError(503, str(error)) from error
        results = []
        for (name, _), gray, item, future, reason in zip(parts, grays, items, futures, reasons):
            # spans in the columns of the image as sent, not as scaled for the model
            reading = self._result(future).scaled(gray.shape[1] / item.shape[1]) if future else Reading("", 0.0)
            results.append({"name": name, "text": reading.text, "confidence": reading.confidence,
                            **reading.spans_json(), "time_ms": round(self._elapsed_ms(), 1),
                            **({"warning": reason} if reason else {})})
        self.server.count_served()
        if body_kind(content_type) == "image":
            del results[0]["name"]
            return results[0]
        return {"results": results}

    @staticmethod
    def _result(future) -> Recognition:
        """A submitted image's result; a failed batch is a 500 (the server stays up)."""
        try:
            return future.result()
        except Exception as error:  # noqa: BLE001  (reported to the client)
            raise RequestError(500, f"recognition failed: {type(error).__name__}: {error}") from error

    def _read_lines(self, grays: list[np.ndarray]) -> list[Recognition]:
        """Recognize line images through the batcher, spans in the columns of ``grays``."""
        prepared = [self.server.prepare(gray) for gray in grays]
        try:
            futures = [self.server.batcher.submit(item) for item in prepared]
        except BatcherClosed as error:
            raise RequestError(503, str(error)) from error
        return [self._result(future).scaled(gray.shape[1] / item.shape[1])
                for gray, item, future in zip(grays, prepared, futures)]

    def _recognize_page(self) -> tuple[bytes, str, dict[str, str]]:
        """The filled PAGE-XML/ALTO file of a page request, its content type and the headers
        ``X-Lines-Recognized`` and ``X-Lines-Skipped`` (``kind=count,...``)."""
        body = self._read_body(self._check_recognize_headers())
        limits = self.server.limits
        with self.server.page_slots:
            filled = fill_page_request(body, self.headers.get("Content-Type"), self._read_lines,
                                       limits.max_page_height, limits.max_page_width)
        self.server.count_served()
        skipped = ",".join(f"{kind}={count}" for kind, count in filled.skipped.items())
        return filled.xml, "application/xml", {"X-Lines-Recognized": str(filled.lines), "X-Lines-Skipped": skipped or "0"}

    def _read_body(self, length: int) -> bytes:
        """The ``length`` bytes of the body, all within ``limits.body_timeout_s``:
        :class:`RequestError` 408 if they do not arrive in time, 400 if the client closes early."""
        self._deadline = time.monotonic() + self.server.limits.body_timeout_s
        chunks, received = [], 0
        try:
            while received < length:
                chunk = self.rfile.read1(min(length - received, 1 << 20))
                if not chunk:
                    raise RequestError(400, f"the body ended after {received} of {length} bytes")
                chunks.append(chunk)
                received += len(chunk)
        except TimeoutError:
            raise RequestError(408, f"the body did not arrive within {self.server.limits.body_timeout_s:g} s "
                                    f"({received} of {length} bytes came)") from None
        return b"".join(chunks)

    def _elapsed_ms(self) -> float:
        return (time.perf_counter() - getattr(self, "_started", time.perf_counter())) * 1000

    def _send_json(self, status: int, answer: dict, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(answer).encode() + b"\n", "application/json", headers)

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self._body_bytes = len(body)
        self.connection.settimeout(self.server.limits.body_timeout_s)  # a client that does not read
        self.send_response(status)
        for name, value in {"Content-Type": content_type, "Content-Length": str(len(body)),
                            "Connection": "close", **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own errors (bad request line, unsupported method, ...) as JSON."""
        self._send_json(code, {"error": message or self.responses.get(code, ("error",))[0]})

    def log_error(self, format: str, *args) -> None:
        """Nothing: every answer, errors included, has its one access-log line (:meth:`log_request`)."""

    def log_request(self, code: int = 0, size: int | str = "-") -> None:
        """One access-log line per answer, common-log style plus the time in ms:
        ``client - - [date] "request line" status bytes time_ms``."""
        date = time.strftime("%d/%b/%Y:%H:%M:%S %z")
        self.server.write_log(f"{self.client_address[0]} - - [{date}] {json.dumps(self.requestline)} "
                              f"{int(code)} {getattr(self, '_body_bytes', '-')} {self._elapsed_ms():.1f}")
