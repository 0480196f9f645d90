"""`capa view RUN... --out DIR`: a static HTML viewer of run transcripts.

`collect` reads run folders (and the hidden items of the dataset they were made on) into plain
data; `transcript` shapes one session record as a chat; `write` puts the page, its script and
the data into one folder that a browser opens from disk.
"""

from __future__ import annotations


def view_cli(args) -> int:
    import sys
    from pathlib import Path

    from capa_hf.view.collect import collect
    from capa_hf.view.write import write_viewer

    data = collect(args.runs, dataset=args.dataset, revision=args.revision)
    index = write_viewer(data, Path(args.out))
    for note in data["notes"]:
        print(f"note: {note}", file=sys.stderr)
    print(f"{len(data['sessions'])} session records from {len(data['runs'])} runs; open {index.resolve().as_uri()}")
    return 0
