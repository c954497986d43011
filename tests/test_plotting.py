"""Labels of the accuracy-versus-MAE plot never overlap, even where multipliers cluster."""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from approxmul_cffi.plotting import _overlap, label_points  # noqa: E402


@pytest.mark.parametrize("count", [3, 8, 15])
def test_clustered_labels_do_not_overlap(count):
    # what `approxmul evaluate` plots: many multipliers near MAE 0 at ~97 %, a few far out
    points = [(0.0005 * i, 97.0 - 0.02 * i) for i in range(count)] + [(2.0, 80.0), (6.0, 20.0)]
    labels = [f"drum:bits=8,k={i}" for i in range(count)] + ["mitchell", "truncated:cut=12"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.scatter(*zip(*points))
    fig.tight_layout()
    notes = label_points(ax, points, labels)
    fig.canvas.draw()
    boxes = [Text.get_window_extent(n) for n in notes]
    frame = ax.get_window_extent()
    assert sorted(n.get_text() for n in notes) == sorted(labels)
    for i, a in enumerate(boxes):
        assert frame.x0 <= a.x0 and a.x1 <= frame.x1 and frame.y0 <= a.y0 and a.y1 <= frame.y1
        for b in boxes[i + 1:]:
            assert not _overlap(a, b, 0), (a, b)
    plt.close(fig)
