"""Text that never collides in the report's plots: tick labels are wrapped, then rotated, then
shrunk until no two overlap (measured in the drawn figure, not guessed from their length)."""

from __future__ import annotations

import textwrap

MIN_FONT = 5.0
WRAP = 14          # characters a tick label line holds before wrapping


def wrap_label(text: str, width: int = WRAP) -> str:
    """`habitual_omission` -> `habitual\\nomission`: words, never cut, at most `width` a line."""
    return textwrap.fill(str(text).replace("_", " "), width=width, break_long_words=False) or str(text)


def boxes_overlap(a, b, pad: float = 1.0) -> bool:
    """Two display-space boxes (x0, y0, x1, y1) closer than `pad` pixels on both axes."""
    return a[0] < b[2] + pad and b[0] < a[2] + pad and a[1] < b[3] + pad and b[1] < a[3] + pad


def overlapping(boxes: list) -> list[tuple[int, int]]:
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes)) if boxes_overlap(boxes[i], boxes[j])]


def text_boxes(fig, texts) -> list[tuple[float, float, float, float]]:
    renderer = fig.canvas.get_renderer()
    out = []
    for t in texts:
        if t.get_text() and t.get_visible():
            e = t.get_window_extent(renderer)
            out.append((e.x0, e.y0, e.x1, e.y1))
    return out


def fit_tick_labels(fig, ax) -> None:
    """Rotate, then shrink, the x tick labels of `ax` until none overlaps another."""
    labels = ax.get_xticklabels()
    if len(labels) < 2:
        return
    if not overlapping(text_boxes(fig, labels)):
        return
    for t in labels:
        t.set_rotation(30)
        t.set_horizontalalignment("right")
        t.set_rotation_mode("anchor")
    size = labels[0].get_fontsize()
    while overlapping(text_boxes(fig, labels)) and size > MIN_FONT:
        size = max(MIN_FONT, size - 0.5)
        for t in labels:
            t.set_fontsize(size)
