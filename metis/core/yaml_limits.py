"""Limits on the YAML metis loads, so a hostile config file is an error, not a crash.

Two kinds of file do harm before any schema sees them. Nesting: libyaml's composer recurses
once per level and crashes the interpreter (a segfault, not an exception) somewhere past ten
thousand levels, so :func:`unsafe_text` bounds the nesting from the text itself, before the
parser runs. Aliases: ``&a [*b, *b, ...]`` chains ("billion laughs") build a small graph whose
expansion is exponential, harmless to load and ruinous to validate, copy or dump, so
:func:`unsafe_graph` counts the expanded size of the composed graph (without expanding it)
and refuses one over ``MAX_NODES``, or nested deeper than ``MAX_DEPTH``, or referring to
itself.
"""

from __future__ import annotations

import re

import yaml

MAX_DEPTH = 100
"""The deepest nesting of mappings and sequences accepted."""
MAX_NODES = 200_000
"""The most nodes a document may hold once every alias is expanded."""
MAX_INDENT = 1_000
"""A line whose content starts further right than this column is refused (block nesting)."""

_QUOTED = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\n]|'')*'")
_COMMENT = re.compile(r"(?:^|\s)#[^\n]*")
_BLOCK_PREFIX = re.compile(r"^[ \t\-?:]*", re.MULTILINE)
_FLOW = re.compile(r"[\[\]{}]")


def unsafe_text(text: str) -> str | None:
    """Why ``text`` must not reach the parser (nesting too deep for it), or None."""
    if "\0" in text:
        return "the file holds NUL bytes: it is not a text file"
    widest = max((len(m.group()) for m in _BLOCK_PREFIX.finditer(text)), default=0)
    if widest > MAX_INDENT:
        return f"a line is indented more than {MAX_INDENT} columns"
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return None
    depth = 0
    for match in _FLOW.finditer(_COMMENT.sub("", _QUOTED.sub('""', text))):
        if match.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return f"collections nested deeper than {MAX_DEPTH} levels"
        else:
            depth = max(0, depth - 1)
    return None


def unsafe_graph(root: yaml.Node) -> str | None:
    """Why the composed document must not be constructed (aliases expanding past
    ``MAX_NODES``, nesting past ``MAX_DEPTH``, an alias inside itself), or None."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 0, False)]
    while stack:
        node, depth, finished = stack.pop()
        key = id(node)
        children = _children(node)
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[key] > MAX_NODES:
                return f"aliases expand to more than {MAX_NODES:,} nodes"
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            return "an alias refers to a collection that contains it"
        if depth > MAX_DEPTH:
            return f"collections nested deeper than {MAX_DEPTH} levels"
        open_nodes.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in children)
    return None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
