"""Placement: which tensors share memory with which (views), decided before lowering.

Each activation of a subgraph is either a *root* (its own buffer) or a *view*
of another tensor: a transform from the parent's region to its own
(:class:`accel.compiler.tensors.Region`).  Ops from the op table declare the
views they want through their ``place`` hook:

* **aliases** (Flatten, Reshape, Identity, ...): the output is the input's
  bytes under another host shape - :meth:`Placement.alias`;
* **slices** (Split/Slice): an output is a part of its input - :meth:`view`;
* **nesting** (Concat, channel Pad): an input is written straight into its
  slot of the output - :meth:`nest`, which only succeeds when the input's
  producer can write there: the input (or the tensor it aliases) is a root
  produced inside the subgraph, not a subgraph input or output, not already
  nested elsewhere.  A failed nest leaves the op to copy the input.

Subgraph inputs and outputs are roots of their own bound memories; an output
never becomes a view (an alias of an output turns around: the input becomes
the view).  Hooks run in two passes, aliases and slices in graph order, then
nesting in reverse order, so that a concat nested in a later concat moves its
whole chain.
"""

from __future__ import annotations

from collections.abc import Callable

from accel.compiler.tensors import Region

Transform = Callable[[Region], Region]


def identity(region: Region) -> Region:
    return region


class Placement:
    """Parent links between the activations of one subgraph."""

    def __init__(self, inputs: list[str], outputs: list[str], produced: set[str]) -> None:
        self.inputs = set(inputs)
        self.outputs = set(outputs)
        self.produced = produced
        self.parent: dict[str, tuple[str, Transform, bool]] = {}   # t -> (parent, f, is_alias)
        self.cubes: dict[str, tuple[int, int, int]] = {}           # overrides (alias outputs)
        self.nested: set[str] = set()

    # -------------------------------------------------------------- queries
    def root(self, t: str) -> str:
        while t in self.parent:
            t = self.parent[t][0]
        return t

    def chain(self, t: str) -> list[tuple[str, Transform]]:
        """Transforms from the root down to ``t`` (root first)."""
        steps = []
        while t in self.parent:
            p, f, _ = self.parent[t]
            steps.append((p, f))
            t = p
        return steps[::-1]

    def resolve(self, t: str, root_region: Callable[[str], Region]) -> Region:
        region = root_region(self.root(t))
        for _, f in self.chain(t):
            region = f(region)
        return region

    def _pure_alias_root(self, t: str) -> str | None:
        """The root ``t`` is an alias of (identity transforms only), or None."""
        while t in self.parent:
            p, _, is_alias = self.parent[t]
            if not is_alias:
                return None
            t = p
        return t

    def _movable(self, t: str) -> bool:
        return (t in self.produced and t not in self.inputs and t not in self.outputs
                and t not in self.parent and t not in self.nested)

    # -------------------------------------------------------------- hooks
    def alias(self, out: str, src: str, cube: tuple[int, int, int]) -> bool:
        """``out`` holds the bytes of ``src`` (same cube ``cube``) under another host shape.

        False when ``out`` is a subgraph output that cannot take ``src``'s place
        (``src`` is an input, an output or already placed): the op copies it.
        """
        self.cubes[out] = cube
        if out not in self.outputs:
            self.parent[out] = (src, identity, True)
            return True
        root = self._pure_alias_root(src)
        if root is not None and self._movable(root):
            self.parent[root] = (out, identity, True)
            return True
        return False

    def view(self, out: str, src: str, transform: Transform) -> bool:
        """``out`` is part of ``src``; False when ``out`` must be a buffer of its own."""
        if out in self.outputs:
            return False
        self.parent[out] = (src, transform, False)
        return True

    def nest(self, child: str, parent: str, transform: Transform) -> bool:
        """Write ``child`` straight into its part of ``parent``; False: the op copies it."""
        root = self._pure_alias_root(child)
        if root is None or not self._movable(root):
            return False
        # no cycles: the parent must not live inside the child
        if self.root(parent) == root:
            return False
        self.parent[root] = (parent, transform, False)
        self.nested.add(root)
        return True
