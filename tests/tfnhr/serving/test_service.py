"""``tfnhr serve``: the batcher on its own (a plain callable as the "model"), the HTTP layer
in-process with a failing batch function, and a real server subprocess on loopback serving a
tiny trained recognizer to real HTTP clients (single images, multipart, concurrent clients,
bad requests, graceful SIGTERM, access log)."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import re
import signal
import socket
import struct
import subprocess
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import keras
import numpy as np
import pytest
from PIL import Image

from tfnhr.recognition.alignment import Alignment, Reading, Span
from tfnhr.charset import Charset
from tfnhr.cli import main
from tfnhr.data.synthetic import handwriting
from tfnhr.data.images import decode_gray
from tfnhr.data.samples import TextImageSet
from tfnhr.data.dataset import make_dataset
from tfnhr.decoding import greedy_decode_batch
from tfnhr.recognition.transcriber import Transcriber
from tfnhr.models import build_recognizer
from tfnhr.serving.batcher import Batcher, BatcherClosed
from tfnhr.serving.http import Capacity, Limits, RecognitionServer
from tfnhr.serving.payload import RAW_BODY_NAME, RequestError, image_parts
from tests.helpers.environment import VENV_BIN

WORDS = ("cab", "bad", "dace")


# --- the batcher, without HTTP or a model ---------------------------------------------------

class Recorder:
    """A batch function ``[(label, size)] -> [label.upper()]`` that records its batches and
    blocks on the batch ``[("hold", 1)]`` until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.started: list[float] = []
        self.release = threading.Event()

    def __call__(self, items: list[tuple[str, int]]) -> list[str]:
        self.started.append(time.monotonic())
        self.batches.append([label for label, _ in items])
        if self.batches[-1] == ["hold"]:
            assert self.release.wait(10)
        return [label.upper() for label, _ in items]

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + 10
        while len(self.batches) < count:
            assert time.monotonic() < deadline, self.batches
            time.sleep(0.005)


def size(item: tuple[str, int]) -> int:
    return item[1]


def test_batches_fill_the_pixel_budget_in_arrival_order():
    """While the worker is busy, items queue up; then each batch takes queued items in order
    while they fit the budget, and an item larger than the budget runs alone."""
    recorder = Recorder()
    with Batcher(recorder, size, budget=10, max_wait_s=0.05) as batcher:
        held = batcher.submit(("hold", 1))
        recorder.wait_for(1)
        items = [("b", 4), ("c", 4), ("d", 4), ("e", 12), ("f", 1), ("g", 9)]
        futures = [batcher.submit(item) for item in items]
        assert batcher.queue_length == len(items)
        recorder.release.set()
        assert [f.result(10) for f in futures] == ["B", "C", "D", "E", "F", "G"] and held.result() == "HOLD"
        assert recorder.batches == [["hold"], ["b", "c"], ["d"], ["e"], ["f", "g"]]
        assert batcher.batches_run == 5 and batcher.items_done == 7 and batcher.queue_length == 0


def test_batches_wait_for_more_items_only_within_the_window():
    recorder = Recorder()
    with Batcher(recorder, size, budget=100, max_wait_s=0.4) as batcher:
        started = time.monotonic()
        first = batcher.submit(("x", 1))
        time.sleep(0.1)
        second = batcher.submit(("y", 1))
        assert first.result(10) == "X" and second.result(10) == "Y"
        assert recorder.started[0] - started >= 0.39  # the budget was not full: it waited the window out
        batcher.submit(("z", 1)).result(10)
        assert recorder.batches == [["x", "y"], ["z"]]
    recorder = Recorder()
    with Batcher(recorder, size, budget=100, max_wait_s=0) as batcher:
        batcher.submit(("hold", 1))
        recorder.wait_for(1)
        futures = [batcher.submit((label, 1)) for label in "abc"]
        recorder.release.set()
        assert [f.result(10) for f in futures] == ["A", "B", "C"]
        assert recorder.batches == [["hold"], ["a", "b", "c"]]  # no wait, but queued items join
        started = time.monotonic()
        batcher.submit(("alone", 1)).result(10)
        assert time.monotonic() - started < 0.3


