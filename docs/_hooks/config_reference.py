"""MkDocs hook: the configuration reference page, generated from the config dataclasses at build time.

`reference/config.md` is not a file in the repository: this hook walks `resrl.train.config.TrainConfig`
(every YAML section, nested sections included: `model.lora`, `algorithm.resrl`, `algorithm.flowrl`)
with `dataclasses.fields`, and writes one table per section with each key's type, default and
description. The description is what the source says about the field, in this order:

1. comment lines directly above the field;
2. the comment at the end of the field's line;
3. an entry `name  text` in the class docstring (the ResRLConfig style).

A field with none of these is a build warning (so `mkdocs build --strict` fails): a new config key
cannot land undocumented, and the page cannot drift from the code.
"""

from __future__ import annotations

import ast
import dataclasses
import html
import inspect
import io
import logging
import re
import sys
import textwrap
import tokenize
import typing
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.config_reference")

PAGE = "reference/config.md"


@dataclass
class Key:
    """One documented config key."""

    dotted: str        # e.g. "algorithm.resrl.rank"
    type: str          # the annotation as written in the source
    default: str       # repr of the default ("required" when none)
    description: str   # "" when the source says nothing


@dataclass
class Section:
    """One YAML section (a config dataclass) and its keys."""

    dotted: str        # e.g. "algorithm.resrl"
    cls: type
    doc: str           # the class docstring ("" when none)
    keys: list[Key]


# -- descriptions from the source ---------------------------------------------------------------

def _comments_by_line(source: str) -> dict[int, str]:
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string.lstrip("#").strip()
    return out


def _docstring_entries(doc: str, names: list[str]) -> dict[str, str]:
    """`name  text` entries of a docstring table (indented or not); continuation lines are indented
    deeper than their entry's name."""
    entries: dict[str, str] = {}
    current, indent = None, 0
    for line in doc.splitlines():
        stripped = line.strip()
        first = stripped.split(maxsplit=1)
        line_indent = len(line) - len(line.lstrip())
        if first and first[0] in names and len(first) == 2:
            current, indent = first[0], line_indent
            entries[current] = first[1].strip()
        elif current and stripped and line_indent > indent:
            entries[current] += " " + stripped
        else:
            current = None
    return entries


def class_doc(cls: type) -> str:
    """The class's own docstring; "" for the signature that `dataclass` writes when there is none."""
    doc = cls.__dict__.get("__doc__") or ""
    return "" if doc.startswith(cls.__name__ + "(") else inspect.cleandoc(doc)


def field_descriptions(cls: type) -> dict[str, str]:
    """Field name -> the description the source gives it (see the module docstring)."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments = _comments_by_line(source)
    lines = source.splitlines()
    (node,) = ast.parse(source).body
    names = [f.name for f in dataclasses.fields(cls)]
    from_doc = _docstring_entries(class_doc(cls), names)
    out = {}
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        above = []
        row = stmt.lineno - 1
        while row >= 1 and lines[row - 1].strip().startswith("#"):
            above.insert(0, comments[row])
            row -= 1
        trailing = [comments[r] for r in range(stmt.lineno, stmt.end_lineno + 1) if r in comments]
        parts = above + trailing
        text = " ".join(parts) if parts else from_doc.get(stmt.target.id, "")
        out[stmt.target.id] = text
    return out


# -- the walk over the sections -----------------------------------------------------------------

def _type_text(cls: type, name: str) -> str:
    annotation = cls.__annotations__.get(name)
    if annotation is None:  # inherited
        for base in cls.__mro__[1:]:
            annotation = getattr(base, "__annotations__", {}).get(name)
            if annotation is not None:
                break
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))


def _default_text(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
        if dataclasses.is_dataclass(value):
            return "(section)"
    else:
        return "required"
    return "null" if value is None else repr(value)


def _nested_dataclass(cls: type, name: str, instance) -> type | None:
    """The dataclass a field holds: from the live default value, else from its annotation."""
    value = getattr(instance, name, None)
    if dataclasses.is_dataclass(value):
        return type(value)
    hints = typing.get_type_hints(cls)
    for arg in (hints.get(name),) + typing.get_args(hints.get(name)):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg
    return None


def config_sections() -> list[Section]:
    """Every section of `TrainConfig`, depth first, in declaration order."""
    from resrl.train.config import TrainConfig

    sections: list[Section] = []

    def walk(cls: type, instance, prefix: str) -> None:
        descriptions = field_descriptions(cls)
        keys, nested = [], []
        for f in dataclasses.fields(cls):
            dotted = f"{prefix}{f.name}"
            sub = _nested_dataclass(cls, f.name, instance)
            description = descriptions.get(f.name, "")
            if cls is TrainConfig and f.name == "trl":
                description += f"; see [`trl`](#{anchor('trl')})"
            if sub is not None:  # a nested section: its own table documents it
                description = f"section, see [`{dotted}`](#{anchor(dotted)}). {description}".strip()
            optional = "None" in _type_text(cls, f.name)  # `LoraSection | None`: null is a setting
            default = _default_text(f) if sub is None or (optional and f.default is None) else "(section)"
            keys.append(Key(dotted, _type_text(cls, f.name), default, description))
            if sub is not None:
                value = getattr(instance, f.name, None)
                nested.append((sub, value if isinstance(value, sub) else sub(), dotted + "."))
        sections.append(Section(prefix.rstrip("."), cls, class_doc(cls), keys))
        for sub, value, sub_prefix in nested:
            walk(sub, value, sub_prefix)

    walk(TrainConfig, TrainConfig(), "")
    return sections


# -- the page -----------------------------------------------------------------------------------

def anchor(dotted: str) -> str:
    """The id of a section's heading: `algorithm.resrl` -> `section-algorithm-resrl`."""
    return "section-" + (dotted.replace(".", "-") or "top")


