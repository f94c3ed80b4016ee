"""capsnet.data: IDX parsing, Fashion-MNIST lookup, Keras-backed sets, synthetic shapes, tf.data batching."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import keras
import numpy as np
import pytest

from capsnet import data

# struct format -> (IDX type code, numpy dtype), written out independently of the module's table.
IDX_TYPES = {
    "B": (0x08, np.uint8),
    "b": (0x09, np.int8),
    "h": (0x0B, np.int16),
    "i": (0x0C, np.int32),
    "f": (0x0D, np.float32),
    "d": (0x0E, np.float64),
}
FASHION_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                 "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]  # fmt: skip
REAL_FILES = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
              "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]  # fmt: skip


def idx_bytes(array: np.ndarray, fmt: str) -> bytes:
    """IDX encoding of ``array`` with struct: magic, big-endian uint32 sizes, big-endian elements."""
    code = IDX_TYPES[fmt][0]
    header = struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + struct.pack(f">{array.size}{fmt}", *array.reshape(-1).tolist())


def write_idx(path: Path, array: np.ndarray, fmt: str = "B") -> Path:
    raw = idx_bytes(array, fmt)
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
    return path


def fake_fashion_mnist(directory: Path, n_train: int, n_test: int, seed: int = 0, gz: bool = True) -> dict:
    """The four files with their real names (train gzipped when ``gz``, test plain); returns the arrays."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {}
    splits = (("train", "train", n_train, ".gz" if gz else ""), ("test", "t10k", n_test, ""))
    for split, prefix, n, suffix in splits:
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        images[0, 0, :2] = [0, 255]
        labels = (np.arange(n) * 7 % 10).astype(np.uint8)
        write_idx(directory / f"{prefix}-images-idx3-ubyte{suffix}", images)
        write_idx(directory / f"{prefix}-labels-idx1-ubyte{suffix}", labels)
        arrays[split] = (images, labels)
    return arrays


@pytest.fixture
def no_default_dirs(tmp_path, monkeypatch):
    """Hide the real Debian directory, Keras cache and $CAPSNET_DATA_DIR from the search."""
    monkeypatch.setattr(data, "DEBIAN_DIR", tmp_path / "no-debian")
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras-home"))
    monkeypatch.delenv("CAPSNET_DATA_DIR", raising=False)


# --- read_idx -------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize(
    "fmt, shape",
    [("B", (3, 4, 5)), ("b", (7,)), ("h", (2, 3)), ("i", (4, 1, 2)), ("f", (5, 3)), ("d", (2, 2, 2, 2))],
)
def test_read_idx_round_trips(tmp_path, fmt, shape, suffix):
    dtype = IDX_TYPES[fmt][1]
    rng = np.random.default_rng(1)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        values.reshape(-1)[:2] = [info.min, info.max]
    else:
        values = rng.normal(0, 1e3, shape).astype(dtype)
    path = write_idx(tmp_path / f"x.idx{suffix}", values, fmt)
    got = data.read_idx(path)
    assert got.dtype == np.dtype(dtype) and got.dtype.isnative
    assert got.shape == shape
    np.testing.assert_array_equal(got, values)


def test_read_idx_errors_name_the_file(tmp_path):
    good = idx_bytes(np.arange(12, dtype=np.int16).reshape(3, 4), "h")
    cases = {
        "magic": b"\x01" + good[1:],
        "unknown IDX type code 0x0A": good[:2] + b"\x0a" + good[3:],
        "truncated IDX data": good[:-1],
        "oversized IDX data": good + b"\x00",
        "truncated IDX header": good[:9],
        "corrupt gzip": gzip.compress(good)[:-6],
    }
    for i, (message, raw) in enumerate(cases.items()):
        path = tmp_path / f"bad{i}"
        path.write_bytes(raw)
        with pytest.raises(ValueError, match=message) as info:
            data.read_idx(path)
        assert str(path) in str(info.value)


# --- Fashion-MNIST --------------------------------------------------------------------------------


