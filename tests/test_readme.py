"""The README's Python example is valid code that imports only public names."""

import ast
import importlib
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_python_example_compiles_and_imports_public_names():
    blocks = _python_blocks()
    assert blocks, "README.md has no python block"
    for block in blocks:
        tree = ast.parse(block)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert not any(part.startswith("_") for part in node.module.split(".")), node.module
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module}.{alias.name} does not exist"
