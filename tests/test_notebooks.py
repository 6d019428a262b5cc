"""Every notebook in notebooks/ runs from top to bottom without an error and shows what it is for."""

from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
# text each notebook must print (its stream outputs), beyond running without an error and drawing a plot
EXPECTED = {
    "quickstart.ipynb": ["test macro-F1 mean", "read"],
    "01_corpus.ipynb": ["read 7,253 = kept 7,253", "disagreement", "conversations: median"],
    "02_experiments.ipynb": ["trained 'tfidf soft targets'", "trained 'tfidf + context'", "report/report.html"],
    "03_errors.ipynb": ["test sentences from", "=== empathy:", "labelers gave"],
    "04_personaldialog.ipynb": ["trained on the Korean synthetic OPELA corpus", "records read 30 = annotated 30",
                                "spread of the predictions"],
    "05_what_to_annotate_next.ipynb": ["labelers ranked by quality: ['labeler1', 'labeler2', 'labeler3']",
                                       "wrong consensus labels:", "next 8 sentences (combined)"],
}


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no notebook"
    assert {p.name for p in NOTEBOOKS} == set(EXPECTED)


def _run(path: Path, folder: Path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.delenv("PSYATTRS_NOTEBOOK_STORE", raising=False)  # 02 trains its own runs into a temporary store
    outputs = _run(path, tmp_path)
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    for expected in EXPECTED[path.name]:
        assert expected in text, expected
    # nothing a reader cannot act on: no warnings printed by the notebook's own cells
    assert "Warning" not in text.replace("warning:", ""), text[text.find("Warning") - 200:][:400]
    # the plot was drawn
    assert any("image/png" in o.get("data", {}) for o in outputs if o.output_type in ("display_data", "execute_result"))


def test_committed_notebooks_carry_their_outputs():
    import nbformat

    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(c.outputs or c.source.startswith(("def ", "import")) for c in code), path.name
        assert not [o for c in code for o in c.outputs if o.output_type == "error"], path.name
