"""Label schemas: which heads a corpus is annotated with and what each class means.

The OPELA schema (FORMATS §1) is built in and is the default. Other corpora describe their heads
in a small YAML file (FORMATS §5)::

    name: my-corpus
    heads:
      - name: abuse
        classes: {0: not abusive, 1: abusive}
      - name: severity
        classes: {0: none, 1: ambiguous, 2: mild, 3: strong, 4: very strong}
        ordinal: true
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psyattrs.errors import InputFileError

_HEAD_NAME = re.compile(r"^[a-z][a-z0-9]*$")
_SCHEMA_KEYS = {"name", "heads", "language"}
_HEAD_KEYS = {"name", "classes", "ordinal", "description"}
_LANGUAGE = re.compile(r"^[a-z]{2,3}([-_][a-z0-9]{2,8})*$")
UNKNOWN_LANGUAGE = "und"
"""The language code of a corpus whose language is not stated (ISO 639-2 `und`)."""


@dataclass(frozen=True)
class Head:
    """One annotated attribute.

    Attributes:
        name: lower-case identifier used in column names (`labeler1_{name}`).
        classes: class value -> human-readable name, values 0..K-1 in order.
        ordinal: whether the classes are ordered (ordinal agreement, ordinal metrics).
        description: free text.
    """

    name: str
    classes: dict[int, str]
    ordinal: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if not _HEAD_NAME.match(self.name):
            raise ValueError(
                f"head name {self.name!r} must be lower-case letters and digits, starting with a letter"
            )
        values = sorted(self.classes)
        if values != list(range(len(values))) or len(values) < 2:
            raise ValueError(
                f"head {self.name!r}: classes must be the integers 0..K-1 with K >= 2, got "
                f"{values if len(values) <= 12 else str(values[:12])[:-1] + f', ... ({len(values)} classes)]'}"
            )

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def values(self) -> list[int]:
        return list(range(self.n_classes))

    @property
    def is_binary(self) -> bool:
        return self.n_classes == 2

    def class_name(self, value: int) -> str:
        """The human-readable name of a class value (ValueError for a value outside the head)."""
        if value not in self.classes:
            raise ValueError(f"head {self.name!r} has no class {value!r}; allowed: {self.values}")
        return self.classes[value]


@dataclass(frozen=True)
class Schema:
    """An ordered set of heads.

    Attributes:
        name: schema name (`opela` for the built-in one).
        heads: the heads in column order.
        language: a lower-case language code (`ko`, `zh`, `en`, `ar`, `ja`, `pt-br`, ...), or
            `und` when unknown. `ko`, `zh` and `en` have their own word tokenizers (kiwipiepy,
            jieba, words and punctuation); every other code falls back to character n-grams plus
            whitespace words (`psyattrs.features.tokenizers.word_tokenizer`).
    """

    name: str
    heads: tuple[Head, ...]
    language: str = "ko"
    _by_name: dict[str, Head] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.heads:
            raise ValueError(f"schema {self.name!r} has no heads")
        names = [h.name for h in self.heads]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"schema {self.name!r} names heads twice: {dupes}")
        if not isinstance(self.language, str) or not _LANGUAGE.match(self.language):
            raise ValueError(
                f"schema language {self.language!r} is not a language code (lower-case ISO 639 such as "
                f"'en', 'ar', 'ja', 'pt-br', or {UNKNOWN_LANGUAGE!r} when unknown)"
            )
        object.__setattr__(self, "_by_name", {h.name: h for h in self.heads})

    @property
    def head_names(self) -> list[str]:
        return [h.name for h in self.heads]

    def __getitem__(self, name: str) -> Head:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"schema {self.name!r} has no head {name!r}; heads: {self.head_names}") from None

    def __iter__(self):
        return iter(self.heads)

    def __len__(self) -> int:
        return len(self.heads)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "language": self.language,
            "heads": [
                {"name": h.name, "classes": dict(h.classes), "ordinal": h.ordinal, "description": h.description}
                for h in self.heads
            ],
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "schema") -> "Schema":
        """Builds a schema from its dict form; ValueError naming the bad key or value."""
        if not isinstance(data, dict):
            raise ValueError(f"{source}: a schema is a mapping with keys {sorted(_SCHEMA_KEYS)}")
        unknown = set(data) - _SCHEMA_KEYS
        if unknown:
            raise ValueError(f"{source}: unknown schema key(s) {sorted(unknown)}; allowed: {sorted(_SCHEMA_KEYS)}")
        heads_data = data.get("heads")
        if not isinstance(heads_data, list) or not heads_data:
            raise ValueError(f"{source}: 'heads' must be a non-empty list")
        heads = []
        for i, h in enumerate(heads_data):
            if not isinstance(h, dict):
                raise ValueError(f"{source}: heads[{i}] must be a mapping")
            bad = set(h) - _HEAD_KEYS
            if bad:
                raise ValueError(f"{source}: heads[{i}] has unknown key(s) {sorted(bad)}; allowed: {sorted(_HEAD_KEYS)}")
            if "name" not in h or "classes" not in h:
                raise ValueError(f"{source}: heads[{i}] needs 'name' and 'classes'")
            classes = h["classes"]
            if isinstance(classes, list):
                classes = dict(enumerate(classes))
            if not isinstance(classes, dict):
                raise ValueError(f"{source}: heads[{i}].classes must be a mapping value -> name or a list of names")
            try:
                classes = {int(k): str(v) for k, v in classes.items()}
            except (TypeError, ValueError):
                raise ValueError(f"{source}: heads[{i}].classes keys must be integers") from None
            heads.append(
                Head(
                    name=str(h["name"]),
                    classes=classes,
                    ordinal=bool(h.get("ordinal", False)),
                    description=str(h.get("description", "")),
                )
            )
        return cls(name=str(data.get("name", "custom")), heads=tuple(heads), language=_language(data.get("language", "ko")))


def _language(value: Any) -> str:
    """A schema file's `language`: a code as written (lower-cased), `und` for null or empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return UNKNOWN_LANGUAGE
    return str(value).strip().lower()


