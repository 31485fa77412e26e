"""torch.einsum as PyTorch computes it, from ops already in the table (diagonal, permute, sum, mul,
bmm, views): so it records, replays and differentiates like any composite.

Each operand takes the diagonal of its repeated labels and is permuted into one shared label order
(output labels, then contracted ones; absent labels as size-1 dims); operands then combine left to
right, a product when the pair shares no label to contract, else one bmm.
"""

from __future__ import annotations

import numpy as np

from staticgrad._eager import functions as fn
from staticgrad._eager.dispatch import dispatch
from staticgrad._eager.tensor import Tensor
from staticgrad.ops import OPS

_ELLIPSIS = "..."


def _parse_term(term: str, position: int) -> list:
    """A term's labels in order, with "..." standing for the ellipsis; checks the characters."""
    labels, i = [], 0
    while i < len(term):
        if term.startswith(_ELLIPSIS, i):
            if _ELLIPSIS in labels:
                raise RuntimeError("einsum(): found '.' for operand that is not part of any ellipsis")
            labels.append(_ELLIPSIS)
            i += 3
            continue
        ch = term[i]
        if not ch.isascii() or not ch.isalpha():
            raise RuntimeError(f"einsum(): invalid subscript given at index {position + i} in the equation string, "
                               "subscripts must be in [a-zA-Z]")
        labels.append(ch)
        i += 1
    return labels


def _operand_labels(labels: list, ndim: int, index: int, ellipsis_dims: int) -> list:
    """Labels of each dim of an operand; ellipsis dims get the names "0".."k-1" (right-aligned)."""
    named = [lab for lab in labels if lab != _ELLIPSIS]
    if _ELLIPSIS not in labels:
        if len(named) != ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(named)}) does not match the "
                               f"number of dimensions ({ndim}) for operand {index} and no ellipsis was given")
        return named
    if len(named) > ndim:
        raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(named)}) is more than the "
                           f"number of dimensions ({ndim}) for operand {index}")
    mine = ndim - len(named)
    out = []
    for lab in labels:
        out.extend(str(k) for k in range(ellipsis_dims - mine, ellipsis_dims)) if lab == _ELLIPSIS else out.append(lab)
    return out


def _take_diagonals(t: Tensor, labels: list, index: int):
    """Collapse each repeated label of one operand onto its diagonal (moved last, as diagonal does)."""
    labels = list(labels)
    while True:
        repeated = next((lab for lab in labels if labels.count(lab) > 1), None)
        if repeated is None:
            return t, labels
        first = labels.index(repeated)
        second = labels.index(repeated, first + 1)
        a, b = t._data.shape[first], t._data.shape[second]
        if a != b:
            raise RuntimeError(f"einsum(): subscript {repeated} is repeated for operand {index} but the sizes don't "
                               f"match, {b} != {a}")
        t = dispatch(OPS["diagonal"], (t,), {"offset": 0, "dim1": first, "dim2": second})
        labels = [lab for k, lab in enumerate(labels) if k not in (first, second)] + [repeated]


