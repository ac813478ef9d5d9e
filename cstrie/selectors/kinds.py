"""The kinds of selector and how each is compiled.

===========  ==========================================================  =====================
kind         matches a topic when                                        module
===========  ==========================================================  =====================
``exact``    it equals the selector                                      (a dict)
``glob``     Redis's ``PSUBSCRIBE`` would deliver it (bytes, UTF-8)      :mod:`.glob`
``template`` Mercure would deliver it (``*``, equal, or RFC 6570         :mod:`.uritemplate`
             template through its regular expression)
``regex``    ``re.fullmatch(pattern, topic)`` (a linear-time subset)     :mod:`.regex`
===========  ==========================================================  =====================

Every compiled selector has ``prefix``, literal text that every topic it matches
starts with (empty when there is none); the index files selectors under it so
that a new topic is tested only against the selectors whose prefix it has.

>>> c = compile_selector("glob", "news.*")
>>> c.prefix, c.match("news.x", b"news.x"), c.exact
('news.', True, False)
"""

from __future__ import annotations

from typing import NamedTuple

from cstrie.selectors.automaton import DEFAULT_MAX_DFA_STATES, DEFAULT_MAX_STATES
from cstrie.selectors.glob import Glob
from cstrie.selectors.regex import Regex
from cstrie.selectors.uritemplate import Template

__all__ = ["KINDS", "Compiled", "Selector", "check_text", "compile_selector"]

KINDS = ("exact", "glob", "template", "regex")


class Selector(NamedTuple):
    """A selector as a subscriber gave it: its kind and its text."""

    kind: str
    text: str


def check_text(text: object, what: str, max_length: int) -> str:
    """``text`` if it is a ``str`` of valid UTF-8 text within ``max_length``
    characters; else ``TypeError``/``ValueError`` naming ``what``.  A ``str``
    subclass is read as a plain ``str`` (its methods never run)."""
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, not {type(text).__name__}")
    if type(text) is not str:
        text = str.__str__(text)
    if len(text) > max_length:
        raise ValueError(f"{what} of {len(text)} characters is longer than the limit {max_length}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"{what} {text[:40]!r} is not valid text: {e.reason} at {e.start}"
        ) from None
    return text


class Compiled:
    """A selector ready to test topics: ``match(text, data)`` with the topic's
    text and its UTF-8 bytes.  ``exact`` selectors match by equality only (an
    ``exact`` one, or a ``template`` that is not a template for Mercure);
    ``match_all`` ones match every topic (the template ``*``)."""

    __slots__ = ("exact", "kind", "match_all", "matcher", "prefix", "text")

    def __init__(self, kind: str, text: str, max_states: int, max_dfa_states: int) -> None:
        self.kind = kind
        self.text = text
        self.exact = False
        self.match_all = False
        self.matcher: Glob | Template | Regex | None = None
        if kind == "exact":
            self.exact = True
            self.prefix = text
        elif kind == "glob":
            g = Glob(text)
            self.matcher = g
            self.prefix = g.prefix
        elif kind == "template":
            t = Template(text, max_states, max_dfa_states)
            self.matcher = t
            self.prefix = t.prefix
            self.exact = not t.is_template and not t.match_all
            self.match_all = t.match_all
        elif kind == "regex":
            r = Regex(text, max_states, max_dfa_states)
            self.matcher = r
            self.prefix = r.prefix
        else:
            raise ValueError(f"unknown selector kind {kind!r}; one of {', '.join(KINDS)}")

    def match(self, text: str, data: bytes) -> bool:
        m = self.matcher
        if m is None:
            return text == self.text
        if isinstance(m, Glob):
            return m.match(data)
        return m.match(text)

    def __repr__(self) -> str:
        return f"<selector {self.kind} {self.text!r}>"


def compile_selector(
    kind: str,
    text: str,
    max_states: int = DEFAULT_MAX_STATES,
    max_dfa_states: int = DEFAULT_MAX_DFA_STATES,
) -> Compiled:
    """Compile one selector (``ValueError`` naming the problem when it cannot be)."""
    if not isinstance(kind, str):
        raise TypeError(f"selector kind must be a str, not {type(kind).__name__}")
    return Compiled(kind, text, max_states, max_dfa_states)
