"""Shell words as literal strings: tree-sitter-bash nodes to the words the shell sees.

:func:`parse` parses a script with tree-sitter-bash; :func:`literal` recovers
a word's value with quotes and escapes removed, or None when an expansion
makes it unknown; :func:`stdin_text` is the heredoc or here-string a command
reads. Used by :mod:`.destructive` to build the argument vectors of
:mod:`.argv`.
"""

from __future__ import annotations

import functools
import re
import threading

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from earshot.agent.shell.argv import Arg

__all__ = ["literal", "parse", "stdin_text", "text"]

_DQ_ESCAPE = re.compile(r'\\([\\"$`\n])')
_ESCAPE = re.compile(r"\\(.)", re.S)
_ANSI_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|.)", re.S)
_ANSI_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b",
                "E": "\x1b", "f": "\f", "v": "\v"}  # fmt: skip


@functools.cache
def _language() -> Language:
    # Wrapping the compiled grammar is cheap but needless to repeat.
    return Language(tree_sitter_bash.language())


_parser_local = threading.local()


def parse(source: str) -> Node:
    """The root of the tree-sitter-bash syntax tree of ``source``."""
    # A Parser is not safe to share between threads; one per thread, reused.
    parser: Parser | None = getattr(_parser_local, "parser", None)
    if parser is None:
        parser = Parser(_language())
        _parser_local.parser = parser
    # surrogatepass: a str may hold lone surrogates (os.fsdecode of odd file
    # names); they must survive the round trip to reach path_exists intact.
    return parser.parse(source.encode("utf-8", "surrogatepass")).root_node


def text(node: Node) -> str:
    """The source text of a node, as written."""
    raw = node.text or b""
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # a node cut inside a character: only in error trees
        return raw.decode("utf-8", "replace")


def _ansi_c(body: str) -> str:
    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] == "x" and len(code) > 1:
            return chr(int(code[1:], 16))
        if code[0] in "01234567":
            return chr(int(code, 8))
        return _ANSI_SIMPLE.get(code, code)

    return _ANSI_ESCAPE.sub(replace, body)


def literal(node: Node, pwd: str | None = None) -> Arg:
    """The value of a shell word if it has no expansion in it, else None.

    ``pwd``: what ``$PWD`` (``${PWD}``, ``$(pwd)``, `` `pwd` ``) stands for, if
    it may be expanded (``rm -rf $PWD/out``: ``"."``, the walker's own
    directory); else it is an expansion like any other."""
    kind = node.type
    if pwd is not None and kind in ("simple_expansion", "expansion"):
        return pwd if text(node) in ("$PWD", "${PWD}") else None
    if pwd is not None and kind == "command_substitution":  # $(pwd), `pwd`
        inner = [text(c).strip() for c in node.named_children]
        return pwd if inner in (["pwd"], ["pwd -L"]) else None
    if kind == "word":
        return _ESCAPE.sub(r"\1", text(node).replace("\\\n", ""))
    if kind == "number":
        return text(node)
    if kind == "raw_string":
        return text(node)[1:-1]
    if kind == "ansi_c_string":
        return _ansi_c(text(node)[2:-1])
    if kind == "string":
        parts = []
        for child in node.named_children:
            if child.type == "string_content":
                parts.append(_DQ_ESCAPE.sub(r"\1", text(child)))
            elif pwd is not None and (piece := literal(child, pwd)) is not None:
                parts.append(piece)  # "$PWD/out"
            else:
                return None
        return "".join(parts)
    if kind in ("concatenation", "command_name"):
        pieces = []
        for child in node.children:
            piece = literal(child, pwd)
            if piece is None:
                return None
            pieces.append(piece)
        return "".join(pieces)
    return None


def stdin_text(command: Node) -> str | None:
    """The text a command reads on stdin when the command line shows it.

    A here-string or heredoc is visible; a pipe, an input file or the
    inherited stdin is not (None). The last redirection wins, as in bash.
    """
    stdin: str | None = None
    redirects = list(command.children)
    parent = command.parent
    if parent is not None and parent.type == "redirected_statement":
        redirects += parent.children
    for child in redirects:
        if child.type == "heredoc_redirect":
            bodies = [c for c in child.children if c.type == "heredoc_body"]
            stdin = text(bodies[0]) if bodies else ""
        elif child.type == "herestring_redirect":
            values = child.named_children
            stdin = literal(values[0]) if values else None
        elif child.type == "file_redirect" and any(c.type in ("<", "<&") for c in child.children):
            stdin = None
    return stdin
