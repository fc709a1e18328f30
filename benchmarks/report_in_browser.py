"""Open a finished run's `snakemake --report` in headless Chromium and check what it renders.

    .venv/bin/python benchmarks/report_in_browser.py RUN_DIR [--configfile FILE] [--out FILE]

Needs Chromium (Debian: `apt-get install chromium`). Builds RUN_DIR/report.html, loads it with
JavaScript on, and checks the rendered page rather than the file: Snakemake's report is a
React app whose HTML holds its content only as script data, so a page that failed to run shows
none of it. Passes when the rendered text (scripts removed) names every category the report
defines, i.e. every paper of the run and the cross-paper one; writes RUN_DIR/report.png.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from workflow import ROOT, timed  # benchmarks/workflow.py

from report import emit  # benchmarks/report.py

BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000",
                 "--window-size=1400,1000")


def categories(html: str) -> list[str]:
    """The categories the report's data defines (``var categories = {...}``)."""
    start = html.index("var categories = ") + len("var categories = ")
    return list(json.JSONDecoder().raw_decode(html[start:])[0])


def rendered_text(browser: str, page: Path) -> str:
    """The page's DOM after its scripts ran, without the scripts themselves."""
    dom = subprocess.run([browser, *BROWSER_FLAGS, "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    return re.sub(r"<script\b.*?</script>", "", dom, flags=re.S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the --directory of a finished run")
    parser.add_argument("--configfile", type=Path, help="the run's config (default: default)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.run = args.run.resolve()  # Snakemake writes the report from inside the run folder
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("no Chromium on PATH (Debian: apt-get install chromium)")
    page, screenshot = args.run / "report.html", args.run / "report.png"
    config = ["--configfile", str(args.configfile)] if args.configfile else []
    seconds, _ = timed([sys.executable, "-m", "snakemake", "--snakefile",
                        str(ROOT / "Snakefile"), "--directory", str(args.run), *config,
                        "--report", str(page)], ROOT)
    expected = categories(page.read_text())
    text = rendered_text(browser, page)
    missing = [name for name in expected if name.split(":")[0] not in text]
    subprocess.run([browser, *BROWSER_FLAGS, f"--screenshot={screenshot}", page.as_uri()],
                   capture_output=True, check=True, timeout=300)
    version = subprocess.run([browser, "--version"], capture_output=True, text=True).stdout
    lines = ["# The report in a browser", "",
             f"- `snakemake --report`: {seconds:.1f} s, {page.stat().st_size / 2**20:.1f} MiB",
             f"- {version.strip()}, headless",
             f"- categories defined: {len(expected)}; rendered: {len(expected) - len(missing)}"
             + (f"; missing: {missing}" if missing else ""),
             f"- screenshot: {screenshot} ({screenshot.stat().st_size / 1024:.0f} KiB)"]
    emit(lines, args.out)
    if missing:
        sys.exit(1)


if __name__ == "__main__":
    main()