OPELA = Schema(
    name="opela",
    language="ko",
    heads=(
        Head("strange", {0: "strange", 1: "not strange"}, description="0 = the sentence is strange"),
        Head("uneasy", {0: "uncomfortable", 1: "not uncomfortable"}, description="0 = the sentence is uncomfortable"),
        Head("engage", {0: "not engaging", 1: "engaging"}),
        Head("active", {0: "not active", 1: "active"}),
        Head(
            "self",
            {0: "no disclosure", 1: "objective disclosure", 2: "subjective disclosure"},
            ordinal=True,
            description="self-disclosure",
        ),
        Head(
            "empathy",
            {0: "not applicable", 1: "empathic failure", 2: "low empathy", 3: "moderate empathy", 4: "high empathy"},
            ordinal=True,
        ),
    ),
)


def load_schema(spec: "str | Path | Schema | None" = None) -> Schema:
    """Returns a schema: the built-in OPELA one for None or "opela", else one read from a YAML file.

    Raises:
        InputFileError: the file cannot be read or is not valid YAML.
        ValueError: the YAML does not describe a schema (names the bad key or value).
    """
    if spec is None or isinstance(spec, Schema):
        return spec or OPELA
    if str(spec) == "opela":
        return OPELA
    import yaml

    # lazy: PyYAML; import psyattrs loads this module
    from psyattrs._yaml import load_yaml

    path = Path(spec)
    if not path.is_file():
        raise InputFileError(path, f"schema file not found (use 'opela' or a YAML file)")
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputFileError(path, f"not a readable YAML schema: {' '.join(str(exc).split())[:300]}") from None
    return Schema.from_dict(data, source=str(path))
