"""What a plan holds, readable: every buffer with its kind and lifetime, a summary of the arena
against its lower bound and the eager peak, the fused kernels, and a picture of both."""

from __future__ import annotations

from dataclasses import dataclass

from staticgrad.compiler.analysis import alias_roots
from staticgrad.compiler.ir import fused_members

KINDS = ("input", "parameter", "activation", "saved-for-backward", "gradient", "temporary", "optimizer state",
         "constant", "captured")

COLOURS = {"input": "#4c72b0", "parameter": "#8172b2", "activation": "#55a868", "saved-for-backward": "#c44e52",
           "gradient": "#dd8452", "temporary": "#937860", "optimizer state": "#da8bc3", "constant": "#8c8c8c",
           "captured": "#ccb974"}


@dataclass(frozen=True)
class BufferInfo:
    """One buffer of a plan. ``offset`` is its place in the arena; None means it is not in the
    arena (bound by reference, or allocated fresh each call because the caller keeps it)."""

    name: str
    shape: tuple
    dtype: str
    nbytes: int
    kind: str
    producer: str
    first_use: int | None
    last_use: int | None
    offset: int | None
    placement: str  # "arena", "fresh per call", "bound"


def buffers(plan) -> list:
    graph, program = plan.graph, plan.program
    roots = alias_roots(graph)
    producer = {v: (i, op) for i, op in enumerate(graph.ops) for v in op.outputs}
    users = graph.users()
    offsets = {spec.slot: spec.offset for spec in program.buffers}
    written = {target: source for source, target in graph.writebacks}
    rows = []
    for vid in list(graph.inputs) + list(graph.captured):
        value = graph.values[vid]
        role = plan.roles.get(vid, "input" if vid in graph.inputs else "captured")
        reads = users.get(vid, [])
        rows.append(BufferInfo(f"%{vid}", value.shape, value.dtype, value.nbytes, role, "-",
                               min(reads) if reads else None, _last(written.get(vid), producer, reads),
                               None, "bound"))
    for span in sorted(program.buffers, key=lambda spec: spec.first):
        vid = span.slot
        value = graph.values[vid]
        index, op = producer[vid]
        placement = "arena" if offsets.get(vid) is not None else "fresh per call"
        rows.append(BufferInfo(f"%{vid}", value.shape, value.dtype, value.nbytes,
                               _kind(vid, span, graph, plan.roles, users, roots, written), f"{index}:{_op_name(op)}",
                               span.first, span.last, offsets.get(vid), placement))
    return rows


def _last(source, producer, reads):
    if source is not None and source in producer:
        return producer[source][0]
    return max(reads) if reads else None


def _op_name(op) -> str:
    return op.op if op.op != "fused" else "fused(" + "+".join(fused_members(op)) + ")"


def _kind(vid, span, graph, roles, users, roots, written) -> str:
    value = graph.values[vid]
    if value.phase == "backward":
        return "gradient"
    if value.phase == "optimizer":
        target = {source: target for target, source in written.items()}.get(vid)
        role = roles.get(target)
        return role if role in ("parameter", "optimizer state") else "temporary"
    readers = [graph.values[v].phase for i in _alias_users(vid, graph, users, roots)
               for v in graph.ops[i].outputs]
    if "backward" in readers:
        return "saved-for-backward"
    return "temporary" if span.last - span.first <= 1 else "activation"


def _alias_users(vid, graph, users, roots):
    aliases = [v for v, r in roots.items() if r == vid] + [vid]
    return {i for v in aliases for i in users.get(v, ())}


def kernels(plan) -> list:
    """(kernel name, op names it fuses, number of loops) for each fused kernel of the plan."""
    calls = iter(plan.program.kernel_calls)
    rows = []
    for op in plan.graph.ops:
        if op.op == "fused":
            kernel = op.attr_dict["kernel"]
            rows.append((next(calls), fused_members(op), len(kernel.loops)))
    return rows


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def summary(plan) -> str:
    program = plan.program
    arena, bound = program.arena_bytes, program.lower_bound
    ratio = f"{arena / bound:.2f}x" if bound else "-"
    line = f"arena {_size(arena)}, lower bound {_size(bound)} ({ratio})"
    peak = plan.record.eager_peak_bytes
    if peak is not None:
        line += f", eager peak {_size(peak)}"
    return line


def describe(plan) -> str:
    rows = buffers(plan)
    head = ("buffer", "kind", "shape", "dtype", "bytes", "producer", "first", "last", "offset")
    table = [head]
    for b in rows:
        offset = str(b.offset) if b.offset is not None else b.placement
        table.append((b.name, b.kind, "x".join(map(str, b.shape)) or "()", b.dtype, f"{b.nbytes:,}", b.producer,
                      "-" if b.first_use is None else str(b.first_use), "-" if b.last_use is None else str(b.last_use),
                      offset))
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    fused = kernels(plan)
    lines.append("")
    lines.append(f"{len(plan.graph.ops)} ops replayed ({len(plan.record.graph.ops)} recorded), "
                 f"{len(fused)} fused kernel call(s)")
    for name, members, loops in fused:
        lines.append(f"  {name}: {loops} loop(s): {' + '.join(members)}")
    lines.append(summary(plan))
    if plan.backward is not None:
        lines.append(backward_summary(plan))
    return "\n".join(lines)