def test_results_and_errors_go_back_to_their_own_requests():
    def run(items: list[tuple[str, int]]) -> list[str]:
        if any(label == "boom" for label, _ in items):
            raise RuntimeError("boom in batch")
        if any(label == "short" for label, _ in items):
            return []
        return [label * 2 for label, _ in items]

    with Batcher(run, size, budget=5, max_wait_s=0.002) as batcher:
        with ThreadPoolExecutor(8) as pool:
            labels = [f"r{i}" for i in range(200)]
            results = list(pool.map(lambda label: batcher.submit((label, 1)).result(10), labels))
        assert results == [label * 2 for label in labels]
        assert batcher.batches_run < 200 and batcher.items_done == 200
        with pytest.raises(RuntimeError, match="boom in batch"):
            batcher.submit(("boom", 5)).result(10)
        with pytest.raises(RuntimeError, match="returned 0 results for 1 items"):
            batcher.submit(("short", 5)).result(10)
        assert batcher.submit(("ok", 1)).result(10) == "okok"  # the worker carries on


def test_close_finishes_queued_items_then_refuses_new_ones():
    recorder = Recorder()
    batcher = Batcher(recorder, size, budget=2, max_wait_s=0.01)
    batcher.submit(("hold", 1))
    recorder.wait_for(1)
    futures = [batcher.submit((label, 1)) for label in "abcde"]
    closing = threading.Thread(target=batcher.close)
    closing.start()
    time.sleep(0.05)
    assert closing.is_alive()  # waits for the queued items
    recorder.release.set()
    closing.join(10)
    assert not closing.is_alive() and [f.result(0) for f in futures] == list("ABCDE")
    with pytest.raises(BatcherClosed):
        batcher.submit(("x", 1))


# --- helpers for the HTTP tests ---------------------------------------------------------------

