"""Pictures of a training run: ``curves.png`` (loss and validation error per validation) and
``samples.png`` (line images with their reference and recognized text). Drawn with matplotlib's
file-only backend (no display needed)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import numpy as np  # noqa: E402


def read_log(path: str | Path) -> dict[str, list[float]]:
    """The columns of a Keras ``CSVLogger`` file (``epoch``, ``loss``, ``val_cer``, ...) as floats;
    empty if the file is missing or has no rows."""
    path = Path(path)
    if not path.is_file():
        return {}
    with path.open(newline="") as file:
        rows = list(csv.DictReader(file))
    columns: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.items():
            try:
                columns.setdefault(key, []).append(float(value))
            except (TypeError, ValueError):
                columns.setdefault(key, []).append(float("nan"))
    return columns


def plot_curves(log_csv: str | Path, out_png: str | Path, title: str = "training") -> Path | None:
    """Draw the training loss (left axis, log scale) and the validation CER/WER (right axis, %)
    per validation from ``log_csv`` into ``out_png``, marking the learning-rate halvings; returns
    the path, or ``None`` when the log has no rows yet."""
    log = read_log(log_csv)
    if not log.get("epoch"):
        return None
    rounds = np.asarray(log["epoch"])  # counted from 1 (tfnhr.training.callbacks.EpochLog)
    figure, loss_axis = plt.subplots(figsize=(7, 4), dpi=100)
    if "loss" in log:
        loss_axis.plot(rounds, log["loss"], color="tab:blue", marker=".", label="training loss")
        if min(log["loss"]) > 0:
            loss_axis.set_yscale("log")
    loss_axis.set_xlabel("validation")
    loss_axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    loss_axis.set_ylabel("CTC loss (per line)", color="tab:blue")
    error_axis = loss_axis.twinx()
    for key, color in (("val_cer", "tab:red"), ("val_wer", "tab:orange")):
        if key in log:
            error_axis.plot(rounds, 100 * np.asarray(log[key]), color=color, marker=".",
                            label=f"validation {key[4:].upper()}")
    error_axis.set_ylabel("validation error (%)", color="tab:red")
    error_axis.set_ylim(0, 105)
    rates = log.get("learning_rate", [])
    for index in range(1, len(rates)):
        if rates[index] < rates[index - 1]:
            loss_axis.axvline(rounds[index], color="gray", linestyle=":", linewidth=1)
    lines = loss_axis.get_legend_handles_labels()[0] + error_axis.get_legend_handles_labels()[0]
    labels = loss_axis.get_legend_handles_labels()[1] + error_axis.get_legend_handles_labels()[1]
    error_axis.legend(lines, labels, loc="upper right", fontsize=8)
    loss_axis.set_title(f"{title} (dotted: learning rate halved)", fontsize=10)
    figure.tight_layout()
    figure.savefig(out_png)
    plt.close(figure)
    return Path(out_png)


def plot_samples(images: Sequence[np.ndarray], references: Sequence[str], hypotheses: Sequence[str],
                 out_png: str | Path, errors: Sequence[float] | None = None) -> Path:
    """One row per line: the image (uint8 ``[H, W]`` gray, dark ink), and below it its reference
    and recognized text (with its CER when ``errors`` are given). Returns ``out_png``."""
    if not images or not len(images) == len(references) == len(hypotheses):
        raise ValueError("plot_samples needs as many images, references and hypotheses, at least one")
    widest = max(image.shape[1] / image.shape[0] for image in images)
    figure, axes = plt.subplots(len(images), 1, figsize=(min(max(4.0, 0.5 * widest), 14), 1.25 * len(images)),
                                dpi=100, squeeze=False)
    for row, (axis, image, reference, hypothesis) in enumerate(zip(axes[:, 0], images, references, hypotheses)):
        axis.imshow(image, cmap="gray", vmin=0, vmax=255, aspect="equal")
        axis.set_xticks([])
        axis.set_yticks([])
        score = f"  (CER {errors[row]:.0%})" if errors is not None else ""
        axis.set_xlabel(f"ref:  {reference}\nread: {hypothesis}{score}", fontsize=8, loc="left", family="monospace")
    figure.tight_layout()
    figure.savefig(out_png)
    plt.close(figure)
    return Path(out_png)
