"""Image classification data for CapsNet / MLCN: Fashion-MNIST, MNIST, CIFAR-10 and a synthetic set.

Every loader returns a ``ClassificationData``: images float32 ``[N, H, W, C]`` scaled to ``[0, 1]``
(8-bit sources divided by 255) and labels int32 ``[N]`` in ``[0, num_classes)``.

Fashion-MNIST is read from local IDX files (``read_idx``) with these names, each plain or gzipped::

    train-images-idx3-ubyte  train-labels-idx1-ubyte  t10k-images-idx3-ubyte  t10k-labels-idx1-ubyte

searched for in order in: an explicit ``data_dir``, ``$CAPSNET_DATA_DIR``, ``DEBIAN_DIR`` (the Debian
package ``dataset-fashion-mnist`` installs the four files there as ``*.gz``) and Keras's cache
``$KERAS_HOME/datasets/fashion-mnist`` (``~/.keras/datasets/fashion-mnist`` by default: where
``keras.datasets.fashion_mnist.load_data()`` keeps the same four ``*.gz`` files, so they are read
directly and nothing is ever downloaded). MNIST and CIFAR-10 come through ``keras.datasets``, which
downloads them on first use.
"""

from __future__ import annotations

import dataclasses
import gzip
import math
import os
import struct
from pathlib import Path
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

DATASET_NAMES = ("fashion_mnist", "mnist", "cifar10", "synthetic")

FASHION_MNIST_CLASSES = [
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
]  # fmt: skip
MNIST_CLASSES = [str(d) for d in range(10)]
CIFAR10_CLASSES = [
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
]  # fmt: skip
SHAPE_CLASSES = ["horizontal bar", "vertical bar", "square", "diagonal", "anti-diagonal", "plus", "cross"]

# Fashion-MNIST's IDX files: split -> (images file, labels file), each possibly with ".gz".
FASHION_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
DATA_DIR_ENV = "CAPSNET_DATA_DIR"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")  # apt-get install dataset-fashion-mnist
FASHION_MNIST_URL = "https://github.com/zalandoresearch/fashion-mnist"

# Sizes of load_dataset("synthetic") when no limit is given (train, test).
SYNTHETIC_SIZES = (2000, 500)

# IDX element type code -> big-endian numpy dtype.
_IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


@dataclasses.dataclass(frozen=True, eq=False)
class ClassificationData:
    """A train/test split: ``x_*`` float32 ``[N, H, W, C]`` in ``[0, 1]``, ``y_*`` int32 ``[N]``."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: list[str]
    name: str

    def __post_init__(self):
        for split in ("train", "test"):
            x, y = getattr(self, f"x_{split}"), getattr(self, f"y_{split}")
            if x.dtype != np.float32 or x.ndim != 4:
                raise ValueError(
                    f"{self.name}: x_{split} must be float32 [N, H, W, C], got {x.dtype} {x.shape}"
                )
            if y.dtype != np.int32 or y.shape != x.shape[:1]:
                raise ValueError(f"{self.name}: y_{split} must be int32 [{len(x)}], got {y.dtype} {y.shape}")
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise ValueError(
                f"{self.name}: train images {self.x_train.shape[1:]} != test images {self.x_test.shape[1:]}"
            )

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(H, W, C)`` of one image."""
        return tuple(self.x_train.shape[1:])


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Parse an IDX file, plain or gzipped (recognised by its content), into a native-endian array.

    Layout: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
    0x0E float64), the number of dimensions, one big-endian uint32 size per dimension, then the
    big-endian elements in C order. Raises ValueError (naming ``path``) for a bad magic number, an
    unknown type code, a corrupt gzip stream, or data shorter or longer than the sizes say.
    """
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise ValueError(f"{path}: corrupt gzip stream: {e}") from e
    if len(raw) < 4 or raw[:2] != b"\x00\x00":
        raise ValueError(f"{path}: not an IDX file (magic {raw[:4].hex() or 'missing'}, expected 0000TTNN)")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown IDX type code 0x{code:02X} (known: 08, 09, 0B, 0C, 0D, 0E)")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header ({len(raw)} bytes, {ndim} dimensions need {header})")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = _IDX_DTYPES[code]
    count = math.prod(shape)
    expected, actual = count * dtype.itemsize, len(raw) - header
    if actual != expected:
        problem = "truncated" if actual < expected else "oversized"
        raise ValueError(
            f"{path}: {problem} IDX data: shape {shape} of {dtype.name} needs {expected} bytes, found {actual}"
        )
    data = np.frombuffer(raw, dtype=dtype, count=count, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def fashion_mnist_search_dirs(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The directories searched for Fashion-MNIST's IDX files, in order (see the module docstring)."""
    dirs = [Path(data_dir)] if data_dir is not None else []
    if os.environ.get(DATA_DIR_ENV):
        dirs.append(Path(os.environ[DATA_DIR_ENV]))
    return dirs + [DEBIAN_DIR, _keras_home() / "datasets" / "fashion-mnist"]


