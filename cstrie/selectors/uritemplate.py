"""URI templates (RFC 6570, up to level 4) as Mercure matches topic selectors.

Mercure (the ``topic=`` selectors of its protocol before 1.0, still served by
hubs built with ``deprecated_topic``) tests a selector against a topic in this
order (``topicmatcher_deprecated.go``, ``topicmatcher.go``):

1. the selector ``*`` matches every topic;
2. a topic equal to the selector matches;
3. a selector without ``{``, or one that is not a valid template for the
   parser of ``github.com/yosida95/uritemplate/v3`` (what Mercure uses), matches
   nothing else;
4. otherwise the topic matches when the whole of it matches the template's
   regular expression, ``Template.Regexp()``.

That regular expression is looser than "some values expand to the topic": each
expression ``{op var1,var2,...}`` becomes an optional group of its first
character (``#``, ``.``, ``/``, ``;``, ``?``, ``&``; none for simple and ``+``)
followed by a run of allowed characters or ``%XX`` triplets, then up to
``len(vars) - 1`` more runs each after the operator's separator (any number when
a variable is exploded).  The allowed characters are RFC 3986's unreserved ones
plus ``,`` (plus ``=`` for ``;``, ``?``, ``&`` and exploded variables), or for
``+`` and ``#`` the unreserved and reserved ones.  Prefix modifiers (``:3``)
are parsed and not checked.  Literals match themselves.  So every expansion of
the template matches (tested against the ``uritemplate`` package's expansions),
and so do some strings no expansion gives (``{?x}`` matches ``?y``).

The regular expression is run by :class:`~cstrie.selectors.automaton.Automaton`
(each topic character read once), not by a backtracking engine:
``{a}{b}{c}`` against a long run of ``,`` stays linear.

>>> t = Template("https://example.com/{firstname}/{lastname}")
>>> t.match("https://example.com/kevin/dunglas"), t.match("https://example.com/a/b/c")
(True, False)
>>> Template("{invalid").match("{invalid"), Template("{invalid").is_template
(True, False)
"""

from __future__ import annotations

from cstrie.selectors.automaton import DEFAULT_MAX_DFA_STATES, DEFAULT_MAX_STATES, Automaton, Node

__all__ = ["Template", "TemplateError", "parse"]

