"""The house rules that keep the UI and the core apart, checked on the source itself."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "dlguide_core"
PAGES = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]
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
    offenders = [p.relative_to(ROOT) for p in CORE.rglob("*.py") if "streamlit" in _imports(p)]
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
    allowed = {"dlguide_core", "pages", "streamlit", "plotly", "pandas", "numpy", "PIL"}
    allowed |= set(sys.stdlib_module_names) - core_only
    for path in PAGES:
        extra = _imports(path) - allowed
        assert not extra, f"{path.name} imports {extra}: put that logic in dlguide_core"


def test_every_widget_has_an_explicit_key():
    missing = []
    for path in PAGES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in WIDGETS and not any(k.arg == "key" for k in node.keywords)):
                missing.append(f"{path.name}:{node.lineno} {node.func.attr}")
    assert not missing, f"widgets without key=: {missing}"


def test_checkpoints_load_only_with_weights_only_true():
    for path in [*CORE.rglob("*.py"), *PAGES]:
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
