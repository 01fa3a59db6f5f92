"""Records of the code graph of one single-file web app.

Every span is a half-open range ``(start, end)`` of Python ``str`` indices (code points) into the
text the graph was built from (usually the whole model response), never UTF-8 byte offsets.
Cross references between records are indices into the graph's tuples (``CodeGraph.elements[i]``,
``CodeGraph.functions[j]``), so records stay small, immutable and cheap to compare in tests.
"""

from __future__ import annotations

from dataclasses import dataclass

Span = tuple[int, int]


@dataclass(frozen=True)
class Attribute:
    """One attribute of an HTML start tag.

    Attributes:
        name: Lower-cased attribute name.
        value: Value with character references decoded; None for a bare attribute (``disabled``).
        span: The whole ``name="value"`` text.
        value_span: The value without its quotes; None for a bare attribute.
    """

    name: str
    value: str | None
    span: Span
    value_span: Span | None


@dataclass(frozen=True)
class InlineHandler:
    """An ``on*`` attribute of an element (``onclick="go(1)"``).

    Attributes:
        event: Event name without the ``on`` prefix (``click``).
        attribute_span: The whole attribute.
        code_span: The handler code (the attribute value without quotes).
        function: Index of the pseudo-function of kind ``inline_handler`` made for the code.
    """

    event: str
    attribute_span: Span
    code_span: Span
    function: int


@dataclass(frozen=True)
class Element:
    """An HTML element of the document (``script`` and ``style`` elements included).

    Attributes:
        index: Position in ``CodeGraph.elements`` (document order of start tags).
        tag: Lower-cased tag name.
        id: Value of the ``id`` attribute, or None.
        classes: Class names, in attribute order.
        attributes: All attributes of the start tag.
        handlers: Inline ``on*`` handlers.
        span: From the start tag to the end tag (or the last child when the end tag is implied).
        start_tag: The start tag, ``<`` to ``>``.
        parent: Index of the parent element, or None at the top.
        children: Indices of the child elements, in document order.
    """

    index: int
    tag: str
    id: str | None
    classes: tuple[str, ...]
    attributes: tuple[Attribute, ...]
    handlers: tuple[InlineHandler, ...]
    span: Span
    start_tag: Span
    parent: int | None
    children: tuple[int, ...]

    def attr(self, name: str) -> Attribute | None:
        """Returns the first attribute called ``name`` (lower case), or None."""
        for attribute in self.attributes:
            if attribute.name == name:
                return attribute
        return None


@dataclass(frozen=True)
class Script:
    """The JavaScript inside one ``<script>`` element.

    Attributes:
        element: Index of the ``script`` element.
        span: The code between the tags.
        module: True for ``type="module"``.
        src: The ``src`` attribute (the browser then ignores the inline code), or None.
    """

    element: int
    span: Span
    module: bool
    src: str | None


@dataclass(frozen=True)
class Function:
    """A JavaScript function of any form, or the code of an inline ``on*`` handler.

    Attributes:
        index: Position in ``CodeGraph.functions`` (ordered by start offset).
        name: Best-effort short name: the declared name, the variable, property or key it is
            assigned to (``const f = () => 1`` gives ``f``, ``obj.f = function`` gives ``f``),
            the attribute name for inline handlers; None for anonymous callbacks.
        qualname: ``owner.name`` when there is an owner, else ``name``.
        owner: Object or class the function is a member of (``obj``, ``this``, ``Foo``), or None.
        kind: ``declaration``, ``expression``, ``arrow``, ``method`` or ``inline_handler``.
        span: The whole function.
        body: The body (a block, the expression of an arrow, or the handler code).
        parent: Index of the enclosing function, or None.
        params: Parameter names (destructured ones flattened).
    """

    index: int
    name: str | None
    qualname: str | None
    owner: str | None
    kind: str
    span: Span
    body: Span
    parent: int | None
    params: tuple[str, ...]


@dataclass(frozen=True)
class Call:
    """A call edge, or a function passed by name (``setTimeout(tick, 10)``).

    Attributes:
        caller: Index of the enclosing function; None for top-level code.
        callee: Short callee name (``update`` for ``this.update()``), or None when not static.
        callee_text: Source text of the callee expression.
        targets: Indices of the functions it may call (empty for library calls).
        kind: ``call``, ``new`` or ``reference``.
        span: The call expression (for ``reference``, the identifier).
    """

    caller: int | None
    callee: str | None
    callee_text: str
    targets: tuple[int, ...]
    kind: str
    span: Span


