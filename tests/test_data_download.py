"""Tiny Shakespeare: the repository ships it as input.txt; fetching it, for a gpt.py used alone, against an HTTP
server on 127.0.0.1 (no outside network needed)."""
import hashlib
import http.server
import os
import re
import shutil
import socket
import subprocess
import sys
import threading

import pytest

import gpt
from conftest import ROOT

BODY = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 50


@pytest.fixture
def server():
    """Serves BODY at /input.txt and a 404 elsewhere; yields the base URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path != "/input.txt":
                self.send_error(404)
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(BODY.encode())

        def log_message(self, *args):  # keep pytest's output clean
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()


def closed_port():
    """A local port nobody listens on (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fetch(tmp_path, monkeypatch, capsys):
    """load_text of a missing default input.txt in tmp_path, downloading from url with checksum sha256."""
    monkeypatch.setattr(gpt, "HERE", str(tmp_path))

    def load(url, sha256):
        monkeypatch.setattr(gpt, "DATA_URL", url)
        monkeypatch.setattr(gpt, "DATA_SHA256", sha256)
        return gpt.load_text(str(tmp_path / "input.txt"))

    return load


def test_download_checks_the_sha256_and_saves(server, tmp_path, fetch):
    assert fetch(f"{server}/input.txt", hashlib.sha256(BODY.encode()).hexdigest()) == BODY
    assert os.listdir(tmp_path) == ["input.txt"] and open(tmp_path / "input.txt").read() == BODY


def test_download_with_the_wrong_checksum_writes_nothing(server, tmp_path, fetch, capsys):
    with pytest.raises(SystemExit) as stop:
        fetch(f"{server}/input.txt", "0" * 64)
    assert "invalid hash value" in stop.value.code  # the one line Python prints on exit
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("where", ["404", "closed port"])
def test_download_failure_says_where_to_put_the_file(server, tmp_path, fetch, capsys, where):
    url = f"{server}/missing.txt" if where == "404" else f"http://127.0.0.1:{closed_port()}/input.txt"
    with pytest.raises(SystemExit) as stop:
        fetch(url, gpt.DATA_SHA256)
    err = stop.value.code  # the one line Python prints on exit
    assert re.search(f"downloading {re.escape(url)} failed .*; save it as .*input.txt, "
                     "or give --input=FILE", err), err
    assert os.listdir(tmp_path) == []


def copy_of_gpt_with_url(tmp_path, url):
    """gpt.py copied into an empty folder (so its default input.txt is missing), DATA_URL pointed at url."""
    source = open(os.path.join(ROOT, "gpt.py"), encoding="utf-8").read()
    source, count = re.subn(r"^DATA_URL = .*?\)$", f"DATA_URL = {url!r}", source, flags=re.MULTILINE | re.DOTALL)
    assert count == 1
    script = tmp_path / "gpt.py"
    script.write_text(source, encoding="utf-8")
    return str(script)


@pytest.mark.slow
def test_missing_default_data_and_failed_download_is_one_clear_line(tmp_path):
    script = copy_of_gpt_with_url(tmp_path, f"http://127.0.0.1:{closed_port()}/input.txt")
    result = subprocess.run([sys.executable, script, "--max_iters=1"], capture_output=True, text=True, cwd=tmp_path,
                            timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("error: ") and "--input=FILE" in result.stderr
    assert not (tmp_path / "input.txt").exists()


@pytest.mark.slow
def test_missing_default_data_is_downloaded_beside_the_script(tmp_path, shakespeare_path):
    """The real file, served locally: its checksum is the real one, so gpt.py accepts and keeps it."""
    served = tmp_path / "served"
    served.mkdir()
    shutil.copyfile(shakespeare_path, served / "input.txt")
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(served), **k)  # noqa: E731
    httpd = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        home = tmp_path / "home"
        home.mkdir()
        script = copy_of_gpt_with_url(home, f"http://127.0.0.1:{httpd.server_port}/input.txt")
        result = subprocess.run([sys.executable, script, "--n_layer=1", "--n_embd=16", "--n_head=2", "--block_size=8",
                                 "--max_iters=1", "--eval_iters=1", "--max_new_tokens=5", f"--out_dir={home / 'out'}"],
                                capture_output=True, text=True, cwd=tmp_path, timeout=120)
    finally:
        httpd.shutdown()
    assert result.returncode == 0, result.stderr
    assert "downloading Tiny Shakespeare" in result.stdout
    assert (home / "input.txt").read_bytes() == open(shakespeare_path, "rb").read()


def test_the_repository_ships_tiny_shakespeare_byte_for_byte(shakespeare_path):
    """input.txt is committed (a fresh clone trains offline) and is the file gpt.py's download would check."""
    with open(shakespeare_path, "rb") as f:
        data = f.read()
    assert hashlib.sha256(data).hexdigest() == gpt.DATA_SHA256
    assert len(data.decode("utf-8")) == 1_115_394 and len(set(data.decode("utf-8"))) == 65
    if os.path.isdir(os.path.join(ROOT, ".git")):  # a clone, as CI's: git itself lists the file
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", "input.txt"], cwd=ROOT, capture_output=True)
        assert tracked.returncode == 0, tracked.stderr