def _html_code(text: str) -> str:
    """A code span as raw HTML, `|` as an entity: in a Markdown table cell a `\\|` inside backticks
    is printed literally (the table is split before code spans are read), so such a span is
    written as HTML instead."""
    return "<code>" + html.escape(text, quote=False).replace("|", "&#124;") + "</code>"


def _cell(text: str) -> str:
    """Comment text as one table cell: `|` escaped, and `<` too (a comment's `<errors|timeouts>`
    would otherwise pass through as an HTML tag, its `\\|` printed literally)."""
    parts = re.split(r"(`[^`]*`)", text.replace("\n", " "))
    return "".join(_html_code(part[1:-1]) if part.startswith("`") and "|" in part
                   else part if part.startswith("`")
                   else part.replace("<", "&lt;").replace("|", "\\|") for part in parts)


def _code(text: str) -> str:
    return _html_code(text) if "|" in text else "`" + text + "`"


def render_page() -> str:
    from resrl.core.registry import ALGORITHMS
    from resrl.train.config import TRL_OWNED_FIELDS

    sections = config_sections()
    out = [
        "# Configuration reference",
        "",
        "Generated at build time from the config dataclasses (`resrl.train.config`, `resrl.core`) by",
        "`docs/_hooks/config_reference.py`: every key of every section, its type, its default and the",
        "comment the source gives it. Keys are written as on the command line",
        "(`resrl train --config FILE section.key=value`); in YAML each dot is one level of nesting.",
        "How the sections fit together: [Training](../training.md).",
        "",
    ]
    for section in sections:
        title = f"`{section.dotted}`" if section.dotted else "Sections"
        out += [f"## {title} ({section.cls.__name__}) {{ #{anchor(section.dotted)} }}", ""]
        if section.doc and section.dotted:
            # the docstring's first paragraph (a field table in it is already in the descriptions)
            out += [section.doc.split("\n\n")[0].replace("\n", " "), ""]
        if section.dotted == "loss":
            out += ["Keys not given take the algorithm's defaults (`loss_defaults` of its registration):", "",
                    "| algorithm | loss defaults |", "|---|---|"]
            for name, spec in ALGORITHMS.items():
                defaults = ", ".join(f"`{k}={v!r}`" for k, v in spec.loss_defaults.items()) or "(none)"
                out.append(f"| `{name}` | {_cell(defaults)} |")
            out.append("")
        out += ["| key | type | default | description |", "|---|---|---|---|"]
        for key in section.keys:
            out.append(f"| {_code(key.dotted)} | {_code(key.type)} | {_code(key.default)} | {_cell(key.description)} |")
        out.append("")
    out += [
        f"## `trl` (pass-through) {{ #{anchor('trl')} }}",
        "",
        "Any other `trl.GRPOConfig` / `TrainingArguments` field, handed to TRL as is. These fields are",
        "set by the sections above, so `trl.<field>` is refused with the key to use instead",
        "(`TRL_OWNED_FIELDS`):",
        "",
        "| `trl.` field | use instead |",
        "|---|---|",
    ]
    for trl_key, ours in TRL_OWNED_FIELDS.items():
        out.append(f"| `{trl_key}` | `{ours}` |")
    out.append("")
    return "\n".join(out)


def undocumented_keys(sections: list[Section]) -> list[str]:
    return [key.dotted for s in sections for key in s.keys if not key.description]


# -- MkDocs entry points ------------------------------------------------------------------------

def on_config(config):
    """Document this checkout's code: its `src/` goes first on the path (before an installed resrl)."""
    src = str(Path(config.config_file_path).resolve().parent / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    return config


def on_files(files, config):
    from mkdocs.structure.files import File

    sections = config_sections()
    for dotted in undocumented_keys(sections):
        log.warning("config key '%s' has no description: add a comment to its field in the source", dotted)
    files.append(File.generated(config, PAGE, content=render_page()))
    return files
