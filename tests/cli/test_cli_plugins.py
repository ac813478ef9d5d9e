"""Plugin subcommands of the ``cstrie`` command: entry points of the group
``cstrie.commands`` add subcommands; the built-in ones cannot be replaced; a
plugin that fails to load, or a known plugin subcommand that nothing installed
provides, is a subcommand that says why and exits 2."""

from __future__ import annotations

import argparse
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from cstrie import cli


def add_hello(sub: Any) -> None:
    """A plugin: ``cstrie hello [--name NAME]``."""
    p = sub.add_parser("hello", help="say hello")
    p.add_argument("--name", default="world")
    p.set_defaults(func=lambda args: print(f"hello {args.name}") or 0)


def add_export(sub: Any) -> None:  # pragma: no cover - must never be called
    raise AssertionError("a plugin replaced a built-in subcommand")


def _entry(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=cli.PLUGIN_GROUP)


def _only(monkeypatch: pytest.MonkeyPatch, *eps: EntryPoint) -> None:
    monkeypatch.setattr(cli, "plugin_entry_points", lambda: list(eps))


def test_a_plugin_adds_a_subcommand(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _only(monkeypatch, _entry("hello", f"{__name__}:add_hello"))
    assert cli.main(["hello", "--name", "cstrie"]) == 0
    assert capsys.readouterr().out == "hello cstrie\n"
    with pytest.raises(SystemExit) as exc:
        cli.main(["hello", "--bogus"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_a_plugin_never_replaces_a_built_in(monkeypatch: pytest.MonkeyPatch) -> None:
    _only(monkeypatch, _entry("export", f"{__name__}:add_export"))
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sub.choices["export"].prog == "cstrie export"
    assert "--input-format" in sub.choices["export"].format_help()


def test_a_broken_plugin_says_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _only(monkeypatch, _entry("broken", "no_such_module_anywhere:add_parser"))
    assert cli.main(["broken", "--any", "args"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cstrie broken: the plugin no_such_module_anywhere:add_parser failed")
    assert cli.main(["relate", "-q", "subset", "a.b", "a.*"]) == 0  # the others still work


@pytest.mark.parametrize("name", sorted(cli.PLUGIN_HINTS))
def test_a_missing_plugin_subcommand_says_how_to_install_it(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _only(monkeypatch)
    for argv in ([name], [name, "--help"], [name, "--scenario", "vs-dict", "-q"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err == f"cstrie {name}: not installed; it comes with {cli.PLUGIN_HINTS[name]}\n"
