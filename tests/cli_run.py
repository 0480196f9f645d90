"""Run `capa ...` in-process and return its exit code, stdout and stderr (argparse's exits too)."""

from __future__ import annotations

from capa_hf.cli import main


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:             # argparse: usage errors, --help, --version
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(argv: list[str], capsys, expected: str) -> str:
    """Assert the command fails with exit 2 and one line naming `expected`, no traceback."""
    code, _, err = run_cli(argv, capsys)
    assert code == 2, (code, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert expected in err, err
    return err
