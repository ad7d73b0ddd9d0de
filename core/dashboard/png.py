"""Internal: PNG line charts without a plotting library or a browser: numpy draws, zlib compresses.

:func:`line_chart_png` draws what :func:`ragmeter.dashboard.sweeps.sweep_chart` draws as SVG (the
same layout: grid at 0, 0.5 and 1, dashed pass / warn levels, the line, points coloured by their
label, every x value and the title), supersampled 3x and averaged down for smooth edges. Text
uses a built-in 5x7 pixel font (printable ASCII; anything else is drawn as "?").
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import numpy as np

from ragmeter.data import label_for

__all__ = ["line_chart_png", "encode_png"]

_WHITE, _GRID, _TICK, _TITLE, _LINE = (255, 255, 255), (234, 238, 242), (89, 99, 110), (31, 35, 40), (9, 105, 218)
_LABEL = {"pass": (26, 127, 55), "warn": (227, 155, 45), "fail": (207, 34, 46)}
_SUPERSAMPLE = 3

# 5 columns x 8 rows per glyph ('#' on), rows 0-6 above the baseline, row 7 the descender.
_FONT_ROWS = {
    " ": "",
    "0": ".###. #...# #..## #.#.# ##..# #...# .###.",
    "1": "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    "2": ".###. #...# ....# ...#. ..#.. .#... #####",
    "3": "####. ....# ....# .###. ....# ....# ####.",
    "4": "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
    "5": "##### #.... ####. ....# ....# #...# .###.",
    "6": "..##. .#... #.... ####. #...# #...# .###.",
    "7": "##### ....# ...#. ..#.. .#... .#... .#...",
    "8": ".###. #...# #...# .###. #...# #...# .###.",
    "9": ".###. #...# #...# .#### ....# ...#. .##..",
    ".": "..... ..... ..... ..... ..... .##.. .##..",
    ",": "..... ..... ..... ..... .##.. .##.. ..#.. .#...",
    "-": "..... ..... ..... ##### ..... ..... .....",
    "_": "..... ..... ..... ..... ..... ..... ..... #####",
    "=": "..... ..... ##### ..... ##### ..... .....",
    "@": ".###. #...# #.### #.#.# #.### #.... .###.",
    ":": "..... .##.. .##.. ..... .##.. .##.. .....",
    "(": "...#. ..#.. .#... .#... .#... ..#.. ...#.",
    ")": ".#... ..#.. ...#. ...#. ...#. ..#.. .#...",
    "/": "....# ....# ...#. ..#.. .#... #.... #....",
    "%": "##..# ##..# ...#. ..#.. .#... #..## #..##",
    "+": "..... ..#.. ..#.. ##### ..#.. ..#.. .....",
    "$": "..#.. .#### #.#.. .###. ..#.# ####. ..#..",
    "#": ".#.#. .#.#. ##### .#.#. ##### .#.#. .#.#.",
    "?": ".###. #...# ....# ...#. ..#.. ..... ..#..",
    "!": "..#.. ..#.. ..#.. ..#.. ..#.. ..... ..#..",
    "[": ".###. .#... .#... .#... .#... .#... .###.",
    "]": ".###. ...#. ...#. ...#. ...#. ...#. .###.",
    "'": "..#.. ..#.. .#... ..... ..... ..... .....",
    '"': ".#.#. .#.#. ..... ..... ..... ..... .....",
    "<": "...#. ..#.. .#... #.... .#... ..#.. ...#.",
    ">": ".#... ..#.. ...#. ....# ...#. ..#.. .#...",
    "*": "..... ..#.. #.#.# .###. #.#.# ..#.. .....",
    "&": ".##.. #..#. #.#.. .#... #.#.# #..#. .##.#",
    "|": "..#.. ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "A": ".###. #...# #...# ##### #...# #...# #...#",
    "B": "####. #...# #...# ####. #...# #...# ####.",
    "C": ".###. #...# #.... #.... #.... #...# .###.",
    "D": "####. #...# #...# #...# #...# #...# ####.",
    "E": "##### #.... #.... ####. #.... #.... #####",
    "F": "##### #.... #.... ####. #.... #.... #....",
    "G": ".###. #...# #.... #.### #...# #...# .####",
    "H": "#...# #...# #...# ##### #...# #...# #...#",
    "I": ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "J": "..### ...#. ...#. ...#. ...#. #..#. .##..",
    "K": "#...# #..#. #.#.. ##... #.#.. #..#. #...#",
    "L": "#.... #.... #.... #.... #.... #.... #####",
    "M": "#...# ##.## #.#.# #.#.# #...# #...# #...#",
    "N": "#...# #...# ##..# #.#.# #..## #...# #...#",
    "O": ".###. #...# #...# #...# #...# #...# .###.",
    "P": "####. #...# #...# ####. #.... #.... #....",
    "Q": ".###. #...# #...# #...# #.#.# #..#. .##.#",
    "R": "####. #...# #...# ####. #.#.. #..#. #...#",
    "S": ".#### #.... #.... .###. ....# ....# ####.",
    "T": "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "U": "#...# #...# #...# #...# #...# #...# .###.",
    "V": "#...# #...# #...# #...# #...# .#.#. ..#..",
    "W": "#...# #...# #...# #.#.# #.#.# #.#.# .#.#.",
    "X": "#...# #...# .#.#. ..#.. .#.#. #...# #...#",
    "Y": "#...# #...# .#.#. ..#.. ..#.. ..#.. ..#..",
    "Z": "##### ....# ...#. ..#.. .#... #.... #####",
    "a": "..... ..... .###. ....# .#### #...# .####",
    "b": "#.... #.... #.##. ##..# #...# #...# ####.",
    "c": "..... ..... .###. #.... #.... #...# .###.",
    "d": "....# ....# .##.# #..## #...# #...# .####",
    "e": "..... ..... .###. #...# ##### #.... .###.",
    "f": "..##. .#..# .#... ###.. .#... .#... .#...",
    "g": "..... ..... .#### #...# #...# .#### ....# .###.",
    "h": "#.... #.... #.##. ##..# #...# #...# #...#",
    "i": "..#.. ..... .##.. ..#.. ..#.. ..#.. .###.",
    "j": "...#. ..... ..##. ...#. ...#. ...#. #..#. .##..",
    "k": "#.... #.... #..#. #.#.. ##... #.#.. #..#.",
    "l": ".##.. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "m": "..... ..... ##.#. #.#.# #.#.# #...# #...#",
    "n": "..... ..... #.##. ##..# #...# #...# #...#",
    "o": "..... ..... .###. #...# #...# #...# .###.",
    "p": "..... ..... ####. #...# #...# ####. #.... #....",
    "q": "..... ..... .##.# #..## #...# .#### ....# ....#",
    "r": "..... ..... #.##. ##..# #.... #.... #....",
    "s": "..... ..... .###. #.... .###. ....# ####.",
    "t": ".#... .#... ###.. .#... .#... .#..# ..##.",
    "u": "..... ..... #...# #...# #...# #..## .##.#",
    "v": "..... ..... #...# #...# #...# .#.#. ..#..",
    "w": "..... ..... #...# #...# #.#.# #.#.# .#.#.",
    "x": "..... ..... #...# .#.#. ..#.. .#.#. #...#",
    "y": "..... ..... #...# #...# #...# .#### ....# .###.",
    "z": "..... ..... ##### ...#. ..#.. .#... #####",
}
_FONT = {ch: [[c == "#" for c in row] for row in rows.split()] for ch, rows in _FONT_ROWS.items()}


class _Canvas:
    """An RGB image drawn in logical pixels, stored ``scale`` x ``_SUPERSAMPLE`` larger."""

    def __init__(self, width: int, height: int, scale: int):
        self.k = scale * _SUPERSAMPLE
        self.scale = scale
        self.pixels = np.full((height * self.k, width * self.k, 3), 255, dtype=np.uint8)

    def rect(self, x0: float, y0: float, x1: float, y1: float, color: tuple) -> None:
        k, (h, w) = self.k, self.pixels.shape[:2]
        a, b = max(0, round(x0 * k)), min(w, round(x1 * k))
        c, d = max(0, round(y0 * k)), min(h, round(y1 * k))
        if a < b and c < d:
            self.pixels[c:d, a:b] = color

    def segment(self, x0: float, y0: float, x1: float, y1: float, width: float, color: tuple) -> None:
        """A straight line with round ends, ``width`` logical pixels wide."""
        k, r = self.k, width / 2
        left, right = int(max(0, (min(x0, x1) - r) * k)), int(min(self.pixels.shape[1], (max(x0, x1) + r) * k + 1))
        top, bottom = int(max(0, (min(y0, y1) - r) * k)), int(min(self.pixels.shape[0], (max(y0, y1) + r) * k + 1))
        if left >= right or top >= bottom:
            return
        ys, xs = np.mgrid[top:bottom, left:right]
        px, py = (xs + 0.5) / k, (ys + 0.5) / k
        dx, dy = x1 - x0, y1 - y0
        t = np.clip(((px - x0) * dx + (py - y0) * dy) / (dx * dx + dy * dy or 1.0), 0.0, 1.0)
        near = (px - x0 - t * dx) ** 2 + (py - y0 - t * dy) ** 2 <= r * r
        self.pixels[top:bottom, left:right][near] = color

    def dashed(self, x0: float, x1: float, y: float, color: tuple, dash: float = 4, gap: float = 3) -> None:
        """A horizontal dashed line, 1 logical pixel wide."""
        x = x0
        while x < x1:
            self.rect(x, y - 0.5, min(x + dash, x1), y + 0.5, color)
            x += dash + gap

    def disc(self, cx: float, cy: float, r: float, color: tuple) -> None:
        """A filled circle."""
        self.segment(cx, cy, cx, cy, 2 * r, color)

    def text(
        self,
        x: float,
        baseline: float,
        text: str,
        color: tuple,
        anchor: str = "start",
        size: float = 1.0,
        bold: bool = False,
    ) -> None:
        """``text`` in the 5x7 font, ``size`` logical pixels per font pixel; ``anchor`` as in SVG."""
        advance = 6 * size
        width = advance * len(text) - size
        x -= {"start": 0, "middle": width / 2, "end": width}[anchor]
        top = baseline - 7 * size
        for i, ch in enumerate(text):
            for r, row in enumerate(_FONT.get(ch, _FONT["?"])):
                for c, on in enumerate(row):
                    if on:
                        gx, gy = x + i * advance + c * size, top + r * size
                        self.rect(gx, gy, gx + size + (0.5 * size if bold else 0), gy + size, color)

    def png(self) -> bytes:
        """The image averaged down to ``scale`` x its logical size, as PNG bytes."""
        s = _SUPERSAMPLE
        total = np.zeros(self.pixels[::s, ::s].shape, dtype=np.uint16)
        for i in range(s):
            for j in range(s):
                total += self.pixels[i::s, j::s]
        return encode_png(((total + s * s // 2) // (s * s)).astype(np.uint8))


def encode_png(rgb: np.ndarray) -> bytes:
    """An 8-bit RGB image (height x width x 3 uint8) as PNG bytes (no filter, zlib level 9)."""
    h, w = rgb.shape[:2]
    raw = np.concatenate([np.zeros((h, 1), dtype=np.uint8), rgb.reshape(h, w * 3)], axis=1).tobytes()

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def line_chart_png(
    title: str,
    points: Sequence[tuple[str, float | None, int, int]],
    levels: tuple[float, float] | None = None,
    *,
    width: int = 360,
    height: int = 170,
    scale: int = 2,
) -> bytes:
    """A PNG line chart of values in [0, 1]: ``points`` are (``"param=value"`` label, mean,
    count, errors) as :func:`ragmeter.dashboard.sweeps.main_effect` gives them (a point without
    a mean breaks the line), ``levels`` the (pass, warn) levels drawn dashed and colouring the
    points (green pass, amber warn, red fail; blue without levels). The image is ``width`` x
    ``height`` logical pixels times ``scale``; same layout as the SVG chart."""
    left, right, top, bottom = 30, 10, 10, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(points)
    canvas = _Canvas(width, height, scale)

    def x(i: int) -> float:
        return left + (plot_w / 2 if n == 1 else plot_w * i / (n - 1))

    def y(v: float) -> float:
        return top + plot_h * (1 - v)

    for v in (0.0, 0.5, 1.0):
        canvas.rect(left, y(v) - 0.5, width - right, y(v) + 0.5, _GRID)
        canvas.text(left - 4, y(v) + 3, f"{v:g}", _TICK, anchor="end")
    for name, v in zip(("pass", "warn"), levels or ()):
        canvas.dashed(left, width - right, y(v), _LABEL[name])
    previous = None
    for i, (_, mean, _, _) in enumerate(points):
        if mean is not None and previous is not None:
            canvas.segment(x(previous[0]), y(previous[1]), x(i), y(mean), 2.0, _LINE)
        previous = (i, mean) if mean is not None else None
    for i, (_, mean, _, _) in enumerate(points):
        if mean is not None:
            canvas.disc(x(i), y(mean), 4.25, _WHITE)
            canvas.disc(x(i), y(mean), 2.75, _LABEL[label_for(mean, *levels)] if levels else _LINE)
    for i, (label, *_) in enumerate(points):
        anchor = "middle" if n == 1 or 0 < i < n - 1 else ("start" if i == 0 else "end")
        canvas.text(x(i), height - 12, label.split("=", 1)[-1][:18], _TICK, anchor=anchor)
    canvas.text(width / 2, height - 2, title, _TITLE, anchor="middle", bold=True)
    return canvas.png()