def check_fake(loaded: data.ClassificationData, arrays: dict) -> None:
    assert loaded.name == "fashion_mnist" and loaded.class_names == FASHION_NAMES
    assert loaded.num_classes == 10 and loaded.image_shape == (28, 28, 1)
    for split in ("train", "test"):
        images, labels = arrays[split]
        x, y = getattr(loaded, f"x_{split}"), getattr(loaded, f"y_{split}")
        assert x.dtype == np.float32 and x.shape == images.shape + (1,)
        np.testing.assert_allclose(x[..., 0], images / 255.0, rtol=0, atol=1e-7)
        assert y.dtype == np.int32
        np.testing.assert_array_equal(y, labels)
    assert loaded.x_train.min() == 0.0 and loaded.x_train.max() == 1.0


def test_fashion_mnist_from_data_dir(tmp_path, no_default_dirs):
    arrays = fake_fashion_mnist(tmp_path / "fm", 20, 10)
    check_fake(data.load_dataset("fashion_mnist", data_dir=tmp_path / "fm"), arrays)

    limited = data.load_dataset("fashion_mnist", data_dir=str(tmp_path / "fm"), limit_train=5, limit_test=3)
    np.testing.assert_array_equal(limited.y_train, arrays["train"][1][:5])
    np.testing.assert_array_equal(limited.x_test[..., 0] * 255, arrays["test"][0][:3])


def test_fashion_mnist_from_env_then_keras_cache_and_data_dir_first(tmp_path, monkeypatch, no_default_dirs):
    cached = fake_fashion_mnist(tmp_path / "keras-home" / "datasets" / "fashion-mnist", 8, 4, seed=3)
    check_fake(data.load_dataset("fashion_mnist"), cached)

    from_env = fake_fashion_mnist(tmp_path / "env", 20, 10, seed=1, gz=False)
    monkeypatch.setenv("CAPSNET_DATA_DIR", str(tmp_path / "env"))
    check_fake(data.load_dataset("fashion_mnist"), from_env)

    explicit = fake_fashion_mnist(tmp_path / "explicit", 12, 6, seed=2)
    check_fake(data.load_dataset("fashion_mnist", data_dir=tmp_path / "explicit"), explicit)
    searched = data.fashion_mnist_search_dirs(tmp_path / "explicit")
    assert searched[:2] == [tmp_path / "explicit", tmp_path / "env"]


def test_fashion_mnist_missing_files_say_how_to_get_them(tmp_path, no_default_dirs):
    partial = tmp_path / "partial"
    fake_fashion_mnist(partial, 4, 2)
    (partial / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(FileNotFoundError) as info:
        data.load_dataset("fashion_mnist", data_dir=partial)
    message = str(info.value)
    expected = ["apt-get install dataset-fashion-mnist", "github.com/zalandoresearch/fashion-mnist",
                str(partial), str(tmp_path / "no-debian"), "CAPSNET_DATA_DIR", "--data-dir"]  # fmt: skip
    for text in expected:
        assert text in message


def test_fashion_mnist_count_mismatch_and_bad_labels(tmp_path, no_default_dirs):
    fake_fashion_mnist(tmp_path, 20, 10)
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.zeros(19, np.uint8))
    with pytest.raises(ValueError, match="20 images but .* 19 labels"):
        data.load_dataset("fashion_mnist", data_dir=tmp_path)

    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.full(20, 10, np.uint8))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 10\)"):
        data.load_dataset("fashion_mnist", data_dir=tmp_path)


