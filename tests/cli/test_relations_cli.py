"""``cstrie relate``: a pattern relation for scripts (exit 0 holds, 1 does not,
2 bad usage or an invalid pattern), in-process through ``cstrie.cli.main`` and
once through the installed console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cstrie.cli import main


@pytest.mark.parametrize(
    "argv, code, text",
    [
        (["--dialect", "mqtt", "subset", "sensors/+/temp", "sensors/#"], 0,
         "yes: 'sensors/+/temp' is a subset of 'sensors/#' (mqtt)"),
        (["--dialect", "mqtt", "subset", "$SYS/#", "#"], 1,
         "no: '$SYS/#' is not a subset of '#' (mqtt)"),
        (["--dialect", "mqtt", "intersects", "+/x", "$a/x"], 1,
         "no: '+/x' does not intersect '$a/x' (mqtt)"),
        (["intersects", "a.*.#", "#.b"], 0, "yes: 'a.*.#' intersects '#.b' (amqp)"),
        (["--dialect", "nats", "subset", "a", "a.>"], 1,
         "no: 'a' is not a subset of 'a.>' (nats)"),
    ],
)  # fmt: skip
def test_answers_and_exit_codes(
    argv: list[str], code: int, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["relate", *argv]) == code
    assert capsys.readouterr().out.strip() == text


def test_quiet_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["relate", "-q", "subset", "a.b", "a.*"]) == 0
    assert main(["relate", "--quiet", "subset", "a.*", "a.b"]) == 1
    assert capsys.readouterr().out == ""


def test_invalid_pattern_exits_2_naming_the_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["relate", "--dialect", "mqtt", "intersects", "a/#/b", "#"]) == 2
    err = capsys.readouterr().err
    assert "cstrie relate: error: argument a:" in err
    assert "'#' may only be the last word" in err


def test_unknown_dialect_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["relate", "--dialect", "stomp", "subset", "a", "a"]) == 2
    assert "unknown dialect" in capsys.readouterr().err


def test_unknown_relation_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["relate", "equal", "a", "a"])
    assert exc.value.code == 2


def test_help_lists_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "relate" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["relate", "--help"])
    assert "usage: cstrie relate" in capsys.readouterr().out


def test_console_script() -> None:
    script = Path(sys.executable).parent / "cstrie"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "cstrie"]
    proc = subprocess.run(
        [*cmd, "relate", "--dialect", "mqtt", "subset", "a/b", "a/#"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("yes:")
