"""Reading the YAML that users write (experiment configs, `--set` values, label schemas).

`load_yaml` is `yaml.safe_load` with three differences:

- numbers read as a user means them: YAML 1.1 (PyYAML) reads `5e-5`, `1e-4` and `1E3` as strings,
  since its floats need a dot and a signed exponent; here a number in exponent notation is a
  number: `5e-5` -> 5e-05, `1.5E3` -> 1500.0, and one without a dot and with an exponent >= 0 is
  the integer it writes (`1E3` -> 1000, so it fits settings that take a count);
- aliases cannot blow a small file up ("billion laughs"): a document whose values, with every
  alias expanded, hold more than `MAX_NODES` nodes is refused, as is an alias to a node that
  contains it (a cycle), before anything is built;
- nesting is bounded: more than `MAX_DEPTH` levels (aliases expanded) is refused, never a
  RecursionError traceback.

A refusal is a `ConfigYAMLError` (a `yaml.YAMLError`, so callers that catch YAML errors report it
as they report a syntax error), its message one line that names the line of the fault.
`show` cuts a value for an error message, so that no message echoes a huge value.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

import yaml

MAX_NODES = 10_000
MAX_DEPTH = 64
SHOW_WIDTH = 80

_EXPONENT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_INTEGER_EXPONENT = re.compile(r"^([-+]?[0-9][0-9_]*)[eE]\+?([0-9]+)$")
_EXPONENT_TAG = "tag:psyattrs,2026:exponent"


class ConfigYAMLError(yaml.YAMLError):
    """YAML that psyattrs refuses to build: too many nodes once aliases expand, too deep, a cycle."""


class _Loader(yaml.SafeLoader):
    """SafeLoader with exponent numbers and bounded alias expansion and depth (see the module docstring)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._level = 0
        self._sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, depth), aliases expanded

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) not in self._sizes:
                raise ConfigYAMLError(f"line {event.start_mark.line + 1}: the alias *{event.anchor} refers to a "
                                      "value that contains it (a cycle)")
        self._level += 1
        if self._level > MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise ConfigYAMLError(f"line {mark.line + 1}: the YAML nests deeper than {MAX_DEPTH} levels")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._level -= 1
        if id(node) not in self._sizes:
            self._measure(node)
        return node

    def _measure(self, node: Any) -> None:
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        measured = [self._sizes[id(child)] for child in children]
        nodes = 1 + sum(n for n, _ in measured)
        depth = 1 + max((d for _, d in measured), default=0)
        where = f"line {node.start_mark.line + 1}"
        if nodes > MAX_NODES:
            raise ConfigYAMLError(f"{where}: the value holds more than {MAX_NODES} items once its aliases are "
                                  "expanded; write it out, or use fewer aliases")
        if depth > MAX_DEPTH:
            raise ConfigYAMLError(f"{where}: the YAML nests deeper than {MAX_DEPTH} levels once its aliases "
                                  "are expanded")
        self._sizes[id(node)] = (nodes, depth)


def _construct_exponent(loader: _Loader, node: Any) -> "int | float":
    text = loader.construct_scalar(node).replace("_", "")
    whole = _INTEGER_EXPONENT.match(text)
    if whole:
        return int(whole.group(1)) * 10 ** int(whole.group(2))
    return float(text)


_Loader.add_implicit_resolver(_EXPONENT_TAG, _EXPONENT, list("-+0123456789."))
_Loader.add_constructor(_EXPONENT_TAG, _construct_exponent)


def load_yaml(text: str) -> Any:
    """The value of one YAML document, as `yaml.safe_load` gives it but for the differences of the
    module docstring.

    Raises:
        yaml.YAMLError: invalid YAML, or a `ConfigYAMLError` for YAML refused as too large or deep.
    """
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise ConfigYAMLError(f"the YAML nests deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict = 3, 6, 6, 4
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = SHOW_WIDTH, SHOW_WIDTH, SHOW_WIDTH


def show(value: Any, width: int = SHOW_WIDTH) -> str:
    """`repr(value)` for an error message, cut to about `width` characters (never built whole for a
    large value)."""
    text = _REPR.repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
