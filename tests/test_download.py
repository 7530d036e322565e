"""The download path, against a real HTTP server on 127.0.0.1 serving archives built here."""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TEST, TRAIN, VALID

from harness.datasets import load_dataset
from wikitext_toolkit_core import download
from wikitext_toolkit_core.catalogue import BENCHMARKS, Benchmark, RemoteFile
from wikitext_toolkit_core.files import DatasetError
from wikitext_toolkit_core.format import SPLITS

FILES = {
    f"wiki.{split}.tokens": text.encode()
    for split, text in (("train", TRAIN), ("valid", VALID), ("test", TEST))
}


def build_zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"toy/{name}", data)
    return buffer.getvalue()


class Server:
    """Serves ``routes`` (path -> bytes); ``failures`` (path -> statuses) are answered first.
    Honours ``Range`` requests when ``ranges`` is true. ``dropped`` (path -> byte counts): the next
    answers send only that many bytes of the body, then drop the connection. ``stall``: seconds
    to wait in the middle of each body. Records (path, Range header) pairs."""

    def __init__(self) -> None:
        self.routes: dict[str, bytes] = {}
        self.failures: dict[str, list[int]] = {}
        self.dropped: dict[str, list[int]] = {}
        self.stall = 0.0
        self.ranges = True
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                server.requests.append((self.path, self.headers.get("Range")))
                if server.failures.get(self.path):
                    self.send_response(server.failures[self.path].pop(0))
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    return
                if self.path not in server.routes:
                    self.send_error(404)
                    return
                body = server.routes[self.path]
                requested = self.headers.get("Range")
                if requested and server.ranges:
                    start = int(requested.removeprefix("bytes=").rstrip("-"))
                    self.send_response(206)
                    body = body[start:]
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if server.dropped.get(self.path):
                    self.wfile.write(body[: server.dropped[self.path].pop(0)])
                    return  # HTTP/1.0: the connection closes short of Content-Length
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                time.sleep(server.stall)
                self.wfile.write(body[len(body) // 2 :])

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[Server]:
    instance = Server()
    yield instance
    instance.httpd.shutdown()
    instance.httpd.server_close()


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(download, "BACKOFF_SECONDS", 0.0)


def register(
    monkeypatch: pytest.MonkeyPatch,
    urls: list[str],
    archive: bytes,
    file_sha256: dict[str, str] | None = None,
) -> Benchmark:
    source = RemoteFile(
        "toy-v1.zip",
        tuple(urls),
        hashlib.sha256(archive).hexdigest(),
        0.001,
        {f"toy/{name}": name for name in FILES},
    )
    benchmark = Benchmark(
        "toy", {s: f"wiki.{s}.tokens" for s in SPLITS}, file_sha256 or {}, (source,), "test"
    )
    monkeypatch.setitem(BENCHMARKS, "toy", benchmark)
    return benchmark


def test_download_verifies_installs_and_then_reads_from_the_cache(
    server: Server, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path
) -> None:
    archive = build_zip(FILES)
    server.routes["/toy-v1.zip"] = archive
    register(
        monkeypatch,
        [f"{server.url}/toy-v1.zip"],
        archive,
        {name: hashlib.sha256(data).hexdigest() for name, data in FILES.items()},
    )
    dataset = load_dataset("toy")
    assert dataset.directory == isolated_cache / "data" / "toy"
    assert sorted(p.name for p in dataset.directory.iterdir()) == sorted([*FILES, "SHA256SUMS"])
    assert all(dataset.is_verified(split) for split in SPLITS)
    assert len(dataset.tokens("test").ids) == sum(len(line.split()) + 1 for line in TEST.split("\n")[:-1])
    load_dataset("toy").tokens("train")
    assert len(server.requests) == 1  # the second load came from the cache


def test_tampered_archive_is_refused_and_nothing_is_installed(
    server: Server, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path
) -> None:
    genuine = build_zip(FILES)
    server.routes["/toy-v1.zip"] = build_zip({**FILES, "wiki.test.tokens": b" tampered \n"})
    register(monkeypatch, [f"{server.url}/toy-v1.zip"], genuine)
    with pytest.raises(
        DatasetError,
        match=r"toy-v1\.zip from http://127\.0\.0\.1:\d+/toy-v1\.zip: "
        r"sha256 mismatch .*refusing the download",
    ):
        load_dataset("toy")
    assert not (isolated_cache / "data" / "toy").exists()
    assert not list((isolated_cache / "data").glob(".toy.partial/*.part"))


def test_member_failing_the_release_checksum_is_refused(
    server: Server, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path
) -> None:
    archive = build_zip(FILES)
    server.routes["/toy-v1.zip"] = archive
    register(monkeypatch, [f"{server.url}/toy-v1.zip"], archive, {"wiki.test.tokens": "0" * 64})
    with pytest.raises(DatasetError, match=r"toy/wiki\.test\.tokens: sha256 mismatch after extraction"):
        load_dataset("toy")
    assert not (isolated_cache / "data" / "toy").exists()


def test_mirrors_are_tried_in_order_and_transient_errors_retried(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = build_zip(FILES)
    server.routes["/mirror/toy-v1.zip"] = archive
    server.failures["/mirror/toy-v1.zip"] = [503, 429]
    register(monkeypatch, [f"{server.url}/gone/toy-v1.zip", f"{server.url}/mirror/toy-v1.zip"], archive)
    load_dataset("toy")
    assert [path for path, _ in server.requests] == [
        "/gone/toy-v1.zip",
        "/mirror/toy-v1.zip",
        "/mirror/toy-v1.zip",
        "/mirror/toy-v1.zip",
    ]


@pytest.mark.parametrize("ranges", [True, False])
def test_interrupted_download_resumes(
    server: Server, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path, ranges: bool
) -> None:
    archive = build_zip(FILES)
    server.routes["/toy-v1.zip"] = archive
    server.ranges = ranges
    register(monkeypatch, [f"{server.url}/toy-v1.zip"], archive)
    staging = isolated_cache / "data" / ".toy.partial"
    staging.mkdir(parents=True)
    (staging / "toy-v1.zip.part").write_bytes(archive[:100])
    load_dataset("toy").tokens("test")
    assert server.requests == [("/toy-v1.zip", "bytes=100-")]


def test_a_connection_dropped_in_the_body_is_retried_from_where_it_stopped(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = build_zip({**FILES, "padding": os.urandom(300_000)})  # more than one read
    server.routes["/toy-v1.zip"] = archive
    server.dropped["/toy-v1.zip"] = [200_000, 0]
    register(monkeypatch, [f"{server.url}/toy-v1.zip"], archive)
    load_dataset("toy").tokens("test")
    (first, _), (second, resumed), (third, _) = server.requests
    assert first == second == third == "/toy-v1.zip" and resumed is not None  # from the bytes kept


def test_a_connection_always_dropped_is_one_line_and_leaves_no_empty_part(
    server: Server, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path
) -> None:
    archive = build_zip(FILES)
    server.routes["/toy-v1.zip"] = archive
    server.dropped["/toy-v1.zip"] = [0] * download.ATTEMPTS_PER_URL
    register(monkeypatch, [f"{server.url}/toy-v1.zip"], archive)
    with pytest.raises(
        download.DownloadFailed, match=r"toy-v1\.zip: ChunkedEncodingError\. To use local copies"
    ):
        load_dataset("toy")
    assert len(server.requests) == download.ATTEMPTS_PER_URL
    assert list((isolated_cache / "data").iterdir()) == []


def test_two_downloads_of_one_benchmark_take_turns(
    server: Server, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    archive = build_zip({**FILES, "padding": os.urandom(300_000)})
    server.routes["/toy-v1.zip"] = archive
    server.stall = 0.5  # the second starts while the first is downloading
    register(monkeypatch, [f"{server.url}/toy-v1.zip"], archive)
    outcomes: list[object] = []

    def evaluate_toy() -> None:
        try:
            outcomes.append(load_dataset("toy").verify("test"))
        except Exception as error:  # noqa: BLE001 (reported by the assertion below)
            outcomes.append(error)

    downloads = [threading.Thread(target=evaluate_toy) for _ in range(2)]
    for download_thread in downloads:
        download_thread.start()
        time.sleep(0.2)
    for download_thread in downloads:
        download_thread.join()
    assert outcomes == [hashlib.sha256(FILES["wiki.test.tokens"]).hexdigest()] * 2
    assert len(server.requests) == 1  # the second found the benchmark installed
    assert "waiting for another process downloading toy into" in caplog.text
    assert sorted(path.name for path in (isolated_cache / "data").iterdir()) == ["toy"]


def test_unreachable_server_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{closed.server_address[1]}/toy-v1.zip"
    closed.server_close()  # nothing listens there any more
    register(monkeypatch, [url], b"unused")
    with pytest.raises(
        DatasetError,
        match=r"could not download toy-v1\.zip: http://127\.0\.0\.1:\d+/toy-v1\.zip: ConnectionError",
    ):
        load_dataset("toy")
    with pytest.raises(DatasetError) as failure:
        load_dataset("toy")
    message = str(failure.value)
    assert "\n" not in message
    assert "pass --data-dir DIR or set HARNESS_DATA_DIR=DIR" in message
    assert "DIR/toy/" in message


def test_failed_download_leaves_no_empty_partial_files(
    monkeypatch: pytest.MonkeyPatch, isolated_cache: Path
) -> None:
    def dropped(url: str, part: Path) -> None:  # the connection drops before the first byte
        part.touch()
        raise download._TransferError("ConnectionError", retriable=True)

    monkeypatch.setattr(download, "_transfer", dropped)
    register(monkeypatch, ["http://127.0.0.1:9/toy-v1.zip"], b"unused")
    with pytest.raises(DatasetError, match="could not download toy-v1.zip"):
        load_dataset("toy")
    assert not (isolated_cache / "data" / ".toy.partial").exists()
    assert list((isolated_cache / "data").iterdir()) == []


def test_partial_bytes_are_kept_for_the_next_attempt(
    server: Server, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path
) -> None:
    archive = build_zip(FILES)
    register(monkeypatch, [f"{server.url}/toy-v1.zip"], archive)
    server.failures["/toy-v1.zip"] = [404]
    staging = isolated_cache / "data" / ".toy.partial"
    staging.mkdir(parents=True)
    (staging / "toy-v1.zip.part").write_bytes(archive[:100])
    with pytest.raises(DatasetError):
        load_dataset("toy")
    assert (staging / "toy-v1.zip.part").read_bytes() == archive[:100]
    server.routes["/toy-v1.zip"] = archive
    load_dataset("toy").tokens("test")
    assert server.requests[-1] == ("/toy-v1.zip", "bytes=100-")


def test_unwritable_download_cache_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cache = tmp_path / "a-file"
    cache.write_text("")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    register(monkeypatch, ["http://127.0.0.1:9/never-asked.zip"], b"unused")
    with pytest.raises(
        DatasetError,
        match=r"cannot write the download cache .*a-file/data "
        r"\(Not a directory\): set HARNESS_CACHE_DIR",
    ):
        load_dataset("toy")
