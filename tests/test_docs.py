"""The docs stay true: the API reference matches the code, examples in the docs run, links
resolve, the README keeps its first screen and the CLI page lists every option."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jnrrd
import jnrrd.codecs
import jnrrd.validation

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PUBLIC_MODULES = ("jnrrd", "jnrrd.codecs", "jnrrd.validation")

# A documented entry: a heading, or the lead of a bullet item (text before " — "), holding
# backticked qualified names with an optional signature: `jnrrd.read(source, *, level=0)`.
_NAME = re.compile(r"`(jnrrd(?:\.\w+)+)(\([^`]*\))?`")


def documented_entries(text: str) -> list[tuple[str, str | None]]:
    """(qualified name, signature text or None) for every entry of ``api.md``."""
    entries = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#"):
            lead = line
        elif line.startswith("- "):
            lead = line
            # a signature may wrap onto the next line when the lead has no " — " yet
            if " — " not in lead and i + 1 < len(lines) and lines[i + 1].startswith("  — "):
                lead = line + " "
            lead = lead.split(" — ")[0]
        else:
            continue
        entries.extend((m.group(1), m.group(2)) for m in _NAME.finditer(lead))
    return entries


def resolve(qualname: str) -> Any:
    """Resolve ``jnrrd.mod.Name.attr`` through the longest importable module prefix (so a
    module shadowed by a same-named function in its package still resolves)."""
    parts = qualname.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for p in parts[cut:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(qualname)


def public_names() -> dict[str, Any]:
    names = {}
    for modname in PUBLIC_MODULES:
        mod = importlib.import_module(modname)
        for n in mod.__all__:
            names[f"{modname}.{n}"] = getattr(mod, n)
    return names


def params_of_doc(sig: str) -> list[tuple[str, str, Any]]:
    """Parameters of a documented signature ``(a, b=1, *, c=None, **kw)``: (name, kind,
    default) with defaults as literals (``...`` when not a literal, ``<none>`` if absent)."""
    fn = ast.parse(f"def f{sig}: pass").body[0]
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    out: list[tuple[str, str, Any]] = []
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, d in zip(positional, defaults, strict=True):
        out.append((arg.arg, "POSITIONAL_OR_KEYWORD", _literal(d)))
    if a.vararg:
        out.append((a.vararg.arg, "VAR_POSITIONAL", "<none>"))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        out.append((arg.arg, "KEYWORD_ONLY", _literal(d)))
    if a.kwarg:
        out.append((a.kwarg.arg, "VAR_KEYWORD", "<none>"))
    return out


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return "<none>"
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ...


def params_of_code(obj: Any, *, is_method: bool) -> list[tuple[str, str, Any]]:
    sig = inspect.signature(obj)
    out = []
    for i, p in enumerate(sig.parameters.values()):
        if i == 0 and is_method and p.name in ("self", "cls"):
            continue
        kind = p.kind.name.replace("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")
        default = "<none>" if p.default is inspect.Parameter.empty else p.default
        out.append((p.name, kind, default))
    return out


@pytest.fixture(scope="module")
def api_entries() -> list[tuple[str, str | None]]:
    return documented_entries((DOCS / "api.md").read_text(encoding="utf-8"))


def test_every_public_name_is_documented(api_entries: list[tuple[str, str | None]]) -> None:
    documented = {name for name, _ in api_entries}
    documented_objects = []
    for name in documented:
        try:
            documented_objects.append(resolve(name))
        except (ImportError, AttributeError):
            pass
    missing = [q for q, obj in public_names().items()
               if q not in documented and not any(obj is d for d in documented_objects
                                                  if not isinstance(d, (str, int)))]
    assert not missing, f"public names missing from docs/api.md: {missing}"


def test_every_documented_name_exists(api_entries: list[tuple[str, str | None]],
                                      tmp_path: Path) -> None:
    # Instance attributes (set in __init__) are checked on real instances.
    path = tmp_path / "v.jnrrd"
    jnrrd.write(path, np.zeros((8, 8), np.uint8), tile=4, levels=2)
    with jnrrd.open(path) as vol:
        instances = {"jnrrd.Volume": vol, "jnrrd.LevelView": vol.levels[1],
                     "jnrrd.Header": vol.header}
        gone = []
        for name, _ in api_entries:
            try:
                resolve(name)
                continue
            except (ImportError, AttributeError):
                pass
            owner, _, attr = name.rpartition(".")
            if owner in instances and hasattr(instances[owner], attr):
                continue
            gone.append(name)
    assert not gone, f"docs/api.md documents names that do not exist: {gone}"


def test_documented_signatures_match(api_entries: list[tuple[str, str | None]]) -> None:
    checked, wrong = 0, []
    for name, sig in api_entries:
        if sig is None:
            continue
        obj = resolve(name)
        owner = resolve(name.rpartition(".")[0])
        is_method = inspect.isclass(owner) and not inspect.isclass(obj)
        documented = params_of_doc(sig)
        actual = params_of_code(obj, is_method=is_method)
        # A non-literal documented default (``out=sys.stdout``) only says "has a default".
        actual = [(n, k, ... if d_doc is ... and d != "<none>" else d)
                  for (n, k, d), (_, _, d_doc) in zip(actual, documented + [("", "", None)]
                                                      * len(actual), strict=False)]
        if documented != actual:
            wrong.append(f"{name}: documented {documented}, code {actual}")
        checked += 1
    assert not wrong, "\n".join(wrong)
    assert checked >= 40  # the reference really carries signatures


def test_parser_finds_entries_and_signatures() -> None:
    text = ("### `jnrrd.read(source, *, level=0)`\n"
            "- class `jnrrd.codecs.Zstd(level=None, checksum=False)` — text `jnrrd.nope`\n"
            "- `jnrrd.LevelView.shape`, `jnrrd.LevelView.dtype` — as NumPy\n"
            "prose `jnrrd.not_an_entry`\n")
    assert documented_entries(text) == [
        ("jnrrd.read", "(source, *, level=0)"),
        ("jnrrd.codecs.Zstd", "(level=None, checksum=False)"),
        ("jnrrd.LevelView.shape", None), ("jnrrd.LevelView.dtype", None)]
    assert params_of_doc("(a, b=1, *, c='x', **kw)") == [
        ("a", "POSITIONAL_OR_KEYWORD", "<none>"), ("b", "POSITIONAL_OR_KEYWORD", 1),
        ("c", "KEYWORD_ONLY", "x"), ("kw", "VAR_KEYWORD", "<none>")]
    # a drifted default is caught
    assert params_of_doc("(source, *, level=1)") != params_of_code(
        lambda source, *, level=0: None, is_method=False)


# -- runnable docs -----------------------------------------------------------------------------
def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def test_index_order_worked_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    blocks = python_blocks(DOCS / "index-order.md")
    assert len(blocks) >= 2 and "assert" in blocks[0]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block, str(DOCS / "index-order.md"), "exec"), namespace)
    assert (tmp_path / "example.jnrrd").is_file() and (tmp_path / "from_c.jnrrd").is_file()


def test_readme_first_screen_and_tour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = readme.splitlines()[:27]
    assert first[0] == "# jnrrd"
    assert ("python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
            "python examples/quickstart.py") in first
    assert 'pip install -e ".[test]" && python -m pytest -n auto' in first
    assert any('python -m pytest -m "not slow" -n auto' in line for line in first)
    assert any(line.startswith("Docs: ") for line in first)
    # The tour runs as written, on a volume large enough for its slices and levels.
    tour = python_blocks(ROOT / "README.md")[0]
    monkeypatch.chdir(tmp_path)
    jnrrd.write("ct.jnrrd", np.arange(256 * 64 * 16, dtype=np.int16).reshape(256, 64, 16),
                tile=32, levels=3)
    namespace: dict[str, Any] = {}
    exec(compile(tour, "README.md", "exec"), namespace)
    assert namespace["region"].shape == (100, 10)
    assert namespace["problems"] == []
    assert jnrrd.read_header("out.jnrrd")["tile:levels"] == 4


def test_codec_json_examples_are_valid_and_canonical() -> None:
    text = (DOCS / "codecs.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    blocks += re.findall(r"\| `(\{.*?\})` \|", text)
    assert len(blocks) >= 15
    names = set()
    for b in blocks:
        value = json.loads(b)
        if isinstance(value, list):
            floats = any(c["name"] == "scale_offset" for c in value)
            chain = jnrrd.codecs.CodecChain.from_json(
                value, dtype="float32" if floats else "uint16", shape=(8, 8),
                fill_value=float("nan") if floats else None)
            x = np.linspace(0, 25, 64, dtype=np.float32).reshape(8, 8) if floats else \
                np.arange(64, dtype=np.uint16).reshape(8, 8)
            np.testing.assert_allclose(chain.decode(chain.encode(x)), x, atol=0.05 + 1e-6)
            names.update(c["name"] for c in value)
        else:
            codec = jnrrd.codecs.get_codec(value)
            assert codec.to_json() == value, "examples are written in canonical JSON"
            names.add(value["name"])
    builtin = {cls.name for cls in jnrrd.codecs.BUILTIN_CODECS}
    assert builtin <= names, f"codecs without a JSON example: {builtin - names}"


def test_links_resolve() -> None:
    pages = [ROOT / "README.md", ROOT / "examples" / "README.md", *DOCS.glob("*.md")]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text("utf-8")):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_cli_page_lists_every_option() -> None:
    from jnrrd.cli import _parser

    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():  # type: ignore[union-attr]
        assert f"jnrrd {name}" in text
        for action in p._actions:
            for opt in action.option_strings:
                if opt.startswith("--") and opt != "--help":
                    assert opt in text, f"{name} {opt} is not documented in docs/cli.md"


@pytest.mark.parametrize("page", ["format.md", "security.md"])
def test_documented_caps_match_the_policy(page: str) -> None:
    from jnrrd.policy import Policy

    text = (DOCS / page).read_text(encoding="utf-8")
    p = Policy()
    assert p.max_line_bytes == 256 << 20 and "256 MiB" in text
    assert p.max_header_bytes == 1 << 30 and "1 GiB" in text
    if page == "security.md":
        assert p.max_bytes == 16 << 30 and "16 GiB" in text
        assert p.max_tiles == 10**7 and "10⁷" in text
        assert p.max_tile_bytes == 1 << 30
        assert p.max_files == 10**5 and "10⁵" in text
        assert p.max_pad == 65536 and "65 536" in text
