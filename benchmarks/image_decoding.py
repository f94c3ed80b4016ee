"""What the export's image reader costs per file: :func:`tfnhr.serving.graph_images.decode_gray`
(16-bit samples, alpha over white, EXIF orientation, refusals) against TensorFlow's plain
``decode_image`` and the fixed-point luma (8-bit samples only, no orientation), in one run.

Both read the same encoded line images (``--height`` x ``--width`` px of text-like noise, PNG and
JPEG), each as a traced ``tf.function``, interleaved: per round ``--calls`` calls of each side in
turn. Reported per format: median milliseconds per file and range over ``--rounds`` rounds, their
ratio, and the largest gray-level difference between the two readings (0 for PNG; for JPEG what
the integer-accurate inverse DCT changes against TensorFlow's default one).

    taskset -c 0 .venv/bin/python benchmarks/image_decoding.py --threads 1 --out build/bench/image_decoding.json
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

import _harness


def plain_decode(tf):
    """TensorFlow's ``decode_image`` with the luma of 8-bit colour: what the export read before."""
    def decode(data):
        image = tf.io.decode_image(data, channels=0, dtype=tf.uint8, expand_animations=False)
        image.set_shape([None, None, None])
        channels = tf.cast(image, tf.int32)

        def luma():
            weighted = channels[..., 0] * 19595 + channels[..., 1] * 38470 + channels[..., 2] * 7471 + 32768
            return tf.cast(tf.bitwise.right_shift(weighted, 16), tf.uint8)

        return tf.cond(tf.shape(image)[2] >= 3, luma, lambda: image[..., 0])

    return decode


def encoded_lines(height: int, width: int, seed: int) -> dict[str, bytes]:
    gray = np.random.default_rng(seed).integers(0, 256, (height, width)).astype(np.uint8)
    files = {}
    for fmt in ("PNG", "JPEG"):
        buffer = io.BytesIO()
        Image.fromarray(gray).save(buffer, fmt)
        files[fmt] = buffer.getvalue()
    return files


def measure(args) -> dict:
    tf = _harness.set_threads(args.threads)
    from tfnhr.serving.graph_images import decode_gray

    spec = [tf.TensorSpec([], tf.string)]
    sides = {"reader": tf.function(decode_gray, input_signature=spec),
             "plain": tf.function(plain_decode(tf), input_signature=spec)}
    report = {"threads": args.threads, "height": args.height, "width": args.width, "calls": args.calls}
    print(f"{args.height}x{args.width}-px lines, {args.calls} calls per round, {args.threads} thread(s)")
    print(f"{'format':6s} {'reader ms':>20s} {'plain ms':>20s} {'reader/plain':>13s}")
    for fmt, data in encoded_lines(args.height, args.width, args.seed).items():
        tensor = tf.constant(data)
        difference = np.abs(sides["reader"](tensor).numpy().astype(int) - sides["plain"](tensor).numpy())
        assert fmt == "JPEG" or difference.max() == 0  # a JPEG's inverse DCT differs: integer-accurate vs default
        steps = {name: (lambda fn=fn: [fn(tensor) for _ in range(args.calls)]) for name, fn in sides.items()}
        times = _harness.interleaved(steps, rounds=args.rounds, warmup=1)
        per_file = {name: _harness.spread([1e3 * wall / args.calls for wall in times[name].wall]) for name in sides}
        ratio = per_file["reader"]["median"] / per_file["plain"]["median"]
        report[fmt] = {**per_file, "ratio": ratio, "max_gray_difference": int(difference.max())}
        print(f"{fmt:6s} " + " ".join(f"{per_file[name]['median']:7.3f} ({per_file[name]['min']:.3f}-"
                                      f"{per_file[name]['max']:.3f})" for name in ("reader", "plain"))
              + f" {ratio:12.2f}x")
    return report


if __name__ == "__main__":
    parser = _harness.parser(__doc__, rounds=7)
    parser.add_argument("--height", type=int, default=64, help="line height, px (default 64)")
    parser.add_argument("--width", type=int, default=900, help="line width, px (default 900)")
    parser.add_argument("--calls", type=int, default=200, help="calls per side and round (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the line's pixels (default 0)")
    raise SystemExit(_harness.main(measure, parser.parse_args()))
