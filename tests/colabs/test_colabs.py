"""Every notebook under colabs/ executes top to bottom."""

import pathlib

import nbclient
import nbformat
import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parents[2] / "colabs").glob("*.ipynb"))


def test_there_are_notebooks():
  assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
  notebook = nbformat.read(path, as_version=4)
  nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                          resources={"metadata": {"path": str(path.parent)}}).execute()
  outputs = [o for cell in notebook.cells if cell.cell_type == "code"
             for o in cell.get("outputs", [])]
  assert not [o for o in outputs if o.get("output_type") == "error"]
