"""What every benchmark script ends with: print its Markdown report, and write it to ``--out``."""

from __future__ import annotations

from pathlib import Path

from miarepro import io


def emit(lines: list[str], out: Path | None) -> None:
    """Print the report's ``lines`` and, when ``out`` is given, write them there too (whole or
    not at all: an interrupted benchmark leaves no report that looks finished)."""
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if out:
        io.write_text(out, report)
