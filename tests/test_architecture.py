"""The house rules that keep the UI and the core apart, checked on the source itself."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "dlguide_core"
PAGES = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]
UI = sorted((ROOT / "ui").glob("*.py"))  # the UI package shared by the pages (not routed)
WIDGETS = {
    "button", "download_button", "checkbox", "toggle", "radio", "selectbox", "multiselect", "slider",
    "select_slider", "text_input", "text_area", "number_input", "date_input", "time_input", "file_uploader",
    "camera_input", "color_picker", "data_editor", "chat_input", "form_submit_button", "segmented_control",
    "pills", "feedback", "audio_input",
}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_core_never_imports_streamlit_in_source():
    offenders = [p.relative_to(ROOT) for p in CORE.rglob("*.py") if {"streamlit", "ui", "pages"} & _imports(p)]
    assert not offenders, f"dlguide_core must stay UI-free: {offenders}"


def test_importing_every_core_module_loads_no_streamlit():
    modules = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in CORE.rglob("*.py")
               if p.name != "__main__.py"]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print('streamlit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_pages_import_only_core_and_ui_libraries():
    # Standard-library helpers are fine; processes, databases and pickles belong in the core.
    core_only = {"subprocess", "sqlite3", "multiprocessing", "threading", "pickle", "shutil", "signal"}
    allowed = {"dlguide_core", "streamlit", "plotly", "pandas", "numpy", "PIL"}
    allowed |= set(sys.stdlib_module_names) - core_only
    for path in PAGES:  # pages use the ui package; a page never imports another page
        extra = _imports(path) - allowed - {"ui"}
        assert not extra, f"{path.name} imports {extra}: put that logic in dlguide_core"
    for path in UI:  # the ui package never imports the pages that use it
        extra = _imports(path) - allowed - {"ui"}
        assert not extra, f"ui/{path.name} imports {extra}: put that logic in dlguide_core"


def test_every_widget_has_an_explicit_key():
    missing = []
    for path in [*PAGES, *UI]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in WIDGETS and not any(k.arg == "key" for k in node.keywords)):
                missing.append(f"{path.name}:{node.lineno} {node.func.attr}")
    assert not missing, f"widgets without key=: {missing}"


def test_checkpoints_load_only_with_weights_only_true():
    for path in [*CORE.rglob("*.py"), *PAGES, *UI]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load":
                owner = node.func.value
                if isinstance(owner, ast.Name) and owner.id == "torch":
                    flag = {k.arg: k.value for k in node.keywords}.get("weights_only")
                    assert isinstance(flag, ast.Constant) and flag.value is True, (
                        f"{path.name}:{node.lineno} torch.load without weights_only=True")


def test_streamlit_config_keeps_xsrf_and_an_upload_cap():
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["enableXsrfProtection"] is True
    assert 1 <= config["server"]["maxUploadSize"] <= 50
    assert config["browser"]["gatherUsageStats"] is False


def _routed_pages() -> set[str]:
    """The page scripts app.py routes (its st.Page("pages/x.py", ...) calls)."""
    tree = ast.parse((ROOT / "app.py").read_text())
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Page"
            and node.args and isinstance(node.args[0], ast.Constant)}


def _module_level_calls(tree: ast.Module) -> list[ast.Call]:
    """Calls that run when the module is imported: outside functions and classes, decorators excluded."""
    calls, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue  # a decorator (st.cache_resource) only wraps; the body runs later
        if isinstance(node, ast.Call):
            calls.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return calls


def _rooted_at(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Call)):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return node.id if isinstance(node, ast.Name) else ""


def test_pages_holds_only_the_routed_pages():
    # Streamlit routes pages/ by file name until st.navigation runs (serve.py turns that off): a helper there
    # would be one URL away from running as a page. The shared UI lives in ui/, beside pages/, never routed.
    routed = _routed_pages()
    assert routed == {f"pages/{p.name}" for p in (ROOT / "pages").glob("*.py")}, "pages/ holds a helper"
    assert not {r for r in routed if not r.startswith("pages/")}, "app.py routes a script outside pages/"
    assert not (ROOT / "pages" / "__init__.py").exists() and (ROOT / "ui" / "__init__.py").is_file()


def test_ui_helper_modules_call_nothing_at_import():
    # Issue 10: a helper module once called st.rerun() while being imported, so a page importing it saw a
    # half-built module (ImportError on fresh servers). Helpers define; only page scripts run st.* at top level.
    assert UI, "the ui package moved: update this test"
    offenders = []
    for path in UI:
        tree = ast.parse(path.read_text())
        for call in _module_level_calls(tree):
            if _rooted_at(call.func) == "st":
                offenders.append(f"{path.name}:{call.lineno} {ast.unparse(call)[:60]}")
        statements = [n for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
        top = {id(n) for n in _module_level_calls(tree)}
        offenders += [f"{path.name}:{n.lineno} {ast.unparse(n)[:60]}" for n in statements if id(n.value) in top]
    assert not offenders, f"UI helper modules do something at import time: {offenders}"


def test_no_page_or_helper_reruns_or_stops_while_imported_as_a_module():
    # Page scripts may st.stop() at top level (they run as scripts); nothing imported by them may.
    for path in UI:
        tree = ast.parse(path.read_text())
        names = [c.func.attr for c in _module_level_calls(tree) if isinstance(c.func, ast.Attribute)]
        assert not {"rerun", "stop", "switch_page"} & set(names), f"{path.name} reruns/stops at import"


def test_every_served_entry_goes_through_the_launcher():
    # `make run`, `make kiosk`, `make dev`, the Dockerfile and every test/bench server use serve.py, which
    # turns Streamlit's pages/-by-file-name routing off before the first session (issue 10).
    makefile = (ROOT / "Makefile").read_text()
    for target in ("run", "kiosk", "dev"):
        recipe = makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
        assert "serve.py" in recipe and "streamlit run" not in recipe, target
    assert '"serve.py"' in (ROOT / "Dockerfile").read_text().split("\nCMD", 1)[1]
    for path in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]:
        if path.name == "test_architecture.py":
            continue
        text = path.read_text()
        assert '"-m", "streamlit"' not in text and '"streamlit", "run"' not in text, path.name
