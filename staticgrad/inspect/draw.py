"""Showing a ``staticgrad.inspect.AutogradGraph``: as an indented text tree, and as a picture of layered
boxes (root on top, gradients flowing down) coloured by what each node's saved buffers are
doing. The picture uses matplotlib's Agg canvas directly, so it never touches pyplot or the
user's chosen backend, and needs no graphviz."""

from __future__ import annotations

# Box colours: what a node's saved tensors are doing right now, with the legend's words.
HELD_GRAPH_ONLY = "#f4a259"  # holds memory nobody else uses: backward (or dropping the graph) frees it
HELD_SHARED = "#f7d488"      # holds storage a user tensor also uses
FREED = "#d9d9d9"            # everything it saved was freed by backward
NOTHING_SAVED = "#ffffff"
LEAF = "#bcd6ec"             # AccumulateGrad: writes a leaf's .grad
LEGEND = ((HELD_GRAPH_ONLY, "holds graph-only memory"), (HELD_SHARED, "holds storage shared with user tensors"),
          (FREED, "saved tensors freed"), (NOTHING_SAVED, "saves no tensor"), (LEAF, "leaf (AccumulateGrad)"))


def tree_lines(g) -> list:
    """The graph as an indented tree; a node reached twice is labelled and printed once."""
    parents = {}
    for n in g.nodes:
        for target, _ in n.inputs:
            if target is not None:
                parents[target] = parents.get(target, 0) + 1
    for r in g.roots:
        parents[r] = parents.get(r, 0) + 1
    labelled = {i for i, count in parents.items() if count > 1}
    lines, printed = [], set()
    stack = [(r, None, "", "") for r in reversed(g.roots)]
    while stack:
        index, output_nr, first, rest = stack.pop()
        if index is None:
            lines.append(first + "None")
            continue
        node = g.nodes[index]
        label = f"[{index}] " if index in labelled else ""
        which = f" (output {output_nr})" if node.n_outputs > 1 and output_nr is not None else ""
        if index in printed:
            lines.append(f"{first}{label}{node.name}{which} (shown above)")
            continue
        printed.add(index)
        lines.append(f"{first}{label}{node.header()}{which}")
        body = rest + ("│  " if node.inputs else "   ")
        lines.extend(body + b.describe() for b in node.saved if b.is_tensor)
        for k in reversed(range(len(node.inputs))):
            target, nr = node.inputs[k]
            last = k == len(node.inputs) - 1
            stack.append((target, nr, rest + ("└─ " if last else "├─ "), rest + ("   " if last else "│  ")))
    return [line.rstrip() for line in lines]


def layers(g) -> list:
    """Node indices by layer: a node sits one below the lowest node that feeds it a gradient."""
    import networkx as nx  # networkx (0.1-0.2 s to import) loads only when a picture is drawn, not with staticgrad

    simple = nx.DiGraph(g.to_networkx())
    return [sorted(layer) for layer in nx.topological_generations(simple)]


def box_colour(node) -> str:
    if node.leaf_shape is not None:
        return LEAF
    tensors = [b for b in node.saved if b.is_tensor]
    if not tensors:
        return NOTHING_SAVED
    held = [b for b in tensors if b.held]
    if not held:
        return FREED
    return HELD_GRAPH_ONLY if any(not b.shared for b in held) else HELD_SHARED


def box_text(node) -> str:
    if node.leaf_shape is not None:
        return node.header()
    lines = [node.name]
    for b in node.saved:
        if b.is_tensor:
            state = "freed" if b.freed else ("held, shared" if b.shared else "held")
            lines.append(f"{b.name} {b.dtype}{list(b.shape) if b.shape is not None else '?'} {b.nbytes} B {state}")
    return "\n".join(lines)


def draw(g, path, dpi: int = 110) -> None:
    """Write the picture of ``g`` to ``path`` (the format follows the file name, PNG by default)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # matplotlib loads only when a picture is drawn
    from matplotlib.figure import Figure  # matplotlib loads only when a picture is drawn
    from matplotlib.patches import Patch  # matplotlib loads only when a picture is drawn

    rows = layers(g) if g.nodes else []
    width = max([len(r) for r in rows] + [1])
    fig = Figure(figsize=(max(5.0, 3.2 * width), max(2.5, 1.5 * len(rows) + 1.2)))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0.08, 1, 0.84))
    fig.legend([Patch(fc=colour, ec="#555555") for colour, _ in LEGEND], [text for _, text in LEGEND],
               loc="lower center", ncol=3, fontsize=7, frameon=False)
    ax.set_xlim(-0.5, width - 0.5)
    ax.set_ylim(-max(len(rows), 1) + 0.5, 0.5)
    ax.axis("off")
    fig.suptitle(g.summary() if g.nodes else str(g), fontsize=8)

    boxes = {}
    for depth, row in enumerate(rows):
        offset = (width - len(row)) / 2
        for k, index in enumerate(row):
            node = g.nodes[index]
            boxes[index] = ax.text(offset + k, -depth, box_text(node), ha="center", va="center", fontsize=7,
                                   family="monospace", bbox=dict(boxstyle="round,pad=0.4", fc=box_colour(node),
                                                                 ec="#555555"))
    for node in g.nodes:
        for target, _ in node.inputs:
            if target is not None:
                ax.annotate("", xy=(0.5, 1.0), xycoords=boxes[target], xytext=(0.5, 0.0),
                            textcoords=boxes[node.index],
                            arrowprops=dict(arrowstyle="-|>", color="#555555", lw=0.8))
    fig.savefig(path, dpi=dpi)
