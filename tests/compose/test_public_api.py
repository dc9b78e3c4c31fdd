"""The public API: ``__all__`` lists exactly the public names, sorted, and each imports."""

from __future__ import annotations

import importlib
import types

import pytest


@pytest.mark.parametrize("package", ["compose", "adk"])
def test_all_is_exact_and_importable(package: str) -> None:
    mod = importlib.import_module(package)
    exported = list(mod.__all__)
    public = {
        name
        for name, value in vars(mod).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert set(exported) == public
    assert len(exported) == len(set(exported))
    for name in exported:
        assert getattr(mod, name) is not None
        exec(f"from {package} import {name}", {})


def test_importing_compose_does_not_import_test_dependencies() -> None:
    import subprocess
    import sys

    code = (
        "import compose, adk, sys; "
        "print(sorted(m for m in ('hypothesis', 'compose.testing', 'pytest') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
