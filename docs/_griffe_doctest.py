"""Griffe extension for the API reference: show a docstring's ``>>>`` examples as code.

It also turns the Sphinx roles of the docstrings (``:func:`prepare```) into code spans.

The docstrings follow Google style with their doctests inline (``doctest`` runs them in
``tests/test_docs.py``). Outside an ``Examples:`` section Markdown would read them as text, so every
run of ``>>>``/``...`` lines and their output is fenced as a ``pycon`` block here.
"""

from __future__ import annotations

import re

import griffe

_SECTION = re.compile(r"^\s*Examples?:\s*$")
_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|data|mod|attr|obj|exc):`(~?)([^`]+)`")


def _role(match: re.Match) -> str:
    """A Sphinx cross-reference role as a Markdown code span (``~`` keeps the last component)."""
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


def strip_roles(text: str) -> str:
    return _ROLE.sub(_role, text)


def fence_doctests(text: str) -> str:
    lines = text.split("\n")
    out = []
    in_examples_section = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _SECTION.match(line):
            in_examples_section = True
        elif line.strip() and not line.startswith((" ", "\t")) and line.rstrip().endswith(":"):
            in_examples_section = False  # another section starts
        if line.lstrip().startswith(">>>") and not in_examples_section:
            indent = line[: len(line) - len(line.lstrip())]
            block = []
            while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
                block.append(lines[i][len(indent) :])
                i += 1
            out.append(f"{indent}```pycon")
            out.extend(indent + b for b in block)
            out.append(f"{indent}```")
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class FenceDoctests(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is None:
            return
        value = strip_roles(obj.docstring.value)
        if ">>>" in value:
            value = fence_doctests(value)
        obj.docstring.value = value
