"""``python -m leaderboard site``: what the static site holds, that rebuilding it gives the same
bytes, that result files cannot inject markup (nor into ``build --format html``'s tables, from
the same templates), and where it refuses to write. The browser checks are in
``test_site_browser.py``."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import tomllib
from test_leaderboard import make_result

from leaderboard.cli import main
from leaderboard.records import load_result
from leaderboard.site import MANIFEST, reproduce_command

REPO = Path(__file__).resolve().parent.parent
HOSTILE = "<script>window.pwned = 1</script>\"'&" + "x" * 10_000


def files_of(site: Path) -> dict[str, str]:
    """Every file of a site, by relative path, as its SHA-256."""
    return {
        path.relative_to(site).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(site.rglob("*"))
        if path.is_file()
    }


def build(sources: list[Path], out: Path, *extra: str) -> int:
    return main(["site", *map(str, sources), "--output-dir", str(out), "--samples", "1000", *extra])


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Three PTB runs (valid and test) and a valid-only one, all audited and verified."""
    directory = tmp_path / "results"
    for model, valid, test in (
        ("my.best", 80.0, 75.0),
        ("my.middle", 90.0, 85.0),
        ("my.worst", 120.0, 110.0),
    ):
        make_result(directory, f"{model}.valid", model=model, split="valid", ppl=valid)
        make_result(directory, f"{model}.test", model=model, split="test", ppl=test)
    make_result(directory, "my.valid_only.valid", model="my.valid_only", split="valid", ppl=95.0)
    return directory


