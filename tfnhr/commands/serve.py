"""``tfnhr serve``: an HTTP recognition service that batches concurrent requests into one model call."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from tfnhr.config.choices import DEFAULT_BATCH_PIXELS
from tfnhr.commands.common import add_decoder_choice, reports_errors, transcriber_from_args
from tfnhr.config.options import DefaultsHelpFormatter
from tfnhr.config.ranges import COUNT, NONNEGATIVE, PORT, POSITIVE


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``serve`` to the ``tfnhr`` sub-commands."""
    from tfnhr.serving.http import Capacity, Limits

    parser = commands.add_parser(
        "serve", help="serve POST /recognize and GET /health over HTTP", description=__doc__.splitlines()[0],
        formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a saved model (best.keras)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=PORT.type, default=8080, help="port to listen on (0: any free port)")
    parser.add_argument("--batch-pixels", type=COUNT.type, default=DEFAULT_BATCH_PIXELS,
                        help="pixel budget of one model call (images scaled to the model's height)")
    parser.add_argument("--max-wait-ms", type=NONNEGATIVE.type, default=10.0,
                        help="how long the worker waits for more images after the first of a batch "
                             "(0: only images already queued join)")
    parser.add_argument("--max-body-bytes", type=COUNT.type, default=Limits.max_body_bytes,
                        help="larger request bodies are refused with 413 unread")
    parser.add_argument("--max-height", type=COUNT.type, default=Limits.max_height,
                        help="taller images are refused with 413 before decoding (pixels)")
    parser.add_argument("--max-width", type=COUNT.type, default=Limits.max_width,
                        help="wider images are refused with 413 before decoding (pixels)")
    parser.add_argument("--max-page-height", type=COUNT.type, default=Limits.max_page_height,
                        help="POST /recognize/page: taller page images are refused with 413 before decoding (pixels)")
    parser.add_argument("--max-page-width", type=COUNT.type, default=Limits.max_page_width,
                        help="POST /recognize/page: wider page images are refused with 413 before decoding (pixels)")
    parser.add_argument("--header-timeout", type=POSITIVE.type, default=Limits.header_timeout_s, metavar="SECONDS",
                        help="a client must send its request line and headers within this time, else 408")
    parser.add_argument("--body-timeout", type=POSITIVE.type, default=Limits.body_timeout_s, metavar="SECONDS",
                        help="a client must send its whole body within this time, else 408")
    parser.add_argument("--backlog", type=COUNT.type, default=Capacity.backlog,
                        help="connections the kernel queues before they are accepted (capped by net.core.somaxconn)")
    parser.add_argument("--max-requests", type=COUNT.type, default=Capacity.max_requests,
                        help="recognition requests admitted at once; more are answered 503 with Retry-After")
    parser.add_argument("--max-pages", type=COUNT.type, default=Capacity.max_pages,
                        help="POST /recognize/page requests that hold their page image at once; more wait their turn")
    parser.add_argument("--access-log", type=Path, default=None, help="append access-log lines here, not to stderr")
    add_decoder_choice(parser)
    parser.set_defaults(run=run)


@reports_errors("serve", errors=(OSError, ValueError))
def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM, then finish the requests in flight and return 0; 2 if the
    model, the decoder or the address cannot be set up."""
    import numpy as np
    from PIL import Image

    from tfnhr.data.images import scale_to_height
    from tfnhr.models import load_recognizer
    from tfnhr.serving.batcher import Batcher
    from tfnhr.serving.http import Capacity, Limits, RecognitionServer

    model = load_recognizer(args.model)
    transcriber = transcriber_from_args(model, args)
    access_log = open(args.access_log, "a", encoding="utf-8") if args.access_log else sys.stderr
    # Image headers are checked against the limits before decoding; this is PIL's own backstop.
    Image.MAX_IMAGE_PIXELS = max(args.max_height * args.max_width, args.max_page_height * args.max_page_width)

    transcriber.read([np.full((model.input_height or 32, 64), 255, np.uint8)])  # build before the first request
    batcher = Batcher(transcriber.read, size=np.size, budget=args.batch_pixels, max_wait_s=args.max_wait_ms / 1000,
                      name="recognizer")
    try:
        server = RecognitionServer(
            (args.host, args.port), batcher, lambda gray: scale_to_height(gray, model.input_height),
            model_name=str(args.model), charset_size=len(model.charset),
            limits=Limits(max_body_bytes=args.max_body_bytes, max_height=args.max_height, max_width=args.max_width,
                          max_page_height=args.max_page_height, max_page_width=args.max_page_width,
                          header_timeout_s=args.header_timeout, body_timeout_s=args.body_timeout),
            capacity=Capacity(args.backlog, args.max_requests, args.max_pages), access_log=access_log)
    except OSError as error:
        batcher.close()
        raise OSError(f"cannot listen on {args.host}:{args.port}: {error}") from None
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    print(f"serving {args.model} on {server.url} (batching: up to {args.batch_pixels} px per model call, "
          f"waiting up to {args.max_wait_ms:g} ms for more images; up to {args.max_requests} requests at once, "
          f"backlog {args.backlog})", flush=True)
    server.serve_until(stop)
    if access_log is not sys.stderr:
        access_log.close()
    return 0
