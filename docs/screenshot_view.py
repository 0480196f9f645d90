"""Take the README's screenshot of `capa view`: the viewer of the given runs, one session open,
the first run beside the second, in headless Chromium (`make setup-browser` installs it).

    python docs/screenshot_view.py runs/demo-C02-none runs/demo-C02-same-user \
        --session C02-S07 --out docs/images/view.png
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capa_hf.cli import main as capa  # noqa: E402
from tests.webdriver import Browser  # noqa: E402


def screenshot(runs: list[str], session: str, out: Path, width: int = 1400, height: int = 1100) -> None:
    with tempfile.TemporaryDirectory() as site:
        if capa(["view", *runs, "--out", site]) != 0:
            raise SystemExit("capa view failed")
        with Browser(width, height) as b:
            b.open(Path(site, "index.html").as_uri() + f"#s={session}%230&r=0&c=1")
            b.screenshot(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="run folders written by capa eval (two: shown side by side)")
    p.add_argument("--session", required=True, help="the session to open, e.g. C02-S07")
    p.add_argument("--out", type=Path, default=Path("docs/images/view.png"), help="the PNG to write")
    a = p.parse_args()
    screenshot(a.runs, a.session, a.out)