def backward_summary(plan) -> str:
    """What each call of a compiled model keeps for its backward, and the backward program."""
    b = plan.backward
    saved = b.saved_bytes(plan.graph)
    held = len(b.layout.arg_inputs) + len(b.captured_tensors)
    eager = b.trace.eager_saved_bytes
    against = f" ({saved / eager:.2f}x the {_size(eager)} eager's graph keeps)" if eager else ""
    text = (f"backward: {len(b.graph.ops)} ops, arena {_size(b.program.arena_bytes)}; saved per call: "
            f"{_size(saved)} in arrays of its own{against}, plus {held} argument/captured tensor(s) and views "
            f"of them held by reference; partition {b.partition!r}, {len(b.recomputed)} forward op(s) run again "
            "in the backward instead of saved")
    recorded = [entry for entry in b.graph_plans.values() if hasattr(entry, "replay")]
    if recorded:
        programs = ", ".join(f"{len(entry.replay.program.steps)} steps, arena "
                             f"{_size(entry.replay.program.arena_bytes)}" for entry in recorded)
        stats = b.stats
        text += (f"\nloss backward through it, recorded whole: {len(recorded)} graph structure(s) ({programs}); "
                 f"{stats.backward_replays} replayed, {stats.backward_eager} through the engine"
                 + (f" (latest: {stats.backward_eager_reason})" if stats.backward_eager_reason else ""))
    return text


def render(plan, path: str) -> None:
    """Draw the buffer lifetimes (time across, arena offset up, one rectangle per buffer coloured
    by kind) and the replayed program as a layered graph, side by side, into ``path``."""
    import matplotlib  # matplotlib loads only when a picture is drawn

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # matplotlib loads only when a picture is drawn
    from matplotlib.patches import Patch, Rectangle  # matplotlib loads only when a picture is drawn

    rows = [b for b in buffers(plan) if b.placement == "arena"]
    n_ops = len(plan.graph.ops)
    figure, (chart, picture) = plt.subplots(1, 2, figsize=(16, 7), gridspec_kw={"width_ratios": [3, 2]})
    for b in rows:
        chart.add_patch(Rectangle((b.first_use, b.offset), b.last_use - b.first_use + 1, b.nbytes,
                                  facecolor=COLOURS.get(b.kind, "#999999"), edgecolor="black", linewidth=0.3))
    top = max([b.offset + b.nbytes for b in rows] + [1])
    chart.set_xlim(0, n_ops + 1)
    chart.set_ylim(0, top * 1.05)
    chart.set_xlabel("step of the replay schedule")
    chart.set_ylabel("arena offset (bytes)")
    chart.set_title(summary(plan))
    kinds = sorted({b.kind for b in rows}, key=KINDS.index)
    chart.legend(handles=[Patch(color=COLOURS[k], label=k) for k in kinds], loc="upper right", fontsize=8)
    _draw_program(plan, picture)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _draw_program(plan, axes) -> None:
    import networkx as nx  # networkx (0.2 s to import) loads only when a networkx graph is asked for

    graph = plan.graph.to_networkx()
    ops = [n for n, d in graph.nodes(data=True) if d["kind"] == "op"]
    program = nx.DiGraph()
    for node in ops:
        program.add_node(node, label=graph.nodes[node]["op"] if graph.nodes[node]["op"] != "fused"
                         else "fused\n" + "+".join(graph.nodes[node]["members"][:3]))
    for value in (n for n, d in graph.nodes(data=True) if d["kind"] == "value"):
        for producer in graph.predecessors(value):
            for consumer in graph.successors(value):
                program.add_edge(producer, consumer)
    for layer, nodes in enumerate(nx.topological_generations(program)):
        for node in nodes:
            program.nodes[node]["layer"] = layer
    positions = nx.multipartite_layout(program, subset_key="layer", align="horizontal")
    positions = {node: (x, -y) for node, (x, y) in positions.items()}
    nx.draw_networkx_edges(program, positions, ax=axes, arrowsize=6, width=0.4, edge_color="#888888")
    nx.draw_networkx_nodes(program, positions, ax=axes, node_size=30, node_color="#4c72b0")
    labels = {n: d["label"] for n, d in program.nodes(data=True)}
    nx.draw_networkx_labels(program, positions, labels, ax=axes, font_size=5)
    axes.set_title(f"replayed program: {len(ops)} ops")
    axes.axis("off")
