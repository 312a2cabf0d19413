"""Command-line interface: parse, call the layers below, render text or JSON."""
