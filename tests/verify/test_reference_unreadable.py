"""Issue 40, item 4: a config.json transformers cannot read (an unknown `model_type`) is a clear
error before any launch, not a traceback from the reference step."""

from __future__ import annotations

import json
import shutil

import pytest

from bringup.verify.reference import ReferenceError, reference_for


@pytest.mark.slow
def test_a_model_transformers_cannot_read_is_a_reference_error(tiny_model, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(tiny_model, folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "model_type": "nonexistent_xyz"}))
    with pytest.raises(ReferenceError, match=r"transformers cannot read the model in .*nonexistent_xyz"):
        reference_for(str(folder), "auto", cache_dir=tmp_path / "refs")
