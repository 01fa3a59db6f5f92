"""Backward data-flow slices over an app's JavaScript statements.

A slice answers "which statements can have made the value this statement uses": within a
function, the statements that define a variable the slice uses (scopes resolved, from the
graph's ``var_refs``) and the heads of the compound statements (``if (...)``, ``for (...)``)
that decide whether a sliced statement runs, and the ``return`` and ``throw`` statements
before it in its function (which end it first when they run); across functions, the
``return`` statements of the functions a sliced statement calls, the call sites of a
function whose parameter the slice uses, and the statements elsewhere that write a global or
captured variable the slice uses. An ``allowed`` predicate keeps the functions that can be
on the path (those that ran).

Each statement owns the references and calls that no inner statement of the same function
holds: a callback's body counts for the statement that passes the callback (the statement
runs it or registers it), and the parts of a ``for (...)`` head count for the loop.
Everything is static and approximate: no aliasing, no property-level flow beyond a write's
root variable (the methods of a class share their ``this`` as one such root).
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from typing import Callable

from evaluators.localize.model import Span

_HEAD = re.compile(r"(?:if|for|while|switch|with)\s*(?:await\s*)?\(")
_KEYWORD = re.compile(r"(?:else|try|do|finally)\b")
_DECLARATION = re.compile(r"(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function|class)\b")
_PLAIN_WRITE = re.compile(r"\s*\)*\s*=(?!=)")
_FOLLOWED = frozenset(("var", "let", "const", "implicit", "param", "catch", "this"))


@dataclasses.dataclass
class FlowStatement:
    """One JavaScript statement with what it reads, writes and calls.

    Attributes:
        span: The statement. head: what a slice blames: the statement, or for a compound
            statement the part before its body (``for (let i = 0; i < n; i++)``).
        function: Index of the function whose body holds it; None at the top level.
        parent: Index of the innermost compound statement of the same function around it.
        defs, uses: Indices of the variables it writes (or declares) and reads.
        calls: Indices of the functions it calls.
        returns: A ``return`` statement.
    """

    span: Span
    head: Span
    function: int | None
    parent: int | None
    defs: set[int]
    uses: set[int]
    calls: set[int]
    returns: bool


class Flow:
    """Statement-level def/use facts of one graph, and slices over them.

    Args:
        g: The code graph (``graph.CodeGraph``).
    """

    def __init__(self, g):
        self.g = g
        spans = sorted(set(g.statements), key=lambda s: (s[0], -s[1]))
        self._starts = [s for s, _ in spans]
        self.statements: list[FlowStatement] = []
        self._outer: list[int | None] = []  # enclosing statement of any function
        stack: list[int] = []
        for k, (s, e) in enumerate(spans):
            while stack and spans[stack[-1]][1] < e:
                stack.pop()
            self._outer.append(stack[-1] if stack else None)
            stack.append(k)
            self.statements.append(FlowStatement((s, e), (s, e), self._function_of(s, e), None,
                                                 set(), set(), set(), False))
        self._link()
        self._collect()

    # -- building ----------------------------------------------------------------------------

    def _function_of(self, s: int, e: int) -> int | None:
        fn = self.g.enclosing_function(s)
        while fn is not None and not (fn.body[0] <= s and e <= fn.body[1]):
            fn = None if fn.parent is None else self.g.functions[fn.parent]
        return None if fn is None else fn.index

    def _link(self) -> None:
        """Parents, heads, and the parts of a head (``for`` clauses) merged into the loop."""
        text = self.g.text
        self._alias: dict[int, int] = {}
        # A declared function's body is its own: its code does not run where it is declared.
        self._declarations = {k for k, st in enumerate(self.statements)
                              if _DECLARATION.match(text, st.span[0])}
        for k, st in enumerate(self.statements):
            s, e = st.span
            m = _HEAD.match(text, s)
            if m:
                end = _close_paren(text, m.end() - 1, e)
                st.head = (s, end) if end else st.span
            elif _KEYWORD.match(text, s):
                st.head = (s, _KEYWORD.match(text, s).end())
            st.returns = text.startswith("return", s)
            p = self._outer[k]
            while p is not None and self.statements[p].function != st.function:
                p = self._outer[p]
            if p is not None and st.function == self.statements[p].function:
                ph = self.statements[p].head
                if ph != self.statements[p].span and ph[0] < s and e <= ph[1]:
                    self._alias[k] = self._alias.get(p, p)  # a clause of p's head
                st.parent = p
        for k, st in enumerate(self.statements):
            if st.parent is not None and st.parent in self._alias:
                st.parent = self._alias[st.parent]

    def _innermost(self, offset: int) -> int | None:
        k = bisect.bisect_right(self._starts, offset) - 1
        while k >= 0 and not (self.statements[k].span[0] <= offset < self.statements[k].span[1]):
            k = self._outer[k] if self._outer[k] is not None else -1
        return k if k >= 0 else None

    def _owners(self, offset: int) -> list[int]:
        """The innermost statement of each function around ``offset``, inner first (up to a
        function declaration, whose body does not run where it stands)."""
        k = self._innermost(offset)
        out, seen = [], set()
        while k is not None and k not in self._declarations:
            fn = self.statements[k].function
            if fn not in seen:
                seen.add(fn)
                out.append(self._alias.get(k, k))
            k = self._outer[k]
        return out

    def _owner(self, offset: int) -> int | None:
        """The statement that owns ``offset`` (``_owners``' first), or None."""
        k = self._innermost(offset)
        return None if k is None or k in self._declarations else self._alias.get(k, k)

    def _collect(self) -> None:
        g = self.g
        for ref in g.var_refs:
            k = self._owner(ref.span[0])
            if k is None or g.variables[ref.variable].kind not in _FOLLOWED:
                continue
            if ref.write:
                self.statements[k].defs.add(ref.variable)
            # `x += 1`, `x++`, `x.push(1)` also read the value they change.
            if not ref.write or not _PLAIN_WRITE.match(g.text, ref.span[1]):
                self.statements[k].uses.add(ref.variable)
        for v, var in enumerate(g.variables):
            k = None if var.decl is None else self._owner(var.decl[0])
            if k is not None and var.kind in _FOLLOWED and var.kind != "param":
                self.statements[k].defs.add(v)
        self._callers: dict[int, set[int]] = {}
        for call in g.calls:
            k = self._owner(call.span[0])
            if k is not None and call.kind != "reference":
                self.statements[k].calls.update(call.targets)
                for t in call.targets:
                    self._callers.setdefault(t, set()).add(k)
        # An inline function (a callback) runs or is registered by the statement holding it.
        self._container: dict[int, int] = {}
        for fn in g.functions:
            k = None if fn.kind == "declaration" else self._owner(fn.span[0])
            if k is not None and self.statements[k].function == fn.parent:
                self._container[fn.index] = k
        self._defined_by: dict[int, list[int]] = {}
        self._returns: dict[int | None, list[int]] = {}
        self._exits: dict[int | None, list[int]] = {}
        for k, st in enumerate(self.statements):
            if st.returns:
                self._returns.setdefault(st.function, []).append(k)
            if st.returns or g.text.startswith("throw", st.span[0]):
                self._exits.setdefault(st.function, []).append(k)
            if k in self._alias or k in self._declarations:
                continue
            for v in st.defs:
                self._defined_by.setdefault(v, []).append(k)

    # -- queries -----------------------------------------------------------------------------

    def statement_at(self, offset: int, function: int | None = None) -> int | None:
        """The statement of ``function`` (any function when None) that owns ``offset``."""
        owners = self._owners(offset)
        if function is None:
            return owners[0] if owners else None
        return next((k for k in owners if self.statements[k].function == function), None)

    def blame(self, k: int) -> list[Span]:
        """What a slice blames of statement ``k``: its head, less the block bodies of the
        functions written inside it (a callback's statements are blamed on their own)."""
        s, e = self.statements[k].head
        fn = self.statements[k].function
        holes = sorted(f.body for f in self.g.functions if f.parent == fn and s < f.body[0]
                       and f.span[1] <= e and self.g.text.startswith("{", f.body[0]))
        out, at = [], s
        for hs, he in holes:
            if hs >= at:
                out.append((at, hs + 1))  # keep the opening brace with the registration
                at = he - 1
        out.append((at, e))
        return [(a, b) for a, b in out if b > a]

    def uses_of(self, variable: int) -> list[int]:
        """Statements that read ``variable``, in source order."""
        if not hasattr(self, "_used_by"):
            self._used_by: dict[int, list[int]] = {}
            for k, st in enumerate(self.statements):
                if k in self._alias or k in self._declarations:
                    continue
                for v in st.uses:
                    self._used_by.setdefault(v, []).append(k)
        return self._used_by.get(variable, [])

    def definitions_of(self, variable: int) -> list[int]:
        """Statements that set (or declare with a value) ``variable``, in source order."""
        return sorted(self._defined_by.get(variable, ()))

    def refs_of(self, variable: int) -> list:
        """The graph's references (``VarRef``) to ``variable``."""
        if not hasattr(self, "_refs"):
            self._refs: dict[int, list] = {}
            for r in self.g.var_refs:
                self._refs.setdefault(r.variable, []).append(r)
        return self._refs.get(variable, [])

    def callers(self, function: int) -> list[int]:
        """Statements that call ``function``, in source order."""
        return sorted(self._callers.get(function, ()))

    def exits_before(self, k: int) -> list[int]:
        """The ``return`` and ``throw`` statements of statement ``k``'s function that end
        before it: when one runs, ``k`` does not (none at the top level)."""
        st = self.statements
        if st[k].function is None:
            return []
        return [j for j in self._exits.get(st[k].function, ()) if st[j].span[1] <= st[k].span[0]]

    def slice(self, seeds: dict[int, str], allowed: Callable[[int | None], bool],
              only: dict[int, set[int]] | None = None, limit: int = 200) -> dict[int, str]:
        """The backward slice of ``seeds``: statement index -> why it is in it.

        Args:
            seeds: Statement index -> why it starts the slice.
            allowed: Whether statements of a function (None: top level) may join.
            only: For some seeds, the variables to follow instead of all they read.
            limit: Most statements the slice holds.

        Returns:
            The seeds, with the statements they depend on through data and control.
        """
        g, st = self.g, self.statements
        out = dict(seeds)
        queue, needed, called = list(out), set(), set()

        def join(k: int, why: str) -> None:
            if k not in out and len(out) < limit and allowed(st[k].function):
                out[k] = why
                queue.append(k)

        while queue:
            k = queue.pop()
            if st[k].parent is not None:
                join(st[k].parent, "decides whether a statement of the slice runs")
            # A return or throw before it in its function decides too, when it runs (and,
            # through its own parents, the condition under which it does).
            for j in self.exits_before(k):
                join(j, "can leave the function before a statement of the slice runs")
            holder = self._container.get(st[k].function)
            if holder is not None:
                join(holder, "runs or registers the function holding a statement of the slice")
            uses = (only or {}).get(k, st[k].uses)
            for v in sorted(uses - needed):
                needed.add(v)
                var = g.variables[v]
                for j in self._defined_by.get(v, ()):
                    join(j, f"sets {var.name}, which the slice reads")
                if var.function is not None:  # a parameter: what the callers pass
                    for j in self.callers(var.function):
                        join(j, f"passes {var.name} to {g.functions[var.function].name}")
            for t in sorted(st[k].calls - called) if k not in (only or {}) else ():
                called.add(t)
                for j in self._returns.get(t, ()):
                    join(j, f"returns a value the slice uses "
                            f"({g.functions[t].qualname or 'a function'})")
        return out


def _close_paren(text: str, at: int, end: int) -> int | None:
    """Offset after the parenthesis matching ``text[at] == '('``, searching before ``end``."""
    depth = 0
    for i in range(at, end):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return None
