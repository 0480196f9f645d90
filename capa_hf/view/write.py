"""Writing the viewer: one folder that opens from disk with no server.

    DIR/index.html   the page (from capa_hf/view/assets/)
    DIR/view.css     its style
    DIR/view.js      the list, the filters and the chat
    DIR/data.js      the runs' data as one script (`window.CAPA_VIEW = {...}`): a page opened as
                     file:// may load scripts but not fetch JSON
"""

from __future__ import annotations

import json
from pathlib import Path

from capa_hf.errors import CapaError

ASSETS = Path(__file__).parent / "assets"
PAGE_FILES = ("index.html", "view.css", "view.js")
DATA_FILE = "data.js"


def data_script(data: dict) -> str:
    """The data as a script. `</` is escaped so that no text from a run can end a script element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return f"window.CAPA_VIEW = {text};\n"


def write_viewer(data: dict, out: Path) -> Path:
    """Write the viewer for `data` (from `collect`) into `out`; the path of its index.html."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in PAGE_FILES:
            (out / name).write_text((ASSETS / name).read_text(encoding="utf-8"), encoding="utf-8")
        (out / DATA_FILE).write_text(data_script(data), encoding="utf-8")
    except OSError as exc:
        raise CapaError(f"--out {out}: cannot write the viewer there ({exc.strerror or exc})") from None
    return out / "index.html"