@dataclass(frozen=True)
class EventBinding:
    """An event handler attached to an element, ``document`` or ``window``.

    Attributes:
        event: Event name (``click``), or None when not a literal.
        kind: ``listener`` (addEventListener), ``property`` (``x.onclick = h``), ``attribute``
            (inline ``on*``) or ``p5`` (``slider.input(fn)``).
        target_text: Source text of the target (``document.getElementById('b')``, ``slider``).
        elements: Indices of the HTML elements the target can be.
        global_target: ``window`` or ``document`` when the target is one of them, else None.
        handler: Index of the handler function when resolvable, else None.
        handler_text: Source text of the handler argument.
        handler_span: Span of the handler argument (the attribute code for ``attribute``).
        span: The whole binding (call, assignment or attribute).
        function: Index of the function containing the binding, or None.
    """

    event: str | None
    kind: str
    target_text: str
    elements: tuple[int, ...]
    global_target: str | None
    handler: int | None
    handler_text: str
    handler_span: Span
    span: Span
    function: int | None


@dataclass(frozen=True)
class DomQuery:
    """A DOM lookup (``getElementById``, ``querySelector(All)``, ``getElementsBy*``).

    Attributes:
        method: The method name.
        argument: The literal argument, or None when it is computed.
        selector: CSS selector equivalent of a literal argument (``#b`` for getElementById('b')).
        elements: Indices of the elements it can return.
        exact: False when ``elements`` is a conservative superset (computed argument,
            unsupported selector parts, a scope that could not be resolved).
        variable: Variable or property path the result is stored in (``b``, ``this.b``,
            ``els.slider``), or None.
        span: The call expression.
        function: Index of the enclosing function, or None.
    """

    method: str
    argument: str | None
    selector: str | None
    elements: tuple[int, ...]
    exact: bool
    variable: str | None
    span: Span
    function: int | None


@dataclass(frozen=True)
class ElementWrite:
    """A write to an element's content, properties, style, classes, attributes or children.

    Attributes:
        kind: ``textContent``, ``innerHTML``, ``innerText``, ``value``... (the property),
            ``style``, ``classList``, ``attribute`` or ``children``.
        detail: Style property, ``add:active`` for classList, attribute name, DOM method; or ''.
        target_text: Source text of the element expression.
        elements: Indices of the elements it can target (empty when not resolvable).
        span: The assignment or call expression.
        function: Index of the enclosing function, or None.
    """

    kind: str
    detail: str
    target_text: str
    elements: tuple[int, ...]
    span: Span
    function: int | None


@dataclass(frozen=True)
class Variable:
    """A JavaScript name as declared (or implicitly global), scopes resolved.

    Attributes:
        name: The name.
        kind: ``var``, ``let``, ``const``, ``function``, ``class``, ``param``, ``catch``,
            ``import``, ``implicit``, or ``this`` (a class's methods' ``this``, one per class).
        decl: The declarator, parameter or declaration; None for implicit globals.
        is_global: Declared in the global scope (shared by every script).
        function: For a parameter, the index of its function; else None.
    """

    name: str
    kind: str
    decl: Span | None
    is_global: bool
    function: int | None


@dataclass(frozen=True)
class VarRef:
    """One read or write of a ``Variable`` (``x``, ``x = 1``, ``x.y = 1``, ``x.push(1)``).

    Attributes:
        variable: Index into ``CodeGraph.variables``.
        span: The identifier (the member path for a property write).
        write: True for a write.
        site: The whole writing expression; for a read, ``span``.
    """

    variable: int
    span: Span
    write: bool
    site: Span


@dataclass(frozen=True)
class StateVar:
    """A global variable, or a static property path under one (``state.x``).

    Attributes:
        name: ``n`` or ``state.x``.
        root: The global variable name (equal to ``name`` for variables).
        decl: The declarator (``n = 6``) or, for a property, the ``key: value`` pair of the
            root's object-literal initializer; None when undeclared or implicit.
        reads: Spans of reading references (identifier or member expression).
        writes: Spans of whole writing expressions (assignment, update, mutating call).
    """

    name: str
    root: str
    decl: Span | None
    reads: tuple[Span, ...]
    writes: tuple[Span, ...]


@dataclass(frozen=True)
class CssDeclaration:
    """``property: value`` inside a CSS rule. ``span`` covers the declaration with its ``;``."""

    property: str
    value: str
    span: Span


@dataclass(frozen=True)
class CssRule:
    """A style rule of a ``<style>`` element.

    Attributes:
        selector: Selector list text as written.
        selector_span: Span of the selector list.
        block: The declaration block, braces included.
        span: The whole rule.
        declarations: Its declarations.
        elements: Indices of the elements any selector of the list can match.
        exact: False when part of a selector could not be evaluated and ``elements`` is a
            superset (structural pseudo-classes, nesting) or empty (unparseable selector).
        media: Condition text of the enclosing ``@media``/``@supports``, or None.
    """

    selector: str
    selector_span: Span
    block: Span
    span: Span
    declarations: tuple[CssDeclaration, ...]
    elements: tuple[int, ...]
    exact: bool
    media: str | None


@dataclass(frozen=True)
class StyleBlock:
    """The CSS inside one ``<style>`` element: ``element`` index and content ``span``."""

    element: int
    span: Span
