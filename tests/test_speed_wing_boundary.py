"""The core is the reference; the speed wing (minitransformer/fast/) is opt-in.

Parsed imports, not a run: no module of the core folders may import the wing,
whether by absolute name, by a relative path or from inside a function. And
importing the core leaves the wing unloaded and the twin hook empty.
"""
import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "minitransformer"
CORE = ("functional", "layers", "models", "optim", "training", "generation", "homework", "gradcheck", "trace",
        "tokenizers", "pretrained", "plots", "metrics")


def imported_modules(source: str, package: str) -> set:
    """Every module that ``source`` (a file of ``package``) imports, relative imports made absolute."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _package_of(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])


def test_no_core_module_imports_the_speed_wing():
    leaks = [f"{path.relative_to(PACKAGE.parent)} imports {name}"
             for folder in CORE for path in sorted((PACKAGE / folder).rglob("*.py"))
             for name in sorted(imported_modules(path.read_text(encoding="utf-8"), _package_of(path)))
             if name == "minitransformer.fast" or name.startswith("minitransformer.fast.")]
    assert leaks == []


def test_the_parser_sees_every_form_of_importing_the_wing():
    """The check above would catch each of these, written anywhere in layers/."""
    for source in ("def f():\n    from ..fast import kernels\n", "from ..fast.kernels import pairs\n",
                   "import minitransformer.fast\n", "from minitransformer import fast\n"):
        names = imported_modules(source, "minitransformer.layers")
        assert any(n == "minitransformer.fast" or n.startswith("minitransformer.fast.") for n in names), source


def test_importing_the_core_and_training_leaves_the_wing_off():
    code = ("import sys, minitransformer.models, minitransformer.training.loop, minitransformer.generation;"
            "from minitransformer.functional.twins import TWINS;"
            "print(any(m.startswith('minitransformer.fast') for m in sys.modules), len(TWINS))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent).stdout.split()
    assert out == ["False", "0"]


def _twin_call_sites() -> set:
    """The plain functions the core passes to twin(...): names, or ``self.attr`` for an attribute."""
    found = set()
    for folder in CORE:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "twin" and node.args:
                    found.add(ast.unparse(node.args[0]))
    return found


def test_docs_speed_lists_every_seam_the_core_opens():
    """docs/speed.md's table of seams names exactly the functions the core routes through twin()."""
    import re
    text = (PACKAGE.parent / "docs" / "speed.md").read_text(encoding="utf-8")
    section = text[text.index("## The seams"):]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    listed = {name for row in rows for name in re.findall(r"`([\w.]+)`", row.split(" | ")[0])}
    assert listed == _twin_call_sites()
