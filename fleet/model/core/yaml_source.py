"""Reading YAML while remembering the line of every key, so errors can point at it.

The one YAML reader of user input: files are read with a bound (``fleet.model.core.input_files``), and a document whose
aliases expand to more values than any configuration holds (a "billion laughs" alias bomb), or that nests deeper than
any configuration does, is refused at once with a located error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleet.model.core.errors import InputError, Problem, format_path
from fleet.model.core.input_files import MAX_INPUT_BYTES, read_input_text, shown_path

# Values a document may hold once its aliases (``*name``) are expanded: the shipped policy holds about 300; a
# billion-laughs bomb of a few hundred bytes expands to billions.
MAX_VALUES = 100_000
# How deep mappings and lists may nest (the policy nests 6 deep); deeper is an error, not a RecursionError.
MAX_DEPTH = 64

Path_ = tuple[object, ...]


@dataclass
class YamlDocument:
    """A parsed YAML file: its plain data plus the line (1-based) of every key path in it."""

    file: str
    data: Any
    lines: dict[Path_, int] = field(default_factory=dict)

    def line_of(self, path: Path_) -> int:
        """Line of the deepest part of ``path`` that exists in the file (1 if none does)."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return 1

    def problem(self, path: Path_, message: str) -> Problem:
        """A problem located at ``path`` in this document."""
        return Problem(self.file, self.line_of(path), format_path(path), message)


# The tags a safe YAML reader builds (PyYAML's SafeLoader: str, int, float, bool, null, seq, map, timestamp, binary,
# set, omap, pairs and the merge key); any other (!!python/object/apply:..., !local) is refused, naming it.
YAML_TAG_PREFIX = "tag:yaml.org,2002:"
SAFE_TAGS = frozenset(tag for tag in yaml.SafeLoader.yaml_constructors if tag is not None)


class _Builder:
    """Turns a composed YAML node tree into plain Python values, recording lines and duplicates."""

    def __init__(self, file: str):
        self.file = file
        self.constructor = yaml.SafeLoader("")
        self.lines: dict[Path_, int] = {}
        self.problems: list[Problem] = []
        self.values = 0

    def refuse(self, node: yaml.Node, message: str) -> InputError:
        return InputError([Problem(self.file, node.start_mark.line + 1, "", message)])

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.values += 1
        if self.values > MAX_VALUES:
            raise self.refuse(
                node,
                f"more than {MAX_VALUES:,} values once the aliases (*name) are expanded: a configuration holds far "
                "fewer; write the values out, or use fewer nested aliases",
            )
        if len(path) > MAX_DEPTH:
            raise self.refuse(
                node, f"nested more than {MAX_DEPTH} levels deep (an alias inside its own anchor?): flatten it"
            )
        self.lines.setdefault(path, node.start_mark.line + 1)
        if node.tag not in SAFE_TAGS:
            shown = node.tag.replace(YAML_TAG_PREFIX, "!!", 1)
            raise self.refuse(
                node,
                f"the YAML tag {shown} is not allowed: the file holds plain values (text, numbers, true/false, "
                "lists and mappings); remove the tag",
            )
        if isinstance(node, yaml.MappingNode):
            self.constructor.flatten_mapping(node)
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self.constructor.construct_object(key_node, deep=True)
                child = (*path, key)
                if isinstance(key, (list, dict)):
                    self.problems.append(
                        Problem(self.file, key_node.start_mark.line + 1, "", "a key must be a plain value")
                    )
                    continue
                if key in out:
                    self.problems.append(
                        Problem(
                            self.file,
                            key_node.start_mark.line + 1,
                            format_path(child),
                            f"duplicate key (first given on line {self.lines[child]})",
                        )
                    )
                    continue
                self.lines[child] = key_node.start_mark.line + 1
                out[key] = self.build(value_node, child)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self.constructor.construct_object(node, deep=True)


def parse_yaml(text: str, file: str) -> YamlDocument:
    """Parse one YAML document, raising ``InputError`` (with the line) on syntax errors or duplicate keys."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise InputError([Problem(file, line, "", f"YAML syntax error: {exc.problem or exc}")]) from None
    except yaml.YAMLError as exc:
        raise InputError([Problem(file, 1, "", f"YAML error: {exc}")]) from None
    except RecursionError:
        raise InputError([Problem(file, 1, "", f"nested more than {MAX_DEPTH} levels deep: flatten it")]) from None
    if node is None:
        return YamlDocument(file, None, {(): 1})
    builder = _Builder(file)
    try:
        data = builder.build(node, ())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise InputError([Problem(file, mark.line + 1 if mark else 1, "", f"YAML error: {exc.problem}")]) from None
    if builder.problems:
        raise InputError(builder.problems)
    return YamlDocument(file, data, builder.lines)


def read_yaml(path: Path | str, limit: int = MAX_INPUT_BYTES) -> YamlDocument:
    """Read and parse a YAML file of at most ``limit`` bytes; a missing, unreadable, oversized or non-regular file is
    an ``InputError`` too."""
    return parse_yaml(read_input_text(path, limit), shown_path(path))