def _keras_home() -> Path:
    """Keras's cache root: ``$KERAS_HOME``, else ``~/.keras``."""
    return Path(os.environ.get("KERAS_HOME") or Path.home() / ".keras")


def load_fashion_mnist(data_dir: str | os.PathLike | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Fashion-MNIST from the first searched directory holding all four IDX files.

    Returns ``{"train": (images, labels), "test": (images, labels)}``: images uint8 ``[N, 28, 28]``,
    labels uint8 ``[N]`` (60000 and 10000 for the real data). Raises FileNotFoundError, listing the
    directories searched and how to get the files, when none holds them all; ValueError when a
    split's image and label counts differ or a label is outside ``[0, 10)``.
    """
    searched = fashion_mnist_search_dirs(data_dir)
    for directory in searched:
        found = _fashion_mnist_paths(directory)
        if found is not None:
            return {split: _read_split(*paths) for split, paths in found.items()}
    names = ", ".join(name for pair in FASHION_MNIST_FILES.values() for name in pair)
    raise FileNotFoundError(
        f"Fashion-MNIST not found: none of {[str(d) for d in searched]} holds all of {names} "
        f"(each plain or .gz). Get them with `apt-get install dataset-fashion-mnist` (installs to "
        f"{DEBIAN_DIR}), or download the four IDX files from {FASHION_MNIST_URL} into one of these "
        f"directories, or point ${DATA_DIR_ENV} / data_dir (--data-dir) at them."
    )


def _fashion_mnist_paths(directory: Path) -> dict[str, tuple[Path, Path]] | None:
    """Split -> (images path, labels path) when ``directory`` holds all four files, else None."""
    found = {}
    for split, names in FASHION_MNIST_FILES.items():
        paths = []
        for name in names:
            candidates = [directory / name, directory / f"{name}.gz"]
            path = next((p for p in candidates if p.is_file()), None)
            if path is None:
                return None
            paths.append(path)
        found[split] = tuple(paths)
    return found


def _read_split(images_path: Path, labels_path: Path) -> tuple[np.ndarray, np.ndarray]:
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or images.dtype != np.uint8 or labels.ndim != 1:
        raise ValueError(f"{images_path}, {labels_path}: expected uint8 images [N, H, W] and labels [N], "
                         f"got {images.dtype} {images.shape} and {labels.dtype} {labels.shape}")
    if len(images) != len(labels):
        raise ValueError(f"{images_path} has {len(images)} images but {labels_path} has {len(labels)} labels")
    if labels.size and not 0 <= labels.min() <= labels.max() < len(FASHION_MNIST_CLASSES):
        raise ValueError(f"{labels_path}: labels must lie in [0, {len(FASHION_MNIST_CLASSES)}), "
                         f"got [{labels.min()}, {labels.max()}]")
    return images, labels


def synthetic_shapes(
    n_train: int, n_test: int, size: int = 28, n_class: int = 4, seed: int = 0
) -> ClassificationData:
    """A deterministic, learnable set of ``n_class`` (at most 7) simple shapes on a noisy background.

    Classes, in order: ``SHAPE_CLASSES`` (horizontal bar, vertical bar, square outline, diagonal,
    anti-diagonal, plus, cross). Each image draws one shape with side 35-75 % of ``size`` and
    strokes ``max(1, size // 14)`` or one more pixels wide at a random position, brightness in
    ``[0.6, 1]``, plus Gaussian noise (sigma 0.1), clipped: float32 ``[N, size, size, 1]`` in
    ``[0, 1]``. Labels cycle ``0, 1, ..., n_class - 1``, so every prefix is balanced. Train and test
    come from independent streams of ``seed``, and generating ``n`` examples gives the first ``n``
    of any longer run.
    """
    if not 1 <= n_class <= len(SHAPE_CLASSES):
        raise ValueError(f"n_class must be in [1, {len(SHAPE_CLASSES)}], got {n_class}")
    if size < 8:
        raise ValueError(f"size must be at least 8 pixels, got {size}")
    for name, n in (("n_train", n_train), ("n_test", n_test)):
        if n < 0:
            raise ValueError(f"{name} must be non-negative, got {n}")
    splits = [
        _draw_shapes(n, size, n_class, np.random.default_rng([seed, stream]))
        for stream, n in enumerate((n_train, n_test))
    ]
    return ClassificationData(*splits[0], *splits[1], class_names=SHAPE_CLASSES[:n_class], name="synthetic")


def _draw_shapes(n: int, size: int, n_class: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = (np.arange(n) % n_class).astype(np.int32)
    images = np.zeros((n, size, size, 1), np.float32)
    stroke = max(1, size // 14)
    for k, label in enumerate(labels):
        side = int(rng.integers(round(0.35 * size), round(0.75 * size) + 1))
        width = int(rng.integers(stroke, stroke + 2))
        row, col = rng.integers(0, size - side + 1, size=2)
        brightness = rng.uniform(0.6, 1.0)
        noise = rng.normal(0.0, 0.1, (size, size))
        canvas = np.zeros((size, size))
        canvas[row : row + side, col : col + side] = _shape_mask(int(label), side, width) * brightness
        images[k, :, :, 0] = np.clip(canvas + noise, 0.0, 1.0)
    return images, labels


def _shape_mask(label: int, side: int, width: int) -> np.ndarray:
    """Bool ``[side, side]`` mask of shape class ``label`` drawn with strokes ``width`` pixels wide."""
    i, j = np.indices((side, side))
    mid = side // 2 - width // 2
    hbar = (i >= mid) & (i < mid + width)
    vbar = (j >= mid) & (j < mid + width)
    diagonal = np.abs(i - j) < width
    anti = np.abs(i + j - (side - 1)) < width
    square = np.minimum(np.minimum(i, j), np.minimum(side - 1 - i, side - 1 - j)) < width
    return [hbar, vbar, square, diagonal, anti, hbar | vbar, diagonal | anti][label]


def load_dataset(
    name: str,
    data_dir: str | os.PathLike | None = None,
    limit_train: int | None = None,
    limit_test: int | None = None,
) -> ClassificationData:
    """Load ``name`` (one of ``DATASET_NAMES``), keeping the first ``limit_*`` examples of each split.

    ``data_dir`` is searched first for Fashion-MNIST and ignored by the others. ``"synthetic"`` is
    ``synthetic_shapes`` with 4 classes and seed 0, of ``SYNTHETIC_SIZES`` examples unless a limit
    sets the size (any size works: a shorter set is a prefix of a longer one). Raises ValueError for
    an unknown name or a negative limit; FileNotFoundError when Fashion-MNIST is not found locally;
    RuntimeError when Keras cannot download MNIST or CIFAR-10.
    """
    for limit in (limit_train, limit_test):
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limits must be None or a non-negative int, got {limit!r}")
    if name == "synthetic":
        n_train = SYNTHETIC_SIZES[0] if limit_train is None else limit_train
        n_test = SYNTHETIC_SIZES[1] if limit_test is None else limit_test
        return synthetic_shapes(n_train, n_test)
    if name == "fashion_mnist":
        splits = load_fashion_mnist(data_dir)
        (x_train, y_train), (x_test, y_test) = splits["train"], splits["test"]
        class_names = FASHION_MNIST_CLASSES
    elif name == "mnist":
        (x_train, y_train), (x_test, y_test) = _keras_load(
            name,
            keras.datasets.mnist.load_data,
            "place mnist.npz (https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz) "
            f"at {_keras_home() / 'datasets' / 'mnist.npz'}",
        )
        class_names = MNIST_CLASSES
    elif name == "cifar10":
        (x_train, y_train), (x_test, y_test) = _keras_load(
            name,
            keras.datasets.cifar10.load_data,
            "place cifar-10-python.tar.gz (https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz) "
            f"at {_keras_home() / 'datasets' / 'cifar-10-batches-py-target_archive'} (Keras 3's name for it)",
        )
        class_names = CIFAR10_CLASSES
    else:
        raise ValueError(f"unknown dataset {name!r}: expected one of {', '.join(DATASET_NAMES)}")
    return ClassificationData(
        x_train=_scale(x_train[:limit_train]),
        y_train=np.asarray(y_train[:limit_train], np.int32).reshape(-1),
        x_test=_scale(x_test[:limit_test]),
        y_test=np.asarray(y_test[:limit_test], np.int32).reshape(-1),
        class_names=list(class_names),
        name=name,
    )


def _keras_load(name: str, load: Callable[[], tuple], how: str) -> tuple:
    """Run a ``keras.datasets`` loader, turning a failed download into a RuntimeError saying what to do."""
    try:
        return load()
    except Exception as e:
        raise RuntimeError(
            f"could not load {name} through keras.datasets ({e}): it downloads the data on first use, "
            f"which needs network access. Without a network, {how}."
        ) from e


def _scale(images: np.ndarray) -> np.ndarray:
    """uint8 ``[N, H, W]`` or ``[N, H, W, C]`` -> float32 ``[N, H, W, C]`` in ``[0, 1]``."""
    x = images.astype(np.float32) / 255.0
    return x[..., None] if x.ndim == 3 else x


def to_dataset(
    x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool = False, seed: int | None = None
) -> tf.data.Dataset:
    """``(images, labels)`` batches: float32 ``[B, H, W, C]`` and int32 ``[B]``, the last batch partial.

    With ``shuffle`` every epoch visits all examples in a fresh order; a given ``seed`` makes the
    sequence of epoch orders reproducible (``seed=None``: different each time). Batches are prefetched.
    """
    x, y = np.asarray(x, np.float32), np.asarray(y, np.int32)
    if len(x) != len(y):
        raise ValueError(f"{len(x)} images but {len(y)} labels")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if shuffle:
        ds = ds.shuffle(max(len(x), 1), seed=seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size, drop_remainder=False).prefetch(tf.data.AUTOTUNE)
