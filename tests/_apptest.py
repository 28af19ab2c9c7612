"""Shared helpers of the AppTest-based page tests."""
from __future__ import annotations


def iframes(at) -> list[str]:
    """srcdoc of every iframe on the page (the pyvis views)."""
    def walk(node):
        for child in getattr(node, "children", {}).values():
            yield child
            yield from walk(child)
    return [el.proto.srcdoc for el in walk(at._tree) if getattr(el, "type", "") == "iframe"]