def test_debian_fashion_mnist(monkeypatch):
    if not all((data.DEBIAN_DIR / name).is_file() for name in REAL_FILES):
        pytest.skip(f"Debian package dataset-fashion-mnist not installed ({data.DEBIAN_DIR} lacks its files)")
    monkeypatch.delenv("CAPSNET_DATA_DIR", raising=False)
    assert data.fashion_mnist_search_dirs()[0] == data.DEBIAN_DIR
    fm = data.load_dataset("fashion_mnist")
    assert fm.x_train.shape == (60000, 28, 28, 1) and fm.x_test.shape == (10000, 28, 28, 1)
    assert fm.num_classes == 10
    np.testing.assert_array_equal(np.bincount(fm.y_train), [6000] * 10)
    np.testing.assert_array_equal(np.bincount(fm.y_test), [1000] * 10)
    np.testing.assert_array_equal(fm.y_train[:10], [9, 0, 0, 3, 0, 2, 7, 2, 5, 5])  # the published order
    assert 0.0 <= fm.x_train.min() and fm.x_train.max() <= 1.0


# --- Keras-backed sets and argument checks --------------------------------------------------------


def test_keras_download_failure_is_explained(monkeypatch):
    def offline():
        raise Exception("URL fetch failure on https://example/mnist.npz: None -- Name or service not known")

    monkeypatch.setattr(keras.datasets.mnist, "load_data", offline)
    with pytest.raises(RuntimeError, match="network") as info:
        data.load_dataset("mnist")
    assert "mnist.npz" in str(info.value) and "Name or service not known" in str(info.value)


def test_keras_sets_are_converted(monkeypatch):
    rng = np.random.default_rng(0)
    cifar = tuple(
        (rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), np.arange(n, dtype=np.uint8)[:, None])
        for n in (6, 4)
    )
    monkeypatch.setattr(keras.datasets.cifar10, "load_data", lambda: cifar)
    c = data.load_dataset("cifar10", limit_test=2)
    assert c.x_train.shape == (6, 32, 32, 3) and c.x_test.shape == (2, 32, 32, 3) and c.y_train.shape == (6,)
    np.testing.assert_allclose(c.x_train, cifar[0][0] / 255.0, atol=1e-7)
    np.testing.assert_array_equal(c.y_test, [0, 1])
    assert c.class_names[0] == "airplane" and c.num_classes == 10

    mnist = ((rng.integers(0, 256, (5, 28, 28), dtype=np.uint8), np.arange(5, dtype=np.uint8)),) * 2
    monkeypatch.setattr(keras.datasets.mnist, "load_data", lambda: mnist)
    m = data.load_dataset("mnist", limit_train=3)
    assert m.x_train.shape == (3, 28, 28, 1) and m.y_train.dtype == np.int32 and m.class_names[9] == "9"


def test_bad_arguments():
    with pytest.raises(ValueError, match="fashion_mnist, mnist, cifar10, synthetic"):
        data.load_dataset("imagenet")
    with pytest.raises(ValueError, match="non-negative"):
        data.load_dataset("synthetic", limit_train=-1)
    with pytest.raises(ValueError, match="n_class"):
        data.synthetic_shapes(4, 4, n_class=8)
    with pytest.raises(ValueError, match="float32"):
        data.ClassificationData(
            np.zeros((2, 4, 4, 1)), np.zeros(2, np.int32),
            np.zeros((1, 4, 4, 1), np.float32), np.zeros(1, np.int32), ["a"], "x",
        )  # fmt: skip


# --- synthetic shapes -----------------------------------------------------------------------------


def test_synthetic_is_deterministic_balanced_and_prefix_stable():
    a = data.synthetic_shapes(50, 20, seed=7)
    b = data.synthetic_shapes(50, 20, seed=7)
    c = data.synthetic_shapes(50, 20, seed=8)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.x_test, b.x_test)
    assert not np.array_equal(a.x_train, c.x_train)
    assert not np.array_equal(a.x_train[:20], a.x_test)
    assert a.x_train.shape == (50, 28, 28, 1) and a.x_train.dtype == np.float32
    assert 0.0 <= a.x_train.min() and a.x_train.max() <= 1.0
    counts = np.bincount(a.y_train, minlength=4)
    assert counts.max() - counts.min() <= 1
    short = data.synthetic_shapes(30, 5, seed=7)
    np.testing.assert_array_equal(short.x_train, a.x_train[:30])
    np.testing.assert_array_equal(short.y_test, a.y_test[:5])

    loaded = data.load_dataset("synthetic", limit_train=40, limit_test=12)
    assert loaded.x_train.shape == (40, 28, 28, 1) and loaded.x_test.shape == (12, 28, 28, 1)
    assert loaded.name == "synthetic"
    assert loaded.class_names == ["horizontal bar", "vertical bar", "square", "diagonal"]


