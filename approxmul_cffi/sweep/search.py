"""Per-layer assignment search on top of a sensitivity table.

The model of accuracy is additive: an assignment's estimated drop is the sum
over layers of the drop that layer's multiplier causes alone (negative drops
count as 0). Cost is exact: the sum over layers of MACs x the multiplier's
cost. :func:`beam_search` lists cheap assignments whose estimate fits a
limit; the driver then evaluates them for real, cheapest first, and keeps the
cheapest whose measured drop fits the budget (docs/sweep.md).
"""

from __future__ import annotations

import heapq
import itertools

__all__ = ["assignment_cost", "beam_search", "exhaustive", "neighbours", "pareto_options"]


def assignment_cost(assignment, macs, cost):
    """MAC-weighted mean cost per multiply of {layer: multiplier name}.

    >>> assignment_cost({"a": "x", "b": "y"}, {"a": 3, "b": 1}, {"x": 1.0, "y": 5.0})
    2.0
    """
    total = sum(macs[layer] for layer in assignment)
    return sum(macs[layer] * cost[name] for layer, name in assignment.items()) / total


def pareto_options(options):
    """Options [(cost, drop, name)] no other option beats, cheapest first.

    An option is beaten by another that costs no more and has a smaller
    estimated drop. Options tied on the drop are all kept: a tie (often 0,
    the sensitivity table's resolution) does not tell which one keeps the
    network more accurate together with the other layers' errors, and the
    dearer one (exact, say) may be what a fitting assignment needs.

    >>> pareto_options([(1, 5, "a"), (2, 1, "b"), (3, 2, "c"), (4, 0, "d")])
    [(1, 5, 'a'), (2, 1, 'b'), (4, 0, 'd')]
    >>> pareto_options([(1.0, 0, "exact"), (0.33, 0, "drum"), (0.33, 2, "other")])
    [(0.33, 0, 'drum'), (1.0, 0, 'exact')]
    """
    ordered = sorted(options)
    front, best, i = [], float("inf"), 0
    while i < len(ordered):  # options of one cost together: the cheapest drop among them counts
        j = i
        while j < len(ordered) and ordered[j][0] == ordered[i][0]:
            j += 1
        best = min(best, min(drop for _, drop, _ in ordered[i:j]))
        front.extend(option for option in ordered[i:j] if option[1] <= best)
        i = j
    return front


def beam_search(drops, macs, cost, limit, *, width=64):
    """Full assignments with estimated drop <= limit, cheapest first (at most ``width``).

    drops: {layer: {multiplier name: drop in points when alone in that layer}};
    macs: {layer: MACs}; cost: {name: cost}. Layers are visited by MACs,
    largest first; each step keeps the ``width`` partial assignments of
    lowest cost-so-far plus the cheapest possible rest. Beaten options of a
    layer (no cheaper than another and estimated less accurate,
    :func:`pareto_options`) are never tried.
    Returns [(mean cost per MAC, estimated drop, {layer: name})].

    >>> drops = {"a": {"exact": 0, "m": 0.6}, "b": {"exact": 0, "m": 0.6}}
    >>> [a for _, _, a in beam_search(drops, {"a": 2, "b": 1}, {"exact": 1, "m": 0.5}, 1.0)]
    [{'a': 'm', 'b': 'exact'}, {'a': 'exact', 'b': 'm'}, {'a': 'exact', 'b': 'exact'}]
    """
    layers = sorted(drops, key=lambda layer: (-macs[layer], layer))
    options = {layer: pareto_options([(macs[layer] * cost[n], max(d, 0.0), n)
                                      for n, d in drops[layer].items() if max(d, 0.0) <= limit])
               for layer in layers}
    cheapest_rest = [0.0] * (len(layers) + 1)
    for i in range(len(layers) - 1, -1, -1):
        if not options[layers[i]]:
            return []
        cheapest_rest[i] = cheapest_rest[i + 1] + options[layers[i]][0][0]
    beam = [(0.0, 0.0, ())]
    for i, layer in enumerate(layers):
        grown = [(c + oc, d + od, choice + (name,))
                 for c, d, choice in beam for oc, od, name in options[layer] if d + od <= limit]
        beam = heapq.nsmallest(width, grown, key=lambda s: (s[0] + cheapest_rest[i + 1], s[1]))
    total = sum(macs[layer] for layer in layers)
    return sorted(((c / total, d, dict(zip(layers, choice))) for c, d, choice in beam),
                  key=lambda s: (s[0], s[1]))


def exhaustive(layers, names):
    """Every assignment of ``names`` to ``layers`` (len(names) ** len(layers) of them).

    >>> len(list(exhaustive(["a", "b"], ["x", "y", "z"])))
    9
    """
    for choice in itertools.product(names, repeat=len(layers)):
        yield dict(zip(layers, choice))


def neighbours(assignment, names, macs, cost, *, max_count=200_000):
    """Assignments one or two layers away that cost less, cheapest first.

    Two-layer changes are left out when there would be over ``max_count``.

    >>> n = neighbours({"a": "x", "b": "x"}, ["x", "y"], {"a": 2, "b": 1}, {"x": 1, "y": 0.5})
    >>> [(round(c, 3), sorted(a.values())) for c, a in [(assignment_cost(a, {"a": 2, "b": 1},
    ...     {"x": 1, "y": 0.5}), a) for a in n]]
    [(0.5, ['y', 'y']), (0.667, ['x', 'y']), (0.833, ['x', 'y'])]
    """
    layers = list(assignment)
    current = assignment_cost(assignment, macs, cost)
    pairs = len(layers) * (len(layers) - 1) // 2 * len(names) ** 2
    depth = 2 if pairs <= max_count else 1
    out = {}
    for k in range(1, min(depth, len(layers)) + 1):
        for chosen in itertools.combinations(layers, k):
            for choice in itertools.product(names, repeat=k):
                if any(assignment[l] == n for l, n in zip(chosen, choice)):
                    continue
                new = dict(assignment)
                new.update(zip(chosen, choice))
                c = assignment_cost(new, macs, cost)
                if c < current - 1e-12:
                    out[tuple(new.items())] = (c, new)
    return [a for _, a in sorted(out.values(), key=lambda v: v[0])]