def test_the_index_ranks_the_rows_and_links_each_result_page(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert build([results], out) == 0
    index = (out / "index.html").read_text(encoding="utf-8")
    for name in ("ptb", "wikitext-2", "wikitext-103"):
        assert f"<h2>{name}</h2>" in index
    assert index.index("my.best") < index.index("my.middle") < index.index("my.worst")
    assert "Merity et al. 2016" in index  # the papers' rows beside ours
    pages = sorted((out / "results").glob("*.html"))
    assert len(pages) == 7
    for page in pages:
        assert f'href="results/{page.name}"' in index
    for result in results.glob("*.json"):
        record = json.loads(result.read_text(encoding="utf-8"))
        page = next(p for p in pages if p.name.startswith(result.stem + "-"))
        text = page.read_text(encoding="utf-8")
        assert record["dataset_sha256"] in text and record["vocab_sha256"] in text
        slug = page.stem
        assert (out / "files" / f"{slug}.json").read_bytes() == result.read_bytes()
        logprobs = results / f"{result.stem}.logprobs.npy"
        assert (out / "files" / f"{slug}.logprobs.npy").read_bytes() == logprobs.read_bytes()
        assert f'href="../files/{slug}.logprobs.npy"' in text
    assert (out / "tables" / "ptb.csv").is_file() and (out / "plots" / "ptb_bars.png").is_file()


def test_the_significance_matrix_compares_every_ranked_pair_with_a_test_figure(
    results: Path, tmp_path: Path
) -> None:
    out = tmp_path / "site"
    assert build([results], out, "--no-reported") == 0
    index = (out / "index.html").read_text(encoding="utf-8")
    matrix = index[index.index('<table class="matrix">') :]
    matrix = matrix[: matrix.index("</table>")]
    assert matrix.count('<th scope="row">') == 3  # the valid-only run has no test figure
    assert matrix.count('<td class="self">') == 3
    # Constant per-token log-probabilities: every difference is exact and significant.
    assert 'class="better" title="my.best minus my.middle: -10.00 perplexity' in matrix
    assert 'class="worse" title="my.worst minus my.best: +35.00 perplexity' in matrix
    assert "p &lt;= 0.002" in matrix


def test_rebuilding_the_same_results_gives_byte_identical_files(results: Path, tmp_path: Path) -> None:
    figures = tmp_path / "figures"
    figures.mkdir()
    shutil.copy(REPO / "leaderboard" / "plots" / "zipf.png", figures)
    first, second = tmp_path / "first", tmp_path / "second"
    assert build([results], first, "--figures", str(figures)) == 0
    assert build([results], second, "--figures", str(figures)) == 0
    assert files_of(first) == files_of(second)
    before = files_of(first)
    assert build([results], first, "--figures", str(figures)) == 0  # rebuilt in place
    assert files_of(first) == before
    assert "figures/zipf.png" in before and 'src="figures/zipf.png"' in (first / "index.html").read_text()


def test_a_rebuild_removes_the_pages_of_results_that_are_gone(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert build([results], out) == 0
    for path in results.glob("my.worst.*"):
        path.unlink()
    assert build([results], out) == 0
    assert not [path for path in out.rglob("my.worst*")]
    listed = set((out / MANIFEST).read_text(encoding="utf-8").splitlines())
    assert listed == set(files_of(out)) - {MANIFEST}
    outside = tmp_path / "keep.txt"
    outside.write_text("not the site's", encoding="utf-8")
    (out / MANIFEST).write_text("../keep.txt\n" + "\n".join(sorted(listed)) + "\n", encoding="utf-8")
    assert build([results], out) == 0
    assert outside.is_file()  # a hand-edited list never removes a file outside the site


def test_a_hostile_model_name_is_text_everywhere(tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_result(results, "hostile.test", model=HOSTILE, ppl=100.0, model_args={"a": "</td><b>"})
    make_result(results, "plain.test", model="my.plain", ppl=90.0)
    out = tmp_path / "site"
    assert build([results], out) == 0
    for page in [out / "index.html", *(out / "results").glob("*.html")]:
        text = page.read_text(encoding="utf-8")
        assert "<script>window" not in text and "</td><b>" not in text
    escaped = "&lt;script&gt;window.pwned = 1&lt;/script&gt;&quot;&#x27;&amp;"
    assert escaped in (out / "index.html").read_text()
    assert all(len(path.name) < 120 for path in out.rglob("*"))
    tables = tmp_path / "tables"  # build --format html: the same templates
    assert main(["build", str(results), "--output-dir", str(tables), "--format", "html"]) == 0
    page = (tables / "ptb.html").read_text(encoding="utf-8")
    assert "<script>window" not in page and "</td><b>" not in page and escaped in page


def test_the_templates_and_assets_are_package_data() -> None:
    """An installed wheel has what the site and ``build --format html`` render with."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["leaderboard"]
    package = REPO / "leaderboard"
    files = [*(package / "templates").iterdir(), *(package / "site_assets").iterdir()]
    for path in files:
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative
    assert {path.name for path in files} >= {"index.html", "result.html", "table.html", "site.css"}


def test_the_reproduce_command_scores_the_result_again() -> None:
    result = load_result(REPO / "results" / "ptb" / "baselines.neural_cache+window=100.ptb.test.json")
    assert reproduce_command(result) == (
        "python -m harness eval baselines.neural_cache --dataset ptb --split test --model-args "
        "window=100 --checkpoint baselines/trained/ptb/zoneout_lstm.pt --batch-size 1 --bptt 100"
    )


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("not-a-site", "holds files and no site built here"),
        ("inside-input", "is inside"),
        ("a-file", "is a file; name a directory"),
        ("missing-figures", "--figures"),
        ("few-samples", "--samples 50 is too few"),
    ],
)
def test_bad_output_directories_are_one_line(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture, setup: str, message: str
) -> None:
    out, extra = tmp_path / "site", []
    if setup == "not-a-site":
        out.mkdir()
        (out / "notes.txt").write_text("mine", encoding="utf-8")
    elif setup == "inside-input":
        out = results / "site"
    elif setup == "a-file":
        out.write_text("", encoding="utf-8")
    elif setup == "few-samples":
        extra = ["--samples", "50"]  # after build's --samples 1000: the last one counts
    else:
        extra = ["--figures", str(tmp_path / "nowhere")]
    assert build([results], out, *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    if setup == "not-a-site":
        assert [p.name for p in out.iterdir()] == ["notes.txt"]