def einsum(equation, *operands):
    """torch.einsum(equation, *operands) (or a list of operands), implicit output and "..." included."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for i, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise TypeError(f"einsum(): operand {i} must be Tensor, not {type(t).__name__}")
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms, position = [], 0
    for term in lhs.split(","):
        terms.append(_parse_term(term, position))
        position += len(term) + 1
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    ellipsis_dims = max((t._data.ndim - (len(labels) - 1) for t, labels in zip(operands, terms)
                         if _ELLIPSIS in labels), default=0)
    ellipsis = [str(k) for k in range(ellipsis_dims)]
    per_operand = [_operand_labels(labels, t._data.ndim, i, ellipsis_dims)
                   for i, (t, labels) in enumerate(zip(operands, terms))]
    output = _output_labels(rhs, arrow, terms, per_operand, ellipsis, lhs)

    sizes: dict = {}
    tensors, labels_of = [], []
    for i, (t, labels) in enumerate(zip(operands, per_operand)):
        t, labels = _take_diagonals(t, labels, i)
        for lab, n in zip(labels, t._data.shape):
            seen = sizes.get(lab)
            if seen is None or seen == 1:
                sizes[lab] = n
            elif n != 1 and n != seen:
                raise RuntimeError(f"einsum(): subscript {lab} has size {n} for operand {i} which does not broadcast "
                                   f"with previously seen size {seen}" if not lab.isdigit() else
                                   "einsum(): operands do not broadcast with remapped shapes (original->remapped)")
        tensors.append(t)
        labels_of.append(labels)

    contracted = [lab for labels in labels_of for lab in labels if lab not in output]
    order = output + sorted(set(contracted), key=contracted.index)
    if len(tensors) == 1:
        return _single(tensors[0], labels_of[0], output, order)
    aligned = [_align(t, labels, order) for t, labels in zip(tensors, labels_of)]
    present = [set(labels) for labels in labels_of]
    result = aligned[0]
    have = set(present[0])
    for k in range(1, len(aligned)):
        later = set(output).union(*present[k + 1:])
        result = _pair(result, aligned[k], order, have, present[k], later)
        have = (have | present[k]) & later
    if len(order) > len(output):
        result = fn.view(result, tuple(result._data.shape[:len(output)]))
    return result


def _output_labels(rhs, arrow, terms, per_operand, ellipsis, lhs) -> list:
    if not arrow:  # implicit: the ellipsis dims, then the labels used once, in alphabetical order
        counts = {}
        for labels in per_operand:
            for lab in labels:
                counts[lab] = counts.get(lab, 0) + 1
        once = sorted(lab for lab, c in counts.items() if c == 1 and not lab.isdigit())
        used = any(_ELLIPSIS in labels for labels in terms)
        return (ellipsis if used else []) + once
    out_terms = _parse_term(rhs, len(lhs) + 2)
    output = []
    everything = {lab for labels in per_operand for lab in labels}
    for lab in out_terms:
        if lab == _ELLIPSIS:
            output.extend(ellipsis)
            continue
        if lab in output:
            raise RuntimeError(f"einsum(): output subscript {lab} appears more than once in the output")
        if lab not in everything:
            raise RuntimeError(f"einsum(): output subscript {lab} does not appear in the equation for any input "
                               "operand")
        output.append(lab)
    return output


def _single(t: Tensor, labels: list, output: list, order: list) -> Tensor:
    """One operand: permuted to the output order (contracted labels last), those summed out."""
    kept = [lab for lab in order if lab in labels]
    t = fn.permute(t, tuple(labels.index(lab) for lab in kept))
    summed = tuple(range(len(output), len(kept)))
    if summed:
        t = fn.sum(t, summed)
    return t


def _align(t: Tensor, labels: list, order: list) -> Tensor:
    """``t`` permuted into ``order`` with a size-1 dim for each label it lacks."""
    kept = [lab for lab in order if lab in labels]
    t = fn.permute(t, tuple(labels.index(lab) for lab in kept))
    shape = tuple(t._data.shape[kept.index(lab)] if lab in labels else 1 for lab in order)
    return fn.view(t, shape) if len(shape) != len(kept) else t


def _pair(a: Tensor, b: Tensor, order: list, in_a: set, in_b: set, later: set) -> Tensor:
    """Combine two aligned operands; labels not needed later are contracted (size 1 afterwards)."""
    positions = range(len(order))
    # labels only one side has and nothing later needs: summed out first
    only_a = tuple(d for d in positions if order[d] in in_a and order[d] not in in_b and order[d] not in later)
    only_b = tuple(d for d in positions if order[d] in in_b and order[d] not in in_a and order[d] not in later)
    if only_a:
        a = fn.sum(a, only_a, keepdim=True)
    if only_b:
        b = fn.sum(b, only_b, keepdim=True)
    shared = [d for d in positions if order[d] in in_a and order[d] in in_b and order[d] not in later]
    for d in shared:  # a label one side broadcasts (size 1): the other side sums it alone
        if a._data.shape[d] == 1 and b._data.shape[d] != 1:
            b = fn.sum(b, (d,), keepdim=True)
        elif b._data.shape[d] == 1 and a._data.shape[d] != 1:
            a = fn.sum(a, (d,), keepdim=True)
    sum_dims = [d for d in shared if a._data.shape[d] != 1]
    if not sum_dims:
        return fn.mul(a, b)
    sa, sb = a._data.shape, b._data.shape
    rest = [d for d in positions if d not in sum_dims]
    batch = [d for d in rest if sa[d] != 1 and sb[d] != 1]
    left = [d for d in rest if sa[d] != 1 and sb[d] == 1]
    right = [d for d in rest if sa[d] == 1 and sb[d] != 1]
    ones = [d for d in rest if sa[d] == 1 and sb[d] == 1]
    size = _size_of
    a3 = fn.reshape(fn.permute(a, tuple(batch + left + sum_dims + right + ones)),
                    (size(sa, batch), size(sa, left), size(sa, sum_dims)))
    b3 = fn.reshape(fn.permute(b, tuple(batch + sum_dims + right + left + ones)),
                    (size(sb, batch), size(sb, sum_dims), size(sb, right)))
    product = fn.bmm(a3, b3)
    laid = batch + left + right
    shape = tuple(sa[d] if d in batch or d in left else sb[d] for d in laid) + (1,) * (len(sum_dims) + len(ones))
    result = fn.view(product, shape)
    where = laid + sum_dims + ones
    return fn.permute(result, tuple(where.index(d) for d in positions))


def _size_of(shape, dims) -> int:
    return int(np.prod([shape[d] for d in dims], dtype=np.int64))
