"""What every benchmark script ends with: print its Markdown report, and write it to ``--out``."""

from __future__ import annotations

from pathlib import Path


def emit(lines: list[str], out: Path | None) -> None:
    """Print the report's ``lines`` and, when ``out`` is given, write them there too."""
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if out:
        out.write_text(report)
