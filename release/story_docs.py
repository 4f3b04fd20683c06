"""What is written from the story's types (plugin/trainjob_api/story.py) by `./run manifests`: the
web view's type declarations (plugin/kubectl_trainjob/ui/story.d.ts, which `tsc --checkJs` holds the
page's scripts to) and the field table of the story in docs/users/usage.md.

Both are read from the component schemas of the OpenAPI 3.0 document the dispatcher serves
(kubecontrol/openapi.py): what is sent, every field present, camelCase names.
"""

from __future__ import annotations

from typing import Any

from kubecontrol import openapi
from trainjob_api.story import GROUP, KINDS, VERSION, TrainJobStory, Worker

Dict = dict[str, Any]
PREFIX = "#/components/schemas/" + openapi.prefix(GROUP, VERSION)


def _definitions() -> dict[str, Dict]:
    """The story's component schemas, by the types' own names."""
    found = openapi.schemas(KINDS, GROUP, VERSION, (), v3=True)
    short = len(openapi.prefix(GROUP, VERSION))
    return {name[short:]: schema for name, schema in found.items()}


def _ref(schema: Dict) -> str:
    """The type a schema names (`$ref`, or a described one's `allOf: [$ref]`), else ""."""
    ref = schema.get("$ref") or (schema.get("allOf") or [{}])[0].get("$ref") or ""
    return str(ref).removeprefix(PREFIX)


def ts_type(schema: Dict) -> str:
    """A schema as a TypeScript type."""
    nullable, inner = bool(schema.get("nullable")), schema
    if _ref(inner):
        text = _ref(inner)
    elif "enum" in inner:
        text = " | ".join(f'"{x}"' for x in inner["enum"])
    elif inner.get("type") == "array":
        item = ts_type(inner["items"])
        text = f"({item})[]" if "|" in item else f"{item}[]"
    elif inner.get("type") in ("integer", "number"):
        text = "number"
    elif inner.get("type") in ("string", "boolean"):
        text = str(inner["type"])
    else:
        text = "Record<string, unknown>"
    return f"{text} | null" if nullable else text


def typescript() -> str:
    """plugin/kubectl_trainjob/ui/story.d.ts."""
    lines = [
        "// The job story's types, written by `./run manifests` from plugin/trainjob_api/story.py:",
        "// do not edit. The page's scripts are checked against them",
        "// (tests/local/test_story_contract.py).",
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
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            lines.append("  [field: string]: unknown;")
        lines += ["}", ""]
    return "\n".join(lines)


def _rows(schema: Dict, defs: dict[str, Dict], path: str, shown: dict[str, str]) -> list[str]:
    """One row per field of `schema` under `path`, then the fields of its type below it; a
    type already listed under another field is referred to there (`shown`)."""
    rows = []
    for field, spec in (schema.get("properties") or {}).items():
        nullable = bool(spec.get("nullable"))
        listed = spec.get("type") == "array"
        item = spec["items"] if listed else {**spec, "nullable": False}
        name = f"{path}{field}{'[]' if listed else ''}"
        about = " ".join(str(spec.get("description", "")).split()).replace("|", "\\|")
        ref = _ref(item)
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