def encode(gray: np.ndarray, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(gray).save(buffer, format=fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` gray pixels, with almost no pixel data
    (a decompression bomb's calling card; decoding it would need width * height bytes)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
            + chunk(b"IEND", b""))


def multipart(files: list[tuple[str, bytes, str]], boundary: str = "tfnhr-test-boundary") -> tuple[bytes, str]:
    """(body, content type) of a multipart/form-data upload of ``(filename, data, type)`` files
    plus one plain form field."""
    body = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file{i}"; filename="{name}"\r\n'
        f"Content-Type: {kind}\r\n\r\n".encode() + data + b"\r\n" for i, (name, data, kind) in enumerate(files))
    body += f'--{boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n--{boundary}--\r\n'.encode()
    return body, f"multipart/form-data; boundary={boundary}"


def test_multipart_parts_come_back_byte_for_byte():
    """Binary file parts full of CR, LF, dashes and NULs survive the email parser unchanged;
    form fields without a filename are skipped; other content types are refused."""
    rng = np.random.default_rng(0)
    alphabet = np.frombuffer(b"\r\n-\0\xff", np.uint8)
    for trial in range(50):
        files = [(f"f{trial}-{i}.png", rng.choice(alphabet, int(rng.integers(0, 200))).tobytes()
                  + rng.integers(0, 256, int(rng.integers(0, 200)), np.uint8).tobytes(), "image/png")
                 for i in range(2)]
        body, content_type = multipart(files)
        assert image_parts(body, content_type) == [(name, data) for name, data, _ in files]
    assert image_parts(b"raw", "Image/PNG; q=1") == [(RAW_BODY_NAME, b"raw")] == image_parts(b"raw", None)
    with pytest.raises(RequestError) as refused:
        image_parts(b"raw", "application/json")
    assert refused.value.status == 415
    with pytest.raises(RequestError) as malformed:
        image_parts(b"--b\r\nContent-Disposition: form-data; filename=x\r\n\r\nno end",
                    "multipart/form-data; boundary=b")
    assert malformed.value.status == 400


class Client:
    """Requests to one server; counts them (every one must leave an access-log line)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.sent = 0
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self.sent += 1

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            self._count()
            assert response.getheader("Content-Type") == "application/json"
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    def raw(self, head: bytes, timeout: float = 10) -> tuple[int, dict]:
        """Send ``head`` (request line and headers, no body) on a bare socket; the answer."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as sock:
            sock.sendall(head)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        self._count()
        status_line, _, rest = answer.partition(b"\r\n")
        return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


# --- the HTTP layer in-process, with a batch function that fails on demand ------------------

def test_errors_of_the_batch_function_answer_500_and_the_server_stays_up():
    failing = threading.Event()
    failing.set()

    def run(grays: list[np.ndarray]) -> list[Reading]:
        if failing.is_set():
            raise RuntimeError("the model fell over")
        return [Reading(f"{gray.shape[1]}x{gray.shape[0]}", 0.5) for gray in grays]

    log = io.StringIO()
    server = RecognitionServer(("127.0.0.1", 0), Batcher(run, np.size, budget=10_000, max_wait_s=0),
                               lambda gray: gray[:, :5], model_name="fake", charset_size=3,
                               limits=Limits(), access_log=log)
    stop = threading.Event()
    serving = threading.Thread(target=server.serve_until, args=(stop,))
    serving.start()
    client = Client(*server.server_address[:2])
    image = encode(np.full((10, 9), 255, np.uint8), "PNG")
    assert client.request("POST", "/recognize", image, {"Content-Type": "image/png"}) == (
        500, {"error": "recognition failed: RuntimeError: the model fell over"})
    failing.clear()
    status, answer = client.request("POST", "/recognize", image, {"Content-Type": "image/png"})
    assert status == 200 and answer["text"] == "5x10"  # the request thread's ``prepare`` ran
    assert client.request("GET", "/health")[1]["requests_served"] == 1
    stop.set()
    serving.join(10)
    assert not serving.is_alive()
    assert [line.split()[-3] for line in log.getvalue().splitlines()] == ["500", "200", "200"]


def test_recognize_answers_words_and_chars_in_the_columns_of_the_image_sent():
    """The batch function sees the image as ``prepare`` scaled it (every second column here); the
    answer's spans are mapped back to the columns of the image as sent (x 2)."""
    chars = (Span("a", 0.9, 0.0, 1.5), Span(" ", 0.7, 1.5, 2.0), Span("b", 0.8, 2.0, 5.0))
    alignment = Alignment("a b", chars, (Span("a", 0.9, 0.0, 1.5), Span("b", 0.8, 2.0, 5.0)))
    server = RecognitionServer(("127.0.0.1", 0), Batcher(lambda grays: [Reading("a b", 0.8, alignment)] * len(grays),
                                                         np.size, budget=10_000, max_wait_s=0),
                               lambda gray: gray[:, ::2], model_name="fake", charset_size=3, limits=Limits(),
                               access_log=io.StringIO())
    stop = threading.Event()
    serving = threading.Thread(target=server.serve_until, args=(stop,))
    serving.start()
    try:
        status, answer = Client(*server.server_address[:2]).request(
            "POST", "/recognize", encode(np.full((10, 10), 255, np.uint8), "PNG"), {"Content-Type": "image/png"})
    finally:
        stop.set()
        serving.join(10)
    assert status == 200
    assert answer["words"] == [{"text": "a", "confidence": 0.9, "x0": 0.0, "x1": 3.0},
                               {"text": "b", "confidence": 0.8, "x0": 4.0, "x1": 10.0}]
    assert [(c["text"], c["x0"], c["x1"]) for c in answer["chars"]] == [("a", 0.0, 3.0), (" ", 3.0, 4.0), ("b", 4.0, 10.0)]


@contextlib.contextmanager
def in_process_server(run, limits: Limits = Limits(), capacity: Capacity = Capacity()):
    """A :class:`RecognitionServer` on a free port with ``run`` as the batch function (``prepare``
    keeps the image); yields ``(client, server, access log)`` and shuts the server down after."""
    log = io.StringIO()
    server = RecognitionServer(("127.0.0.1", 0), Batcher(run, np.size, budget=10_000, max_wait_s=0.005),
                               lambda gray: gray, model_name="fake", charset_size=3, limits=limits,
                               capacity=capacity, access_log=log)
    stop = threading.Event()
    serving = threading.Thread(target=server.serve_until, args=(stop,))
    serving.start()
    try:
        yield Client(*server.server_address[:2]), server, log
    finally:
        stop.set()
        serving.join(30)
        assert not serving.is_alive()


def sizes(grays: list[np.ndarray]) -> list[Reading]:
    """A fake recognizer: each image's ``WxH`` after 2 ms per image."""
    time.sleep(0.002 * len(grays))
    return [Reading(f"{gray.shape[1]}x{gray.shape[0]}", 0.5) for gray in grays]


ACCESS_LINE = (r'127\.0\.0\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] '
               r'"[^"]*" \d{3} \d+ \d+\.\d')
"""An access-log line: client, date, request line (JSON string), status, body bytes, ms."""


def test_a_burst_of_100_simultaneous_clients_all_get_an_http_status():
    """Python's default listen queue of 5 reset most of such a burst; every client must get an
    HTTP answer (here 200: the default capacity admits them all)."""
    image = encode(np.full((10, 11), 255, np.uint8), "PNG")
    with in_process_server(sizes) as (client, server, log):
        start = threading.Barrier(100)

        def post(_) -> int:
            start.wait()
            return client.request("POST", "/recognize", image, {"Content-Type": "image/png"})[0]

        with ThreadPoolExecutor(100) as pool:
            statuses = list(pool.map(post, range(100)))
    assert statuses == [200] * 100
    lines = log.getvalue().splitlines()
    assert len(lines) == 100 and all(re.fullmatch(ACCESS_LINE, line) for line in lines)


def test_past_capacity_clients_get_503_with_retry_after_and_no_reset():
    release = threading.Event()

    def held(grays):
        assert release.wait(20)
        return sizes(grays)

    image = encode(np.full((10, 11), 255, np.uint8), "PNG")
    with in_process_server(held, capacity=Capacity(max_requests=2)) as (client, server, log):
        with ThreadPoolExecutor(2) as pool:
            admitted = [pool.submit(client.request, "POST", "/recognize", image, {}) for _ in range(2)]
            deadline = time.monotonic() + 20
            while client.request("GET", "/health")[1]["requests_in_flight"] < 2:
                assert time.monotonic() < deadline, [future.result() for future in admitted if future.done()]
                time.sleep(0.01)
            for _ in range(3):  # the body is never read, yet the answer arrives intact
                connection = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
                connection.request("POST", "/recognize", image * 50, {"Content-Type": "image/png"})
                response = connection.getresponse()
                assert response.status == 503 and int(response.getheader("Retry-After")) >= 1
                assert "busy (2 requests in flight)" in json.loads(response.read())["error"]
                connection.close()
            release.set()
            assert [future.result(20)[0] for future in admitted] == [200, 200]
        assert client.request("GET", "/health")[1]["requests_refused"] == 3
    assert [line.split()[-3] for line in log.getvalue().splitlines()].count("503") == 3


@pytest.mark.slow
def test_stalled_and_trickling_clients_get_408_within_the_timeouts():
    limits = Limits(header_timeout_s=0.6, body_timeout_s=0.6)
    with in_process_server(sizes, limits=limits) as (client, server, log):
        address = server.server_address[:2]
        cases = {
            "silent": [b""],
            "headers stop": [b"POST /recognize HTTP/1.1\r\nHost: x\r\n"],
            "trickled headers": [b"POST /recognize HTTP/1.1\r\n"] + [b"X-Slow: 1\r\n"] * 40,
            "body stops": [b"POST /recognize HTTP/1.1\r\nContent-Type: image/png\r\nContent-Length: 100\r\n\r\n12345"],
        }
        for name, pieces in cases.items():
            with socket.create_connection(address, timeout=10) as sock:
                started = time.monotonic()
                for piece in pieces:  # one piece every 0.1 s: each arrives within any per-packet timeout
                    try:
                        sock.sendall(piece)
                    except OSError:
                        break
                    time.sleep(0.1)
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
                elapsed = time.monotonic() - started
            status_line, _, rest = answer.partition(b"\r\n")
            assert status_line.split()[1] == b"408", (name, answer)
            assert "did not arrive within 0.6 s" in json.loads(rest.partition(b"\r\n\r\n")[2])["error"], name
            assert elapsed < 0.6 + 0.1 * len(pieces) + 1.5, (name, elapsed)
    lines = log.getvalue().splitlines()
    assert [line.split()[-3] for line in lines] == ["408"] * 4
    assert all(re.fullmatch(ACCESS_LINE, line) for line in lines), lines


def test_an_image_too_small_to_read_gets_an_empty_text_and_a_warning_not_a_guess():
    with in_process_server(sizes) as (client, server, log):
        body, content_type = multipart([("dot.png", encode(np.zeros((1, 1), np.uint8), "PNG"), "image/png"),
                                        ("line.png", encode(np.full((10, 30), 255, np.uint8), "PNG"), "image/png")])
        status, answer = client.request("POST", "/recognize", body, {"Content-Type": content_type})
        assert status == 200
        dot, line = answer["results"]
        assert (dot["text"], dot["confidence"]) == ("", 0.0) and dot["warning"].startswith("too small to read: 1x1 px")
        assert line["text"] == "30x10" and "warning" not in line
        assert client.request("GET", "/health")[1]["images_recognized"] == 1  # the dot never reached the model


def test_a_garbled_request_line_gets_a_status_line_and_a_log_line():
    with in_process_server(sizes) as (client, server, log):
        status, answer = client.raw(b"HELLO\r\n\r\n")
        assert status == 400 and "Bad request syntax" in answer["error"]
    assert re.fullmatch(ACCESS_LINE, log.getvalue().strip()) and '"HELLO" 400' in log.getvalue()


# --- a real ``tfnhr serve`` on a tiny trained model -----------------------------------------

@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """A tiny recognizer fitted on three rendered words (it reads them back), saved, and
    served by ``tfnhr serve --port 0`` in a subprocess; yields a namespace with the client,
    the in-process model, the word images, the process and its access log."""
    root = tmp_path_factory.mktemp("serve")
    keras.utils.set_random_seed(1)
    font = handwriting.font_paths("train")[0]
    images = [np.asarray(Image.fromarray(handwriting.render(text, font, np.random.default_rng(i)))
                         .resize((16 * len(text), 24))) for i, text in enumerate(WORDS)]
    charset = Charset.from_texts(WORDS)
    model = build_recognizer(charset, mdlstm_units=(4, 16), conv_filters=(8,), block=(2, 2), dropout=0.0,
                             input_height=24)
    model.compile(optimizer=keras.optimizers.Adam(0.01, global_clipnorm=10))
    model.fit(make_dataset(TextImageSet(images, list(WORDS), list(WORDS)), charset, batch_pixels=10_000)
              .repeat(10), epochs=4, verbose=0, shuffle=False)
    assert greedy_decode_batch(Transcriber(model).scores(images), charset) == list(WORDS)
    model.save(root / "model.keras")
    log, errors = root / "access.log", open(root / "stderr.txt", "w")
    process = subprocess.Popen(
        [str(VENV_BIN / "tfnhr"), "serve", "--model", str(root / "model.keras"), "--port", "0",
         "--access-log", str(log)], stdout=subprocess.PIPE, stderr=errors, text=True)
    line = process.stdout.readline()
    match = re.fullmatch(r"serving \S+ on http://([\d.]+):(\d+) \(batching: .*\)\n", line)
    assert match, (line, (root / "stderr.txt").read_text()[-3000:])
    yield SimpleNamespace(client=Client(match[1], int(match[2])), model=model, images=dict(zip(WORDS, images)),
                          process=process, log=log)
    if process.poll() is None:
        process.kill()
    process.wait(30)
    errors.close()


def reference(service, gray: np.ndarray) -> str:
    """Greedy decoding of the in-process model's scores (independent of the server)."""
    return greedy_decode_batch(Transcriber(service.model).scores([gray]), service.model.charset)[0]


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_a_raw_image_body_is_recognized(service, fmt):
    word = "dace"
    data = encode(service.images[word], fmt)
    status, answer = service.client.request("POST", "/recognize", data, {"Content-Type": f"image/{fmt.lower()}"})
    assert status == 200, answer
    assert set(answer) == {"text", "confidence", "words", "chars", "time_ms"}
    assert answer["text"] == reference(service, decode_gray(data)) == word
    assert [span["text"] for span in answer["words"]] == [word] and "".join(c["text"] for c in answer["chars"]) == word
    width = decode_gray(data).shape[1]  # spans in the columns of the image sent
    assert all(0 <= c["x0"] < c["x1"] <= width for c in answer["chars"])
    assert 0 < answer["confidence"] <= 1 and answer["time_ms"] > 0


@pytest.mark.subprocess
@pytest.mark.slow
def test_multipart_files_are_recognized_in_order(service):
    body, content_type = multipart([("first.png", encode(service.images["bad"], "PNG"), "image/png"),
                                    ("second.jpg", encode(service.images["cab"], "JPEG"), "image/jpeg")])
    status, answer = service.client.request("POST", "/recognize", body, {"Content-Type": content_type})
    assert status == 200, answer
    assert [(r["name"], r["text"]) for r in answer["results"]] == [("first.png", "bad"), ("second.jpg", "cab")]
    assert all(0 < r["confidence"] <= 1 and r["time_ms"] > 0 for r in answer["results"])


@pytest.mark.subprocess
@pytest.mark.slow
def test_concurrent_requests_are_batched(service):
    client = service.client
    before = client.request("GET", "/health")[1]
    words = [WORDS[i % len(WORDS)] for i in range(12)]
    bodies = {word: encode(service.images[word], "PNG") for word in WORDS}
    start = threading.Barrier(len(words))

    def recognize(word: str) -> str:
        start.wait()
        status, answer = client.request("POST", "/recognize", bodies[word], {"Content-Type": "image/png"})
        assert status == 200, answer
        return answer["text"]

    with ThreadPoolExecutor(len(words)) as pool:
        assert list(pool.map(recognize, words)) == words
    after = client.request("GET", "/health")[1]
    assert after["requests_served"] - before["requests_served"] == len(words)
    assert after["images_recognized"] - before["images_recognized"] == len(words)
    assert after["batches_run"] - before["batches_run"] < len(words) / 2, (before, after)


@pytest.mark.subprocess
@pytest.mark.slow
def test_health(service):
    status, answer = service.client.request("GET", "/health")
    assert status == 200
    assert answer["status"] == "ok" and answer["model"].endswith("model.keras")
    assert answer["charset_size"] == len(service.model.charset) and answer["queue_length"] == 0
    assert answer["requests_in_flight"] == 0 and answer["uptime_s"] > 0
    assert answer["batching"] == {"batch_pixels": 400_000, "max_wait_ms": 10.0}


@pytest.mark.subprocess
@pytest.mark.slow
def test_bad_requests_get_json_errors(service):
    client = service.client
    png = encode(service.images["cab"], "PNG")
    no_files, form_type = multipart([])
    cases = {
        "empty body": (400, "POST", "/recognize", b"", {"Content-Type": "image/png"}),
        "not an image": (400, "POST", "/recognize", b"hello, world", {"Content-Type": "image/png"}),
        "text/plain": (415, "POST", "/recognize", png, {"Content-Type": "text/plain"}),
        "too tall": (413, "POST", "/recognize", encode(np.full((600, 40), 255, np.uint8), "PNG"), {}),
        "no file parts": (400, "POST", "/recognize", no_files, {"Content-Type": form_type}),
        "unknown path": (404, "GET", "/nowhere", None, {}),
        "GET /recognize": (405, "GET", "/recognize", None, {}),
        "POST /health": (405, "POST", "/health", png, {}),
    }
    for name, (expected, method, path, body, headers) in cases.items():
        status, answer = client.request(method, path, body, headers)
        assert (status, set(answer)) == (expected, {"error"}), (name, answer)
    assert "not a readable image" in client.request("POST", "/recognize", b"hello", {})[1]["error"]
    status, answer = client.request("POST", "/recognize", png_header_only(9000, 10), {})
    assert status == 413 and "9000x10 px is larger than the limit of 8192x512 px" in answer["error"]
    status, answer = client.request("POST", "/recognize", png_header_only(100_000, 100_000), {})
    assert status == 413 and "more pixels than the limit of 8192x512 px" in answer["error"]  # not PIL's text
    status, _ = client.raw(b"POST /recognize HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n\r\n")
    assert status == 411  # no Content-Length


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_too_large_body_is_refused_without_being_read(service):
    """The server answers 413 from the headers alone: the body is never sent here, so a server
    that tried to read it would stall until the socket timeout."""
    for expect in ("", "Expect: 100-continue\r\n"):
        started = time.monotonic()
        status, answer = service.client.raw(
            f"POST /recognize HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 50000000\r\n"
            f"{expect}\r\n".encode(), timeout=5)
        assert status == 413 and "more than the limit of 10000000" in answer["error"]
        assert time.monotonic() - started < 5


def test_bad_model_path_exits_2(tmp_path, capsys):
    assert main(["serve", "--model", str(tmp_path / "missing.keras"), "--port", "0"]) == 2
    assert capsys.readouterr().err.startswith("tfnhr serve: error:")


@pytest.mark.subprocess
@pytest.mark.slow
def test_sigterm_finishes_the_request_in_flight_and_exits_0(service):
    """Runs last: stops the module's server. Also checks one access-log line per request."""
    body, content_type = multipart([(f"{word}.png", encode(service.images[word], "PNG"), "image/png")
                                    for word in WORDS])
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(service.client.request, "POST", "/recognize", body, {"Content-Type": content_type})
        while service.client.request("GET", "/health")[1]["requests_in_flight"] == 0:
            assert not answer.done(), answer.result()
        service.process.send_signal(signal.SIGTERM)
        status, result = answer.result(60)
    assert service.process.wait(60) == 0
    assert status == 200 and [r["text"] for r in result["results"]] == list(WORDS)
    with pytest.raises(OSError):
        socket.create_connection((service.client.host, service.client.port), timeout=2).close()
    lines = service.log.read_text().splitlines()
    assert len(lines) == service.client.sent
    pattern = (r'127\.0\.0\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] '
               r'"(GET|POST) /\S* HTTP/1\.[01]" \d{3} \d+ \d+\.\d')
    assert all(re.fullmatch(pattern, line) for line in lines), lines
    assert lines[-1].split()[-3] == "200"


# --- POST /recognize/page: a page image and its layout file in, the filled file out ----------

def post(client: Client, path: str, body: bytes, content_type: str) -> tuple[int, str, dict, bytes]:
    """``(status, content type, headers, body)`` of a POST whose answer may be XML."""
    connection = http.client.HTTPConnection(client.host, client.port, timeout=120)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = connection.getresponse()
        client._count()
        return response.status, response.getheader("Content-Type"), dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def page_files(tmp_path_factory):
    """A synthetic PAGE-XML page and an ALTO page: ``{family: (xml bytes, png bytes)}``."""
    from tfnhr.data.synthetic.pages import write_pages

    files = {}
    for layout in ("page", "alto"):
        folder = tmp_path_factory.mktemp(layout)
        write_pages(folder, {"train": 1}, layout=layout, seed=4, progress=False)
        files[layout] = ((folder / "train" / layout / "s0000.xml").read_bytes(), (folder / "train" / "s0000.png").read_bytes())
    return files


@pytest.mark.parametrize("family", ["page", "alto"])
def test_a_page_request_gets_its_layout_file_back_filled(page_files, family):
    """With a real (tiny) recognizer behind the batcher: the answer is the same file with every
    line's text, equal to what the library writes for the same page and model."""
    from tfnhr.data.pages.layout import parse_layout
    from tfnhr.data.pages.writing import layout_bytes
    from tfnhr.data.pages.reading import Skips
    from tfnhr.recognition.pages import fill_page
    from tests.helpers.tiny_models import tiny_recognizer

    transcriber = Transcriber(tiny_recognizer())
    xml, png = page_files[family]
    body, content_type = multipart([("s0000.xml", xml, "application/xml"), ("s0000.png", png, "image/png")])
    with in_process_server(transcriber.read) as (client, server, log):
        status, kind, headers, answer = post(client, "/recognize/page", body, content_type)
        assert client.request("GET", "/health")[1]["requests_served"] == 1
    assert status == 200 and kind == "application/xml", answer
    expected = parse_layout(xml, "s0000.xml")
    lines, _ = fill_page(expected, decode_gray(png), transcriber.read, Skips())
    assert answer == layout_bytes(expected)
    assert headers["X-Lines-Recognized"] == str(lines) and headers["X-Lines-Skipped"] == "0"
    assert lines == len(expected.lines) > 0
    assert re.search(r'"POST /recognize/page HTTP/1.1" 200 \d+', log.getvalue())


def encoded(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("files, content_type, status, message", [
    (None, "image/png", 415, "send multipart/form-data with the page image and its PAGE-XML/ALTO file"),
    ([("s0000.png", b"png", "image/png")], None, 400, "expected one .xml file (PAGE-XML or ALTO) and one page image, got: s0000.png"),
    ([("a.xml", b"<x/>", "text/xml"), ("b.xml", b"<y/>", "text/xml"), ("s.png", b"", "image/png")], None, 400,
     "expected one .xml file"),
    ([("mets.xml", b'<mets xmlns="http://www.loc.gov/METS/"/>', "text/xml"), ("s.png", b"x", "image/png")], None, 400,
     "mets.xml: neither PAGE-XML"),
    ([("s.xml", "truncated", "text/xml"), ("s.png", b"x", "image/png")], None, 400, "s.xml: not well-formed XML"),
    ([("s.xml", "layout", "text/xml"), ("s.png", b"not an image", "image/png")], None, 400, "s.png: not a readable image"),
    ([("s.xml", "layout", "text/xml"), ("s.png", "huge", "image/png")], None, 413, "s.png: 20000x100 px is larger than the limit"),
    ([("s.xml", "layout", "text/xml"), ("s.png", "turned", "image/png")], None, 422,
     "but its layout declares a page of"),
    ([("s.xml", "layout", "text/xml"), ("s.png", "tiny", "image/png")], None, 422,
     "lines with an empty or degenerate polygon): is it the page image of this layout?"),
])
def test_bad_page_requests_are_refused_with_their_reason(page_files, files, content_type, status, message):
    xml, png = page_files["page"]
    if files is None:
        body = png
    else:
        page = Image.open(io.BytesIO(png))
        stand_ins = {"layout": xml, "truncated": xml[:300], "huge": png_header_only(20000, 100),
                     "turned": encoded(page.transpose(Image.Transpose.ROTATE_90)),  # another page's proportions
                     "tiny": encoded(page.resize((page.width // 40, page.height // 40)))}  # lines too small to read
        files = [(name, stand_ins.get(data, data), kind) for name, data, kind in files]
        body, content_type = multipart(files)
    with in_process_server(sizes) as (client, server, log):
        got = post(client, "/recognize/page", body, content_type)
    assert got[0] == status and got[1] == "application/json"
    assert message in json.loads(got[3])["error"]


def test_page_requests_beyond_max_pages_wait_their_turn(page_files):
    """With ``max_pages=1`` and the model held, the first page's lines are queued and the second
    page's are not (its request waits for the page slot); released, both are answered."""
    from tfnhr.data.pages.layout import parse_layout

    xml, png = page_files["page"]
    lines = len(parse_layout(xml, "s0000.xml").lines)
    body, content_type = multipart([("s0000.xml", xml, "application/xml"), ("s0000.png", png, "image/png")])
    release = threading.Event()

    def held(grays: list[np.ndarray]) -> list[Reading]:
        assert release.wait(30)
        return [Reading("x", 0.5) for _ in grays]

    with in_process_server(held, capacity=Capacity(max_pages=1)) as (client, server, log):
        with ThreadPoolExecutor(2) as pool:
            answers = [pool.submit(post, client, "/recognize/page", body, content_type) for _ in range(2)]
            deadline = time.monotonic() + 20
            while server.batcher.queue_length < lines - 1:  # one line is in the held batch
                assert time.monotonic() < deadline
                time.sleep(0.01)
            time.sleep(0.5)
            assert server.batcher.queue_length == lines - 1
            release.set()
            assert [answer.result()[0] for answer in answers] == [200, 200]
