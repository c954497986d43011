"""Plot helpers shared by the figures (matplotlib is imported by the callers)."""

from collections import namedtuple

Box = namedtuple("Box", "x0 y0 x1 y1")


def _overlap(a, b, pad=1.0):
    return not (a.x1 + pad <= b.x0 or b.x1 + pad <= a.x0 or a.y1 + pad <= b.y0 or
                b.y1 + pad <= a.y0)


def _candidates(fontsize):
    """Label offsets in points, nearest first: beside the point, then stacked above and below."""
    step = fontsize + 3
    offsets = [(dx, dy * step / 2) for dx in (4, -4, 28, -28, 56, -56, 100, -100, 150, -150)
               for dy in range(-60, 61)]
    return sorted(offsets, key=lambda o: (abs(o[0]) / 2 + abs(o[1]), o[1] < 0, o[0] < 0))


def label_points(ax, points, labels, fontsize=7):
    """Annotate ``points`` with ``labels`` so that no two labels overlap.

    Multipliers cluster near MAE 0 with similar accuracy, so labels written
    at a fixed offset pile up. Each label (left to right) takes the nearest
    position around its point, stacking above and below with a leader line
    when needed, that overlaps no label placed before it, covers no other
    marker and stays inside the axes. Call it once the axes' limits and
    layout are final. Returns the matplotlib annotations.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> points = [(0.0, 97.0), (0.001, 97.0), (0.002, 96.9), (0.0, 96.95), (5.0, 50.0)]
    >>> _ = ax.scatter(*zip(*points))
    >>> notes = label_points(ax, points, ["exact", "drum:k=6", "mitchell", "a", "truncated"])
    >>> fig.canvas.draw()
    >>> from matplotlib.text import Text  # the text alone, without the leader line
    >>> boxes = [Text.get_window_extent(n) for n in notes]
    >>> any(_overlap(a, b, 0) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    False
    >>> plt.close(fig)
    """
    figure = ax.figure
    ax.get_xlim(), ax.get_ylim()  # applies pending autoscaling: data -> pixels is final
    renderer = figure.canvas.get_renderer()
    scale = figure.dpi / 72.0  # points -> pixels
    frame = ax.get_window_extent(renderer)
    pixels = [tuple(ax.transData.transform(p)) for p in points]
    placed, notes = [], []
    for index in sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1])):
        probe = ax.text(0, 0, labels[index], fontsize=fontsize)
        extent = probe.get_window_extent(renderer)
        probe.remove()
        width, height = extent.width, extent.height
        x, y = pixels[index]
        chosen = None
        for dx, dy in _candidates(fontsize):
            left = x + dx * scale if dx > 0 else x + dx * scale - width
            bottom = y + dy * scale if dy >= 0 else y + dy * scale - height
            box = Box(left, bottom, left + width, bottom + height)
            inside = (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
                      and box.y1 <= frame.y1)
            covers = any(box.x0 - 3 <= mx <= box.x1 + 3 and box.y0 - 3 <= my <= box.y1 + 3
                         for k, (mx, my) in enumerate(pixels) if k != index)
            if inside and not covers and not any(_overlap(box, other) for other in placed):
                chosen = (dx, dy, box)
                break
        if chosen is None:  # nowhere free (hundreds of labels): beside the point
            chosen = (4, 3, None)
        dx, dy, box = chosen
        leader = abs(dy) > fontsize or abs(dx) > 4
        note = ax.annotate(labels[index], points[index], xytext=(dx, dy),
                           textcoords="offset points", fontsize=fontsize,
                           ha="left" if dx > 0 else "right", va="bottom" if dy >= 0 else "top",
                           annotation_clip=False,
                           arrowprops=dict(arrowstyle="-", color="0.6", lw=0.5) if leader
                           else None)
        if box is not None:
            placed.append(box)
        notes.append(note)
    return notes
