"""Packaging: torch is an extra, and what does not need it runs without it.

Without torch: the builder (build and validate a corpus from a folder), the harness core
(datasets, evaluation, results, the CLI with ``--device auto``) and the numpy plugins (unigram,
KN-5), and the leaderboard. With torch (the ``torch`` extra, included in ``dev`` and ``hf``): the
neural baselines, their training and the ``hf`` plugin.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import tomllib
from builder_fixtures.fake_mediawiki import article_text

REPO = Path(__file__).resolve().parent.parent

#: Run first in the subprocess: every ``import torch`` fails as if torch were not installed, in
#: it and in the plugins' worker processes (which take its ``sys.path``, where a ``torch`` that
#: fails to import comes first).
BLOCK_TORCH = textwrap.dedent("""
    import importlib.abc
    import pathlib
    import sys
    import tempfile


    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    sys.meta_path.insert(0, NoTorch())
    no_torch = pathlib.Path(tempfile.mkdtemp()) / "torch"
    no_torch.mkdir()
    (no_torch / "__init__.py").write_text("raise ModuleNotFoundError('No module named torch', name='torch')")
    sys.path.insert(0, str(no_torch.parent))
""")

WITHOUT_TORCH = BLOCK_TORCH + textwrap.dedent("""
    import json

    folder, out = sys.argv[1], sys.argv[2]
    from wikitext_builder.cli import main as builder
    assert builder(["--folder", folder, "--output-dir", out, "--quiet", "--valid-articles", "2",
                    "--test-articles", "2", "--min-count", "2"]) == 0
    assert builder(["validate", out]) == 0

    from harness.cli import main as harness
    import leaderboard  # noqa: F401
    for plugin in ("unigram", "baselines.kneser_ney"):
        assert harness(["eval", plugin, "--dataset", out, "--split", "test", "--device", "auto",
                        "--output", f"{out}/{plugin}.json"]) == 0
    # A torch plugin fails with one line saying what to install.
    assert harness(["eval", "baselines.zoneout_lstm", "--dataset", out]) == 2
    print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "torch")))
""")


def test_torch_is_an_extra() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {
        requirement.split(">")[0].split("=")[0].split("[")[0].strip()
        for requirement in project["dependencies"]
    }
    assert "torch" not in names and "regex" in names
    extras = project["optional-dependencies"]
    assert extras["torch"] == ["torch>=2.4"]
    for extra in ("dev", "hf"):  # each includes the torch extra: wikitext-toolkit[torch,...]
        included = {
            name.strip()
            for requirement in extras[extra]
            if requirement.startswith("wikitext-toolkit[")
            for name in requirement.partition("[")[2].rstrip("]").split(",")
        }
        assert "torch" in included, extras[extra]


def test_builder_harness_and_leaderboard_run_without_torch(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    for index in range(8):
        title = f"Town {chr(65 + index)}{index:02d}"
        (folder / f"{title.replace(' ', '_')}.wikitext").write_text(article_text(title, index))
    out = tmp_path / "corpus"
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, str(folder), str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == []
    assert "pip install 'wikitext-toolkit[torch]'" in result.stderr
    for plugin in ("unigram", "baselines.kneser_ney"):
        record = json.loads((out / f"{plugin}.json").read_text())
        assert record["tokens"] > 0 and record["audited"]
