"""Take the HTML report's screenshots in docs/: `python3 tests/screenshots.py`.

The page is the demo's (the bundled fixtures, moved to end a few minutes ago), drawn by the
real command and photographed in headless Chromium with a turn opened, down to the end of
that turn's figures.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

from chromium import Browser

ROOT = Path(__file__).resolve().parent.parent
OPEN_TURNS = """(() => {
  const rows = Array.from(document.querySelectorAll("tr.turn"));
  const pick = (pattern, kept) => rows.find((row) => row.textContent.includes(pattern) &&
                                                    row.textContent.includes(kept));
  [pick("cascade", "repair")].forEach((row) => row && row.click());
  return rows.length;
})()"""
# Where the opened turn's figures end, so the picture shows them whole.
OPENED_BOTTOM = "Math.ceil(document.querySelector('tr.detail').getBoundingClientRect().bottom) + 16"


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        page_path = Path(work, "report.html")
        subprocess.run([sys.executable, "-m", "tailer", "report", "--demo", "--html", str(page_path)],
                       cwd=ROOT, check=True)
        with Browser(Path(work, "profile")) as browser:
            page = browser.open(page_path.as_uri(), width=1280, height=1800)
            page.evaluate(OPEN_TURNS)
            page.resize(1280, page.evaluate(OPENED_BOTTOM))
            page.screenshot(ROOT / "docs" / "report.png", width=1280, full_page=False)
            if page.problems:
                sys.exit(f"the page complained: {page.problems}")
    print("wrote docs/report.png")


if __name__ == "__main__":
    main()
