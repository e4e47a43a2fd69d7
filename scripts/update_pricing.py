"""Refresh governance_core/data/model_prices.json from LiteLLM's public model catalogue.

    python scripts/update_pricing.py                  # the latest litellm on PyPI
    python scripts/update_pricing.py --version 1.75.0 # a given release

Downloads the ``litellm`` wheel with ``pip download --no-deps`` (nothing is installed), reads
``litellm/model_prices_and_context_window_backup.json`` from inside it, keeps the chat,
completion and embedding models and only the fields the library reads, and merges them into
the existing snapshot: a model the new catalogue no longer lists is kept (clients still report
old models), a model it lists replaces the stored entry. The file is written with sorted keys,
one line per model, so a refresh reads well as a diff.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

CATALOGUE_MEMBER = "litellm/model_prices_and_context_window_backup.json"
DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "governance_core/data/model_prices.json"
SOURCE = (
    "LiteLLM model_prices_and_context_window_backup.json, from the litellm wheel on PyPI "
    "(https://pypi.org/project/litellm/)"
)
MODES = {"chat", "completion", "responses", "embedding"}
"""Catalogue modes kept: model calls whose usage is priced (embeddings by their input tokens)."""
FIELDS = (
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
    "max_input_tokens",
    "max_tokens",
    "litellm_provider",
    "mode",
)
PRICE_FIELDS = FIELDS[:3]
LIMIT_FIELDS = ("max_input_tokens", "max_tokens")


def download_catalogue(version: str | None) -> tuple[str, dict[str, Any]]:
    """Return (litellm version, catalogue) read from the wheel on PyPI."""
    requirement = f"litellm=={version}" if version else "litellm"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                "--quiet", "--dest", tmp, requirement,
            ],
            check=True,
        )
        wheels = sorted(Path(tmp).glob("litellm-*.whl"))
        if len(wheels) != 1:
            raise SystemExit(f"expected one litellm wheel, found {[w.name for w in wheels]}")
        wheel_version = wheels[0].name.split("-")[1]
        with zipfile.ZipFile(wheels[0]) as archive:
            catalogue = json.loads(archive.read(CATALOGUE_MEMBER))
    return wheel_version, catalogue


def trim(entry: object) -> dict[str, Any] | None:
    """Keep a catalogue entry's fields we read, or None for entries we do not price."""
    if not isinstance(entry, dict) or entry.get("mode") not in MODES:
        return None
    kept: dict[str, Any] = {}
    for field in PRICE_FIELDS:
        value = entry.get(field)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            kept[field] = value
    for field in LIMIT_FIELDS:
        value = entry.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            kept[field] = value
    if "max_input_tokens" in kept:
        # The library reads max_tokens only when max_input_tokens is absent.
        kept.pop("max_tokens", None)
    if not kept:
        return None
    for field in ("litellm_provider", "mode"):
        if isinstance(entry.get(field), str):
            kept[field] = entry[field]
    return kept


def merge(
    existing: dict[str, Any] | None, version: str, catalogue: dict[str, Any]
) -> dict[str, Any]:
    """Merge the trimmed catalogue over the existing snapshot, dropping no model."""
    models: dict[str, Any] = dict(existing["models"]) if existing else {}
    history: list[str] = list(existing.get("history", [])) if existing else []
    for name, entry in catalogue.items():
        if name == "sample_spec":
            continue
        trimmed = trim(entry)
        if trimmed is not None:
            models[name] = trimmed
    label = f"litellm-{version}"
    if not history or history[-1] != label:
        history.append(label)
    return {"history": history, "models": models, "source": SOURCE, "version": label}


def render(snapshot: dict[str, Any]) -> str:
    """Serialize with sorted keys and one line per model."""
    lines = ["{"]
    lines.append(f'  "history": {json.dumps(snapshot["history"])},')
    lines.append('  "models": {')
    names = sorted(snapshot["models"])
    for index, name in enumerate(names):
        entry = json.dumps(snapshot["models"][name], sort_keys=True, separators=(",", ":"))
        comma = "," if index < len(names) - 1 else ""
        lines.append(f"    {json.dumps(name)}: {entry}{comma}")
    lines.append("  },")
    lines.append(f'  "source": {json.dumps(snapshot["source"])},')
    lines.append(f'  "version": {json.dumps(snapshot["version"])}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", help="litellm release to read (default: the latest)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)

    version, catalogue = download_catalogue(args.version)
    existing = json.loads(args.output.read_text()) if args.output.exists() else None
    before = set(existing["models"]) if existing else set()
    snapshot = merge(existing, version, catalogue)
    text = render(snapshot)
    json.loads(text)  # never write a file the library cannot read
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    added = len(set(snapshot["models"]) - before)
    print(
        f"{args.output}: {snapshot['version']}, {len(snapshot['models'])} models "
        f"({added} new, {len(text) // 1024} KiB)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
