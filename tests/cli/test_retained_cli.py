"""``cstrie retained``: stored topics (file or stdin) answered by filter, in
each dialect's rules (MQTT ``+``/``#`` and the ``$`` rule, AMQP ``#``
anywhere, NATS ``>``); output formats; invalid input exits 2 with the line
number and writes nothing.  In-process through ``cstrie.cli.main``, and once
through the installed console script."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cstrie.cli import main

RETAINED = (
    "sensors/kitchen/temp\t21.5\n"
    "sensors/attic/temp\t17.0\n"
    "sensors/attic/hum\t40\n"
    "sensors\tgateway up\n"
    "sensors//temp\tunnamed room\n"
    "$SYS/broker/uptime\t42\n"
    "alerts/fire\n"
)


def set_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def run(
    argv: list[str],
    data: str | bytes,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, str]:
    set_stdin(monkeypatch, data.encode() if isinstance(data, str) else data)
    code = main(["retained", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def retained(tmp_path: Path) -> Path:
    path = tmp_path / "retained.tsv"
    path.write_text(RETAINED)
    return path


@pytest.mark.parametrize(
    "filt, lines",
    [
        # + is one level, the empty one too
        ("sensors/+/temp", ["sensors//temp\tunnamed room", "sensors/attic/temp\t17.0",
                            "sensors/kitchen/temp\t21.5"]),
        # # is the parent level and everything below it
        ("sensors/#", ["sensors\tgateway up", "sensors//temp\tunnamed room",
                       "sensors/attic/hum\t40", "sensors/attic/temp\t17.0",
                       "sensors/kitchen/temp\t21.5"]),
        ("sensors/attic/+", ["sensors/attic/hum\t40", "sensors/attic/temp\t17.0"]),
        # the $ rule: a filter starting with a wildcard never sees $ topics ...
        ("#", ["alerts/fire", "sensors\tgateway up", "sensors//temp\tunnamed room",
               "sensors/attic/hum\t40", "sensors/attic/temp\t17.0",
               "sensors/kitchen/temp\t21.5"]),
        ("+/broker/uptime", []),
        # ... a literal first word does
        ("$SYS/#", ["$SYS/broker/uptime\t42"]),
        ("+", ["sensors\tgateway up"]),
        ("alerts/fire", ["alerts/fire"]),  # a topic stored without a value
        ("alerts/fire/#", ["alerts/fire"]),
        ("nothing/#", []),
    ],
)  # fmt: skip
def test_mqtt_rules(
    filt: str, lines: list[str], retained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["retained", "--dialect", "mqtt", "--sort", "--filter", filt, str(retained)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == lines


@pytest.mark.parametrize(
    "filt, topics",
    [
        ("#.c", ["a.b.c", "a.c", "c", "x.y.z.c"]),  # # anywhere, zero words or more
        ("a.#.c", ["a.b.c", "a.c"]),
        ("a.#", ["a", "a.b", "a.b.c", "a.c"]),
        ("*.c", ["a.c"]),
        ("#", ["a", "a.b", "a.b.c", "a.c", "c", "x.y.z.c"]),
        ("*.*", ["a.b", "a.c"]),
    ],
)
def test_amqp_hash_anywhere(
    filt: str,
    topics: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = "a.b.c\na.c\nc\nx.y.z.c\na\na.b\n"
    code, out, _ = run(["--sort", "-f", filt], data, monkeypatch, capsys)  # amqp is the default
    assert code == 0 and out.splitlines() == topics


def test_amqp_wildcard_words_in_topics_are_literals(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["--sort", "-f", "a.*", "-f", "a.#.*"], "a.*\na.b\n", monkeypatch, capsys)
    assert code == 0 and out.splitlines() == ["a.*\ta.*", "a.*\ta.b", "a.#.*\ta.*", "a.#.*\ta.b"]


@pytest.mark.parametrize(
    "filt, topics",
    [
        ("orders.>", ["orders.eu", "orders.eu.new", "orders.us.new"]),  # one token or more
        ("orders.*", ["orders.eu"]),
        ("orders.*.new", ["orders.eu.new", "orders.us.new"]),
        (">", ["orders", "orders.eu", "orders.eu.new", "orders.us.new"]),
        ("orders", ["orders"]),
    ],
)
def test_nats_full_wildcard(
    filt: str,
    topics: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = "orders\norders.eu\norders.eu.new\norders.us.new\n"
    code, out, _ = run(["--dialect", "nats", "--sort", "-f", filt], data, monkeypatch, capsys)
    assert code == 0 and out.splitlines() == topics


def test_several_filters_prefix_each_line(
    retained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["retained", "--dialect", "mqtt", "--sort", "-f", "sensors/attic/+", "-f", "alerts/#"]
    assert main([*argv, str(retained)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "sensors/attic/+\tsensors/attic/hum\t40",
        "sensors/attic/+\tsensors/attic/temp\t17.0",
        "alerts/#\talerts/fire",
    ]


def test_count(retained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["retained", "--dialect", "mqtt", "--count", "-f", "#", str(retained)]) == 0
    assert capsys.readouterr().out == "6\n"
    argv = ["retained", "--dialect", "mqtt", "-c", "-f", "#", "-f", "$SYS/#", "-f", "x/+"]
    assert main([*argv, str(retained)]) == 0
    assert capsys.readouterr().out == "#\t6\n$SYS/#\t1\nx/+\t0\n"


def test_json_lines(retained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "retained",
        "--dialect",
        "mqtt",
        "--json",
        "--sort",
        "-f",
        "alerts/#",
        "-f",
        "+/attic/temp",
    ]
    assert main([*argv, str(retained)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows == [
        {"filter": "alerts/#", "topic": "alerts/fire", "value": None},
        {"filter": "+/attic/temp", "topic": "sensors/attic/temp", "value": "17.0"},
    ]
    assert (
        main(["retained", "--dialect", "mqtt", "--json", "-c", "-f", "sensors/#", str(retained)])
        == 0
    )
    assert json.loads(capsys.readouterr().out) == {"filter": "sensors/#", "count": 5}


def test_input_lines(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # CRLF is dropped, blank lines are skipped, the value is the rest of the line
    # (tabs included), and a topic given twice keeps its last value
    data = "a/b\tfirst\r\n\n\r\na/c\tx\ty\na/b\tsecond\na/d\t\n"
    code, out, _ = run(
        ["--dialect", "mqtt", "--sort", "--json", "-f", "a/+"], data, monkeypatch, capsys
    )
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {"filter": "a/+", "topic": "a/b", "value": "second"},
        {"filter": "a/+", "topic": "a/c", "value": "x\ty"},
        {"filter": "a/+", "topic": "a/d", "value": ""},
    ]


def test_stdin_dash(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--dialect", "mqtt", "-f", "#", "-"], "x/y\n", monkeypatch, capsys)
    assert code == 0 and out == "x/y\n"


@pytest.mark.parametrize(
    "dialect, data, where, why",
    [
        ("mqtt", "a/b\nsensors/+/temp\t1\n", "<stdin>:2:", "contains the wildcard '+'"),
        ("mqtt", "a/b\n\nx/#\n", "<stdin>:3:", "contains the wildcard '#'"),
        ("mqtt", "ok\n\tvalue without a topic\n", "<stdin>:2:", "must not be empty"),
        ("amqp", "a.b\n" + ".".join(["w"] * 257) + "\n", "<stdin>:2:", "at most 256"),
        ("nats", "a.b\na..b\n", "<stdin>:2:", "empty word"),
        ("nats", "a.>\n", "<stdin>:1:", "contains the wildcard '>'"),
    ],
)
def test_invalid_lines_exit_2_with_the_line_number(
    dialect: str,
    data: str,
    where: str,
    why: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(
        ["--dialect", dialect, "-f", "#" if dialect != "nats" else ">"], data, monkeypatch, capsys
    )
    assert code == 2 and out == ""
    assert err.startswith(f"cstrie retained: error: {where} ") and why in err


def test_invalid_line_in_a_file_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"a/b\nc/d\n\xff\xfe\n")
    assert main(["retained", "--dialect", "mqtt", "-f", "#", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"{path}:3: not UTF-8 text" in err


def test_invalid_filter_exits_2_before_reading(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        ["--dialect", "mqtt", "-f", "#", "-f", "a/#/b"], "a/b\n", monkeypatch, capsys
    )
    assert code == 2 and out == ""  # nothing written, not even the first filter's answer
    assert "cstrie retained: error: argument --filter: pattern 'a/#/b'" in err
    assert "'#' may only be the last word" in err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["retained", "--dialect", "mqtt"])  # no --filter
    assert exc.value.code == 2
    assert "--filter" in capsys.readouterr().err
    assert main(["retained", "--dialect", "stomp", "-f", "#"]) == 2
    assert "unknown dialect" in capsys.readouterr().err
    assert main(["retained", "-f", "#", str(tmp_path / "missing.txt")]) == 2
    assert "No such file" in capsys.readouterr().err


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "retained" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["retained", "--help"])
    assert exc.value.code == 0
    assert "usage: cstrie retained" in capsys.readouterr().out


def test_console_script(retained: Path) -> None:
    script = Path(sys.executable).parent / "cstrie"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "cstrie"]
    proc = subprocess.run(
        [*cmd, "retained", "--dialect", "mqtt", "--count", "-f", "sensors/+/temp"],
        input=RETAINED, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "3\n"
