"""Starting the web view (jnrrd.serve, ``jnrrd serve``/``jnrrd view``; docs/web-view.md):
argument errors named as the caller wrote them, a port in use or a foreign address as a
jnrrd error, the URL printed for a wildcard address, signal handlers in place before the URL
is printed, and the messages' wording."""

from __future__ import annotations

import signal
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd
from jnrrd.web import protocol as hp
from jnrrd.web import server as web_server


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("start") / "small.jnrrd"
    jnrrd.write(path, np.arange(8 * 8 * 4, dtype=np.uint8).reshape(4, 8, 8), tile=4)
    return path


@pytest.mark.parametrize("kwargs, match", [
    ({"port": -1}, "port -1: expected 0 to 65535"),
    ({"port": 65536}, "port 65536"),
    ({"host": ""}, "host ''"),
    ({"layout": "bogus"}, "layout 'bogus'"),
    ({"cors": "evil"}, "^cors 'evil'"),
])
def test_bad_arguments_are_named_as_python_spells_them(small: Path, kwargs: dict[str, Any],
                                                        match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        jnrrd.serve(small, **kwargs)
    assert "--" not in str(info.value)


def test_a_block_file_names_its_type(tmp_path: Path) -> None:
    path = tmp_path / "blk.nrrd"
    path.write_bytes(b"NRRD0004\ntype: block\nblock size: 4\ndimension: 1\nsizes: 2\n"
                     b"encoding: raw\n\n" + bytes(8))
    with pytest.raises(jnrrd.UnsupportedError, match="'block'") as info:
        jnrrd.serve(path)
    assert "void" not in str(info.value)


def test_a_port_in_use_and_a_foreign_address_are_clear_errors(small: Path) -> None:
    with jnrrd.serve(small) as s:
        with pytest.raises(jnrrd.AddressError, match=f"port {s.port} .*in use") as info:
            jnrrd.serve(small, port=s.port)
        assert isinstance(info.value, OSError) and "Errno" not in str(info.value)
    # 192.0.2.1 is a documentation address (RFC 5737): never one of this machine's
    with pytest.raises(jnrrd.AddressError, match="192.0.2.1.*not an address of this machine"):
        jnrrd.serve(small, host="192.0.2.1")


def test_the_url_of_a_wildcard_address_is_one_to_open() -> None:
    assert hp.url_host("0.0.0.0") == "127.0.0.1"
    assert hp.url_host("::") == "[::1]"
    assert hp.url_host("127.0.0.1") == "127.0.0.1"
    assert hp.url_host("::1") == "[::1]"
    assert hp.url_host("example.org") == "example.org"


def test_the_non_loopback_warning_carries_its_advice(small: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web_server, "_is_loopback", lambda host: False)
    with pytest.warns(jnrrd.JnrrdWarning) as record:
        jnrrd.serve(small).close()
    text = " ".join(str(w.message) for w in record)
    assert "docs/" not in text and ".md" not in text
    assert "web server" in text and "authentication" in text


@pytest.mark.parametrize("command", ["serve", "view"])
def test_signal_handlers_are_in_place_before_the_url_is_printed(
        small: Path, command: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    if command == "view":
        pytest.importorskip("neuroglancer", reason="in the test extra")
    import jnrrd.web
    from jnrrd.cli import main
    from jnrrd.cli import serve as cli_serve
    from jnrrd.cli import view as cli_view

    servers: list[Any] = []
    real = jnrrd.web.serve

    def serve(*args: Any, **kwargs: Any) -> Any:
        servers.append(real(*args, **kwargs))
        return servers[-1]

    seen: list[Any] = []

    def fake_print(*args: Any, **kwargs: Any) -> None:
        seen.append(signal.getsignal(signal.SIGTERM))
        servers[0].close()  # the server stops as a SIGTERM would

    monkeypatch.setattr(jnrrd.web, "serve", serve)
    for module in (cli_serve, cli_view):
        monkeypatch.setattr(module, "print", fake_print, raising=False)
    before = signal.getsignal(signal.SIGTERM)
    args = [command, str(small)] + (["--no-browser"] if command == "view" else [])
    assert main(args) == 0
    assert len(seen) == 1 and seen[0] not in (before, signal.SIG_DFL, None)
    assert signal.getsignal(signal.SIGTERM) == before
    assert servers[0].requests == []  # the command line keeps no request log


@pytest.mark.parametrize("args, message", [
    (["serve", "x.jnrrd", "--host", ""], "--host"),
    (["serve", "x.jnrrd", "--host", " "], "--host"),
])
def test_cli_start_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]
                          ) -> None:
    from jnrrd.cli import main

    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_cli_help_describes_the_storage_option_for_a_source(capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    from jnrrd.cli import main

    for command in ("serve", "view"):
        assert main([command, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "URL sources (s3://" in text and "targets" not in text


def test_port_in_use_from_the_command_line(small: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    from jnrrd.cli import main

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        assert main(["serve", str(small), "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"port {port}" in err and "--port 0" in err and "Errno" not in err
