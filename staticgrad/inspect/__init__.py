"""What a graph holds and what a plan does, as tables, networkx graphs and pictures.

``graph(*tensors)`` snapshots the autograd graph behind tensors (``autograd_graph``); a compiled
function's ``plans`` describe, draw and render their buffer plans (``plan_report``, ``draw``).
"""

from staticgrad.inspect.autograd_graph import AutogradGraph, GraphNode, SavedBuffer, graph

__all__ = ["AutogradGraph", "GraphNode", "SavedBuffer", "graph"]