_UNRESERVED = frozenset("-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_RESERVED = frozenset(":/?#[]@!$&'()*+,;=")
_HEX = frozenset("0123456789abcdefABCDEF")
_VARCHAR = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz")

# the characters an expression's runs allow (shared by every template: one set each)
_ALLOWED_UR = _UNRESERVED | _RESERVED
_ALLOWED_U = _UNRESERVED | {","}
_ALLOWED_U_EQ = _UNRESERVED | {",", "="}

# (first, separator, named, reserved characters allowed) per operator
_OPS: dict[str, tuple[str, str, bool, bool]] = {
    "": ("", ",", False, False),
    "+": ("", ",", False, True),
    "#": ("#", ",", False, True),
    ".": (".", ".", False, False),
    "/": ("/", "/", False, False),
    ";": (";", ";", True, False),
    "?": ("?", "&", True, False),
    "&": ("&", "&", True, False),
}


class TemplateError(ValueError):
    """Not a URI template for Mercure's parser (it then matches as exact text)."""


def _literal_ok(c: str) -> bool:
    """RFC 6570's ``literals`` (with erratum 6937: ``'`` is allowed), not ``%``."""
    o = ord(c)
    return (
        o == 0x21
        or 0x23 <= o <= 0x24
        or 0x26 <= o <= 0x3B
        or o == 0x3D
        or 0x3F <= o <= 0x5B
        or o == 0x5D
        or o == 0x5F
        or 0x61 <= o <= 0x7A
        or o == 0x7E
        or 0xA0 <= o <= 0xD7FF
        or 0xE000 <= o <= 0xFDCF
        or 0xFDF0 <= o <= 0xFFEF
        or (0x10000 <= o <= 0x10FFFF and (o & 0xFFFF) <= 0xFFFD and not 0xE0000 <= o <= 0xE0FFF)
    )


def _valid_varname(name: str) -> bool:
    return bool(name) and name[0] != "." and name[-1] != "." and ".." not in name


def parse(text: str) -> list[str | tuple[str, list[tuple[str, bool]]]]:
    """The parts of a template: literal strings and ``(operator, [(name,
    explode), ...])`` expressions, as yosida95/uritemplate's parser reads them
    (``TemplateError`` where it refuses)."""
    parts: list[str | tuple[str, list[tuple[str, bool]]]] = []
    i, n = 0, len(text)
    lit_start = 0

    def triplet(at: int) -> int:
        if n - at < 3 or text[at + 1] not in _HEX or text[at + 2] not in _HEX:
            raise TemplateError(f"incomplete percent-encoding at offset {at}")
        return at + 3

    while i < n:
        c = text[i]
        if c == "{":
            if i > lit_start:
                parts.append(text[lit_start:i])
            i += 1
            op = text[i] if i < n and text[i] in _OPS and text[i] else ""
            if i < n and text[i] in "=,!@|":
                raise TemplateError(f"reserved operator {text[i]!r} at offset {i}")
            i += len(op)
            variables: list[tuple[str, bool]] = []
            while True:  # one varspec, then ',' or '}'
                start = i
                while True:
                    if i >= n:
                        raise TemplateError("incomplete expression")
                    c = text[i]
                    if c in ":*,}":
                        break
                    if c == "%":
                        i = triplet(i)
                        continue
                    if c == "." and (i == start or text[i - 1] == "."):
                        raise TemplateError(f"bad variable name at offset {i}")
                    if c != "." and c not in _VARCHAR:
                        raise TemplateError(f"bad character {c!r} in a variable name")
                    i += 1
                name = text[start:i]
                if not _valid_varname(name):
                    raise TemplateError(f"bad variable name {name!r}")
                explode = c == "*"
                i += 1 if c in ":*" else 0
                if c == ":":
                    maxlen = 0
                    while i < n and "0" <= text[i] <= "9":
                        maxlen = maxlen * 10 + int(text[i])
                        if maxlen == 0 or maxlen > 9999:
                            raise TemplateError("max-length must be in (0, 9999]")
                        i += 1
                    if maxlen == 0:
                        raise TemplateError("max-length must be in (0, 9999]")
                variables.append((name, explode))
                if i >= n:
                    raise TemplateError("incomplete expression")
                if text[i] == ",":
                    i += 1
                    continue
                if text[i] == "}":
                    i += 1
                    break
                raise TemplateError(f"unexpected {text[i]!r} after a variable")
            parts.append((op, variables))
            lit_start = i
        elif c == "%":
            i = triplet(i)
        elif _literal_ok(c):
            i += 1
        else:
            raise TemplateError(f"character {c!r} not allowed in a template (use %XX)")
    if lit_start < n:
        parts.append(text[lit_start:])
    return parts


def _chars(s: str) -> list[Node]:
    return [("set", c.__eq__) for c in s]


def _run(allowed: frozenset[str]) -> Node:
    """``(?:[allowed]|%XX)*``"""
    hexset = ("set", _HEX.__contains__)
    return (
        "rep",
        ("alt", [("set", allowed.__contains__), ("seq", [("set", "%".__eq__), hexset, hexset])]),
        0,
        None,
    )


def _expression(op: str, variables: list[tuple[str, bool]]) -> Node:
    first, sep, named, reserved = _OPS[op]
    exploded = any(e for _, e in variables)

    def allowed(with_eq: bool) -> frozenset[str]:
        if reserved:
            return _ALLOWED_UR
        return _ALLOWED_U_EQ if with_eq else _ALLOWED_U

    body: list[Node] = [_run(allowed(named or variables[0][1]))]
    if len(variables) > 1 or variables[0][1]:
        more = ("seq", [*_chars(sep), _run(allowed(named or exploded))])
        body.append(("rep", more, 0, None if exploded else len(variables) - 1))
    return ("rep", ("seq", [*_chars(first), *body]), 0, 1)


class Template:
    """A topic selector matched as Mercure matches it (see the module).

    ``is_template`` is False when the text is ``*``, has no ``{`` or does not
    parse: it then matches only itself (or, ``*``, everything).  ``prefix`` is
    the literal text every matching topic starts with."""

    __slots__ = ("_after_prefix", "automaton", "is_template", "prefix", "text")

    def __init__(
        self,
        text: str,
        max_states: int = DEFAULT_MAX_STATES,
        max_dfa_states: int = DEFAULT_MAX_DFA_STATES,
    ) -> None:
        self.text = text
        self.automaton: Automaton | None = None
        self.is_template = False
        self.prefix = "" if text == "*" else text
        self._after_prefix = None
        if text == "*" or "{" not in text:
            return
        try:
            parts = parse(text)
        except TemplateError:
            return
        nodes: list[Node] = []
        for part in parts:
            if isinstance(part, str):
                nodes.extend(_chars(part))
            else:
                nodes.append(_expression(*part))
        self.automaton = Automaton(("seq", nodes), max_states, max_dfa_states)
        self.is_template = True
        self.prefix = parts[0] if isinstance(parts[0], str) else ""
        self._after_prefix = self.automaton.advance(self.prefix)

    @property
    def match_all(self) -> bool:
        return self.text == "*"

    def match(self, topic: str) -> bool:
        """Whether Mercure delivers an update of ``topic`` to this selector."""
        if topic == self.text or self.text == "*":
            return True
        if self.automaton is None or not topic.startswith(self.prefix):
            return False
        return self.automaton.match(topic, len(self.prefix), self._after_prefix)

    def __repr__(self) -> str:
        return f"Template({self.text!r})"
