"""What is written from the story's types (trainjob/story.py) by `./run manifests`: the web
view's type declarations (kubectl_trainjob/ui/story.d.ts, which `tsc --checkJs` holds the
page's scripts to) and the field table of the story in docs/usage.md.

Both come from the types' JSON Schema as pydantic writes it for what is sent (every field
present, camelCase names), the same schema the API's OpenAPI documents are made from.
"""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from trainjob.story import KINDS, TrainJobStory, Worker

Dict = dict[str, Any]
REF = "#/$defs/"


def _definitions() -> dict[str, Dict]:
    _, found = models_json_schema(
        [(m, "serialization") for m in KINDS], by_alias=True, ref_template=REF + "{model}"
    )
    return dict(found["$defs"])


def _nullable(schema: Dict) -> tuple[Dict, bool]:
    choices = schema.get("anyOf")
    if isinstance(choices, list) and {"type": "null"} in choices:
        rest = [x for x in choices if x != {"type": "null"}]
        if len(rest) == 1:
            return rest[0], True
    return schema, False


def ts_type(schema: Dict) -> str:
    """A schema as a TypeScript type."""
    inner, nullable = _nullable(schema)
    if "$ref" in inner:
        text = inner["$ref"].removeprefix(REF)
    elif "const" in inner:
        text = f'"{inner["const"]}"'
    elif "enum" in inner:
        text = " | ".join(f'"{x}"' for x in inner["enum"])
    elif inner.get("type") == "array":
        item = ts_type(inner["items"])
        text = f"({item})[]" if "|" in item else f"{item}[]"
    elif inner.get("type") in ("integer", "number"):
        text = "number"
    elif inner.get("type") in ("string", "boolean"):
        text = str(inner["type"])
    elif "anyOf" in inner:
        text = " | ".join(ts_type(x) for x in inner["anyOf"])
    else:
        text = "Record<string, unknown>"
    return f"{text} | null" if nullable else text


def typescript() -> str:
    """kubectl_trainjob/ui/story.d.ts."""
    lines = [
        "// The job story's types, written by `./run manifests` from trainjob/story.py: do not",
        "// edit. The page's scripts are checked against them (tests/unit/test_story_contract.py).",
        "",
    ]
    for name, schema in sorted(_definitions().items()):
        lines += ["/** " + " ".join(str(schema.get("description", "")).split()) + " */"]
        lines.append(f"export interface {name} {{")
        required = set(schema.get("required") or [])
        for field, spec in (schema.get("properties") or {}).items():
            about = " ".join(str(spec.get("description", "")).split())
            if about:
                lines.append(f"  /** {about} */")
            optional = "" if field in required else "?"
            lines.append(f"  {field}{optional}: {ts_type(spec)};")
        if schema.get("additionalProperties") is True:
            lines.append("  [field: string]: unknown;")
        lines += ["}", ""]
    return "\n".join(lines)


def _rows(schema: Dict, defs: dict[str, Dict], path: str, shown: dict[str, str]) -> list[str]:
    """One row per field of `schema` under `path`, then the fields of its type below it; a
    type already listed under another field is referred to there (`shown`)."""
    rows = []
    for field, spec in (schema.get("properties") or {}).items():
        inner, nullable = _nullable(spec)
        listed = inner.get("type") == "array"
        item = inner["items"] if listed else inner
        name = f"{path}{field}{'[]' if listed else ''}"
        about = " ".join(str(spec.get("description", "")).split()).replace("|", "\\|")
        ref = item.get("$ref", "").removeprefix(REF)
        kind = "object" if ref else ts_type(item).replace("Record<string, unknown>", "object")
        kind = ("list of " if listed else "") + kind + (", or null" if nullable else "")
        if ref in shown:
            about += f" Its fields: as `{shown[ref]}`."
        rows.append(f"| `{name}` | {kind} | {about} |")
        if ref and ref not in shown:
            shown[ref] = name
            rows += _rows(defs[ref], defs, f"{name}.", shown)
    return rows


def field_table(kind: type[TrainJobStory] | type[Worker]) -> str:
    """A Markdown table of every field of `kind`, nested fields by their path."""
    defs = _definitions()
    head = ["| field | type | what it says |", "|---|---|---|"]
    name = kind.__name__
    return "\n".join(head + _rows(defs[name], defs, "", {name: ""})) + "\n"
