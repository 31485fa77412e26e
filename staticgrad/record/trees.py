"""A call's outputs as a flat list of leaves and the tree that rebuilds them (lists, tuples,
named tuples, dicts): what a plan records of a function's return value and replays into."""

from __future__ import annotations

from staticgrad._eager.tensor import Tensor


def flatten_outputs(out):
    """Outputs as a flat list of leaves and a tree to rebuild them from."""
    flat = []

    def walk(obj):
        if isinstance(obj, (list, tuple)) and not isinstance(obj, Tensor):
            items = [walk(x) for x in obj]
            if hasattr(obj, "_fields"):
                return ("namedtuple", type(obj), items)
            return (type(obj), items)
        if isinstance(obj, dict):
            return (dict, [(k, walk(v)) for k, v in obj.items()])
        flat.append(obj)
        return len(flat) - 1

    return flat, walk(out)


def rebuild_outputs(tree, leaves):
    """The return value ``flatten_outputs`` took apart, with ``leaves`` in its places."""
    if isinstance(tree, int):
        return leaves[tree]
    kind = tree[0]
    if kind == "namedtuple":
        return tree[1](*[rebuild_outputs(t, leaves) for t in tree[2]])
    if kind is dict:
        return {k: rebuild_outputs(t, leaves) for k, t in tree[1]}
    return kind(rebuild_outputs(t, leaves) for t in tree[1])
