"""Fixtures of the CLI's tests beyond the shared ones: ``chat`` (a chat on a pty)."""

from chat_screen import chat

__all__ = ["chat"]
