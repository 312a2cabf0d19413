"""Text made HTML on the server: the model's markdown, and diffs with their syntax coloured.

markdown-it-py and Pygments (both already there under rich), so the page
ships no renderer of its own and loads nothing. Raw HTML in a reply is
shown as text (``html: False``), and markdown-it's link check drops
``javascript:`` and the like: a reply is the model's words, never code the
page runs.
"""

from __future__ import annotations

import functools
import html

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.util import ClassNotFound

#: Past this many lines a file's diff is shown uncoloured: colouring costs
#: about 50 µs a line, and a person reads no more than this at once.
COLOUR_LINES = 3000
#: The class the colours hang under (``stylesheet``).
SCOPE = ".hl"

_FORMATTER = HtmlFormatter(nowrap=True)


def stylesheet() -> str:
    """The CSS of the colours, a light and a dark scheme."""
    light = HtmlFormatter(style="default").get_style_defs(SCOPE)  # type: ignore[no-untyped-call]
    dark = HtmlFormatter(style="monokai").get_style_defs(SCOPE)  # type: ignore[no-untyped-call]
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"


def _fence(code: str, lang: str, attrs: object) -> str:
    lexer = _lexer_by_name(lang.strip().lower()) if lang else None
    body = highlight(code, lexer, _FORMATTER) if lexer else html.escape(code)
    return f'<pre class="hl"><code>{body}</code></pre>'


_MARKDOWN = MarkdownIt("commonmark", {"html": False, "highlight": _fence}).enable("table")


def markdown(text: str) -> str:
    """The model's markdown as HTML, raw HTML escaped."""
    rendered: str = _MARKDOWN.render(text)
    return rendered


@functools.lru_cache(maxsize=64)
def _lexer_by_name(name: str) -> Lexer | None:
    try:
        return get_lexer_by_name(name)
    except ClassNotFound:
        return None


@functools.lru_cache(maxsize=256)
def _lexer_for(path: str) -> Lexer | None:
    try:
        return get_lexer_for_filename(path.rsplit("/", 1)[-1])
    except ClassNotFound:
        return None


def _line(kind: str, text: str) -> str:
    return f'<span class="d-{kind}">{text}</span>'


def diff(path: str, patch: str) -> str:
    """A unified diff as HTML lines: each line marked added, deleted, context or
    header, its code coloured as its file's language."""
    lines = patch.splitlines()
    lexer = _lexer_for(path) if len(lines) <= COLOUR_LINES else None
    out = []
    for line in lines:
        mark, rest = line[:1], line[1:]
        if line.startswith(("---", "+++", "@@")) or mark not in ("+", "-", " "):
            out.append(_line("head", html.escape(line)))
            continue
        code = highlight(rest, lexer, _FORMATTER).rstrip("\n") if lexer else html.escape(rest)
        kind = {"+": "add", "-": "del", " ": "ctx"}[mark]
        out.append(_line(kind, html.escape(mark) + code))
    return "".join(out)  # each line a block of its own