def spectrum(x: np.ndarray) -> np.ndarray:
    """Translation-invariant features: 2-D FFT magnitudes of ``[N, H, W, 1]`` images, flattened."""
    return np.abs(np.fft.fft2(x[..., 0])).reshape(len(x), -1)


@pytest.mark.parametrize("n_class", [4, 7])
def test_synthetic_classes_differ(n_class):
    s = data.synthetic_shapes(300, 140, size=24, n_class=n_class, seed=1)
    assert s.x_train.shape == (300, 24, 24, 1) and s.class_names == data.SHAPE_CLASSES[:n_class]
    features = spectrum(s.x_train)
    centroids = np.stack([features[s.y_train == k].mean(0) for k in range(n_class)])
    distances = ((spectrum(s.x_test)[:, None] - centroids[None]) ** 2).sum(-1)
    assert (distances.argmin(1) == s.y_test).mean() > 0.85  # nearest class-mean spectrum


def test_synthetic_shapes_are_learnable():
    s = data.synthetic_shapes(400, 200, size=28, n_class=4, seed=0)
    # Horizontal bars put more ink variance across rows than columns; vertical bars the opposite.
    rows, cols = s.x_train[..., 0].sum(2).std(1), s.x_train[..., 0].sum(1).std(1)
    assert (rows > cols)[s.y_train == 0].mean() > 0.95 and (cols > rows)[s.y_train == 1].mean() > 0.95

    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(8, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.GlobalMaxPooling2D(),
        keras.layers.Dense(4),
    ])  # fmt: skip
    model.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])  # fmt: skip
    train = data.to_dataset(s.x_train, s.y_train, 32, shuffle=True, seed=0)
    model.fit(train, epochs=3, shuffle=False, verbose=0)
    _, accuracy = model.evaluate(data.to_dataset(s.x_test, s.y_test, 100), verbose=0)
    assert accuracy > 0.9, accuracy


# --- to_dataset -----------------------------------------------------------------------------------


def epochs(ds, count: int) -> list[tuple[list[int], np.ndarray]]:
    """Per epoch: batch sizes and the concatenated labels."""
    out = []
    for _ in range(count):
        sizes, labels = [], []
        for x, y in ds:
            assert x.dtype.name == "float32" and y.dtype.name == "int32" and x.shape[1:] == (3, 2, 1)
            np.testing.assert_array_equal(x.numpy()[:, 0, 0, 0], y.numpy())  # images stay with labels
            sizes.append(int(y.shape[0]))
            labels.append(y.numpy())
        out.append((sizes, np.concatenate(labels)))
    return out


def test_to_dataset_covers_every_example_once_per_epoch():
    n = 23
    x = np.broadcast_to(np.arange(n, dtype=np.float64)[:, None, None, None], (n, 3, 2, 1))
    y = np.arange(n)
    (sizes, labels), = epochs(data.to_dataset(x, y, 5), 1)
    assert sizes == [5, 5, 5, 5, 3]
    np.testing.assert_array_equal(labels, y)

    first = epochs(data.to_dataset(x, y, 5, shuffle=True, seed=3), 2)
    again = epochs(data.to_dataset(x, y, 5, shuffle=True, seed=3), 2)
    other = epochs(data.to_dataset(x, y, 5, shuffle=True, seed=4), 1)
    for sizes, labels in first:
        assert sizes == [5, 5, 5, 5, 3]
        np.testing.assert_array_equal(np.sort(labels), y)
    assert not np.array_equal(first[0][1], y) and not np.array_equal(first[0][1], first[1][1])
    for (_, a), (_, b) in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0][1], other[0][1])
