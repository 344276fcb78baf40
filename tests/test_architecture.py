"""The house rules that keep the UI and the core apart, checked on the source itself."""

import ast
import re
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest

from tests.support.paths import ROOT

CORE = ROOT / "dlguide_core"
PAGES = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]
UI = sorted((ROOT / "ui").glob("*.py"))  # the UI package shared by the pages (not routed)
WEB = sorted((ROOT / "web").glob("*.py"))  # what serve.py mounts in the server (middleware, routes, hooks)
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
    for path in UI:  # the ui package never imports the pages that use it, nor the server's plumbing
        extra = _imports(path) - allowed - {"ui"}
        assert not extra, f"ui/{path.name} imports {extra}: put that logic in dlguide_core"


def test_pages_and_ui_never_import_the_servers_plumbing():
    # issue 45: web/ is what serve.py mounts; a page or a widget never reaches into it.
    offenders = [str(p.relative_to(ROOT)) for p in [*PAGES, *UI] if "web" in _imports(p)]
    assert not offenders, f"pages and ui/ never import web/: {offenders}"


def test_web_never_imports_pages_nor_draws():
    # web/ runs in the server's event loop and request threads: it may read ui.cache's shared resources and
    # ui.auth's sign-in check, never a page, and never calls st.* drawing functions.
    drawing = re.compile(r"\bst\.(write|markdown|button|title|header|image|plotly_chart|dataframe|error|info|"
                         r"warning|success|columns|sidebar|fragment|rerun|stop)\b")
    for path in WEB:
        assert "pages" not in _imports(path), f"web/{path.name} imports pages"
        assert not drawing.search(path.read_text()), f"web/{path.name} draws"
        ui_used = {n.module for n in ast.walk(ast.parse(path.read_text()))
                   if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] == "ui"}
        assert ui_used <= {"ui.cache", "ui.auth", "ui.booth"}, f"web/{path.name} imports {ui_used}"


def test_no_asgi_middleware_or_starlette_under_ui():
    offenders = [p.name for p in UI if "starlette" in _imports(p) or "async def __call__" in p.read_text()]
    assert not offenders, f"ASGI middleware belongs in web/: {offenders}"


def test_request_bodies_are_read_in_one_place_before_any_turn():
    # issue 43, P2: a route that took its turn and then read the body let 32 slow sockets hold every turn. Bodies
    # are read by web.bodies.read_body (a deadline, a minimum rate), and a web/ module with turns (a Semaphore)
    # reads its bodies with it.
    readers = [p.name for p in [*WEB, ROOT / "serve.py"] if p.name != "bodies.py" and "def read_body" in p.read_text()]
    assert not readers, f"request bodies are read by web.bodies.read_body only: {readers}"
    for path in WEB:
        text = path.read_text()
        if "asyncio.Semaphore(" in text and path.name != "bodies.py":
            assert "read_body(" in text, f"web/{path.name} hands out turns: read bodies first with read_body"


def test_the_origin_check_stands_right_behind_the_host_check():
    # issue 43, P1: every server (the full app, signed-in or not, and the public booth) refuses another origin's
    # websocket and writes, before the token gate or sign-in sees them.
    stack = (ROOT / "web" / "stack.py").read_text()
    host, origin, gate = (stack.index("Middleware(TrustedHostMiddleware"), stack.index("Middleware(OriginCheck)"),
                          stack.index("*gate,"))
    assert host < origin < gate and "]" not in stack[host:origin], "web/stack.py: Host check, Origin check, gate"


def test_serve_py_stays_the_launcher():
    lines = len((ROOT / "serve.py").read_text().splitlines())
    assert lines <= 250, f"serve.py has {lines} lines: the middleware stack lives in web/stack.py"


def test_every_widget_has_an_explicit_key():
    missing = []
    for path in [*PAGES, *UI]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in WIDGETS and not any(k.arg == "key" for k in node.keywords)):
                missing.append(f"{path.name}:{node.lineno} {node.func.attr}")
    assert not missing, f"widgets without key=: {missing}"


def test_checkpoints_load_only_with_weights_only_true():
    for path in [*CORE.rglob("*.py"), *PAGES, *UI, *WEB]:
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


def test_the_router_ends_every_run_normally():
    # Issue 18: app.py once ended booth-mode and sign-in runs with st.stop(). Streamlit forgets the timer
    # fragments a run did not draw only when the run reaches its end, so after "Start over" the booth's 1 s
    # countdown still ran once at its old place and the browser blanked the page. The router never stops.
    calls = [n for n in ast.walk(ast.parse((ROOT / "app.py").read_text())) if isinstance(n, ast.Call)]
    stops = [f"app.py:{c.lineno}" for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr == "stop"]
    assert not stops, f"app.py stops its runs: {stops}"


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
        if path.name == "servers.py":  # bare_command: the benches' floor, a generated app (below) with no dlguide
            text = text.replace('[sys.executable, "-m", "streamlit", "run", str(app)', "")
        if path.name in ("bench_first_paint.py", "bench_rerun_flood.py"):  # their "bare" mode serves that floor
            assert "app.py" not in text.split("BARE_APP = ", 1)[1].split('"""', 2)[1]
        assert '"-m", "streamlit"' not in text and '"streamlit", "run"' not in text, path.name


# --- Issue 11: the layout. Imports are read from the code (every import statement, inside functions and
# `if TYPE_CHECKING:` too) into one module graph; the rules below are checked on it.

LAYERS = {  # subpackage -> the subpackages it must never import (the arrows point one way)
    "vision": {"training", "jobs", "data", "inference"},  # data may use vision.presets, never the other way
    "data": {"training", "jobs"},
    "training": {"jobs", "inference", "tf"},  # the loop reports through a sink; the store is the job process's business
    "tf": {"jobs", "inference"},  # the TensorFlow recipes: a layer beside training (issue 23)
    "inference": {"training", "jobs", "data"},
}
BASE = ("settings", "errors", "devices", "downloads", "migraphx_lib", "gpu_slots", "csv_cells",
        "smi", "torchvision_lib", "onnxruntime_lib")  # the bottom layer
BASE_IN_PACKAGES = ("tf.runtime",)  # base modules that live in their concept's subpackage (issue 23)
LONG_MODULES: dict[str, str] = {  # "dlguide_core/x/y.py": why it must stay over MAX_LINES
    "dlguide_core/jobs/store.py": "JobStore is the one store every client knows: it composes its parts (the "
    "connection, the metric tables, the requeues: each its own module) and offers their methods by name, one line "
    "each; split by inheritance it was a four-level chain that hid one concept in four files (issue 45)",
}
MAX_LINES = 300
# The modules of the flat layout (before issue 11) that moved: nothing may name them any more.
OLD_MODULES = (
    "images", "presets", "models", "checkpoints", "classify", "gradcam", "samples", "result_files", "export",
    "backend_base", "backend_migraphx", "backends", "benchmark", "datasets", "tf_data", "recipes", "sinks",
    "metrics", "diagnostics", "training", "distributed", "tf_recipes", "tensorboard_export", "launch", "jobs",
    "job_runner", "comparison", "evaluation_job", "kiosk", "tensorflow_runtime",
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _docstrings(tree: ast.Module) -> set[int]:
    owners = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                          ast.AsyncFunctionDef))]
    return {id(n.body[0].value) for n in owners if n.body and isinstance(n.body[0], ast.Expr)}


def _named_modules(tree: ast.Module) -> set[str]:
    """dlguide_core modules named in strings: `import_module("dlguide_core.x")` (with an f-string, every module
    its constant head may name), recipe entries "dlguide_core.x.y:function", lists of modules to import
    (RECIPE_MODULES). Docstrings and the module after "-m" in a command line (another process) do not count."""
    commands = {id(b) for n in ast.walk(tree) if isinstance(n, (ast.List, ast.Tuple))
                for a, b in zip(n.elts, n.elts[1:]) if isinstance(a, ast.Constant) and a.value == "-m"}
    skip = _docstrings(tree) | commands
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            match = re.fullmatch(r"(dlguide_core(?:\.\w+)*)(?::\w+)?", node.value)
            if match and _is_module(match.group(1)):
                found.add(match.group(1))
        elif (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module")
              and node.args and isinstance(node.args[0], ast.JoinedStr)):
            head = node.args[0].values[0]  # f"dlguide_core.cli.{name}" -> "dlguide_core.cli."
            if isinstance(head, ast.Constant) and head.value.startswith("dlguide_core."):
                found |= {m for m in map(_module_name, CORE.rglob("*.py")) if m.startswith(head.value)}
    return found


def _import_graph(package: Path) -> dict[str, set[str]]:
    """{module: the modules it imports} for every module under `package` (a folder of the repo).

    Every import statement counts, wherever it sits: an import inside a function is deferred, not absent
    (issue 11 found a six-module cycle held apart only by such imports). `from a.b import c` means the module
    a.b.c when that is a module, else a.b; relative imports are resolved. A string naming a module the code
    imports at run time (`importlib.import_module("dlguide_core.x")`, a recipe's entry
    "dlguide_core.x.y:function", RECIPE_MODULES) is an edge too: the importing module depends on it as surely
    as on an import statement, only later, and a registry that names its plug-ins this way still knows them.
    Modules outside the repo (streamlit, torch) appear under the name written."""
    graph = {}
    for path in sorted(package.rglob("*.py")):
        name, tree = _module_name(path), ast.parse(path.read_text())
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported = _named_modules(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[:len(here.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                imported |= {f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names}
        graph[name] = imported - {name}  # a recipe naming its own run function is no cycle
    return graph


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _shortest_cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """For every module on a cycle, the shortest cycle through it (breadth-first); distinct, shortest first."""
    cycles = set()
    for start in graph:
        parents, queue = {}, deque([start])
        while queue and start not in parents:
            node = queue.popleft()
            for target in sorted(graph.get(node, ())):
                if target not in parents:
                    parents[target] = node
                    queue.append(target)
        if start in parents:
            path, node = [], parents[start]
            while node != start:
                path.append(node)
                node = parents[node]
            path = [start, *reversed(path)]
            first = path.index(min(path))
            cycles.add(tuple(path[first:] + path[:first]))
    return sorted(cycles, key=lambda c: (len(c), c))


def test_no_import_cycle_between_core_modules():
    graph = {m: {t for t in targets if _inside(t, "dlguide_core")} for m, targets in _import_graph(CORE).items()}
    cycles = _shortest_cycles(graph)
    assert not cycles, "import cycles (shortest first):\n" + "\n".join(
        " -> ".join([*c, c[0]]) for c in cycles)


def test_the_shortest_cycle_finder_on_a_known_graph():
    graph = {"a": {"b"}, "b": {"c", "a"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}
    assert _shortest_cycles(graph) == [("d",), ("a", "b"), ("a", "b", "c")]


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layers_import_only_downward(layer):
    assert (CORE / layer / "__init__.py").is_file(), f"no package dlguide_core.{layer}: update LAYERS"
    banned = [f"dlguide_core.{b}" for b in LAYERS[layer]]
    offenders = sorted(f"{m} imports {t}" for m, targets in _import_graph(CORE / layer).items()
                       for t in targets if any(_inside(t, b) for b in banned))
    assert not offenders, f"dlguide_core.{layer} must not import {sorted(LAYERS[layer])}:\n" + "\n".join(offenders)


def test_base_modules_import_only_base_modules():
    base = {f"dlguide_core.{b}" for b in BASE if (CORE / f"{b}.py").is_file()}
    base |= {f"dlguide_core.{b}" for b in BASE_IN_PACKAGES if _is_module(f"dlguide_core.{b}")}
    assert {"dlguide_core.settings", "dlguide_core.errors"} <= base, "the base modules moved: update BASE"
    graph = _import_graph(CORE)
    offenders = sorted(f"{m} imports {t}" for m in base for t in graph[m]
                       if _inside(t, "dlguide_core") and t not in base | {"dlguide_core"})
    assert not offenders, "base modules import no subpackage nor higher module:\n" + "\n".join(offenders)


def test_data_uses_only_the_tensorflow_runtime_of_the_tf_package():
    """data/ loads keras.datasets through tf.runtime (a base module); the TensorFlow recipes import data, never
    the other way (issue 23)."""
    offenders = sorted(f"{m} imports {t}" for m, targets in _import_graph(CORE / "data").items() for t in targets
                       if _inside(t, "dlguide_core.tf") and t.removeprefix("dlguide_core.") not in BASE_IN_PACKAGES)
    assert not offenders, "\n".join(offenders)


def test_the_top_level_clients_are_imported_only_from_above():
    """cli/ is imported by nothing else of the core (but __main__); booth.py only by cli/, booth_photos.py (a
    visitor's photo path) and booth_teach.py (the Teach tab's state, on both: imported by nothing of the core);
    evaluation.py only by jobs/, cli/ and
    booth.py: the subpackages below never reach up to them."""
    allowed = {"dlguide_core.cli": ("dlguide_core.cli", "dlguide_core.__main__"),
               "dlguide_core.booth": ("dlguide_core.cli", "dlguide_core.booth_photos", "dlguide_core.booth_teach"),
               "dlguide_core.booth_photos": ("dlguide_core.booth_teach",),  # the Teach tab's photos (issue 44)
               "dlguide_core.booth_teach": (),
               "dlguide_core.evaluation": ("dlguide_core.jobs", "dlguide_core.cli", "dlguide_core.booth")}
    offenders = sorted(f"{m} imports {t}" for m, targets in _import_graph(CORE).items() for t in targets
                       for top, importers in allowed.items()
                       if _inside(t, top) and not any(_inside(m, i) for i in importers))
    assert not offenders, "a lower layer reaches up to a client:\n" + "\n".join(offenders)


def test_core_never_imports_streamlit_the_ui_or_pages():
    offenders = sorted(f"{m} imports {t}" for m, targets in _import_graph(CORE).items() for t in targets
                       if any(_inside(t, ui) for ui in ("streamlit", "ui", "pages")))
    assert not offenders, "dlguide_core stays UI-free:\n" + "\n".join(offenders)


def test_ui_package_never_imports_pages():
    # Shared Streamlit helpers live in ui/, one module per concept; pages/ holds only the routed pages.
    assert (ROOT / "ui" / "__init__.py").is_file(), "no ui/ package beside pages/ for the shared UI helpers"
    offenders = sorted(f"{m} imports {t}" for m, targets in _import_graph(ROOT / "ui").items() for t in targets
                       if _inside(t, "pages"))
    assert not offenders, "ui/ must not import the pages:\n" + "\n".join(offenders)


def test_subpackages_say_what_they_own_and_reexport_nothing():
    problems = []
    for folder in sorted(p for p in CORE.rglob("*") if p.is_dir() and any(p.glob("*.py"))):
        init = folder / "__init__.py"
        if not init.is_file():
            problems.append(f"{folder.relative_to(ROOT)} has no __init__.py")
            continue
        tree = ast.parse(init.read_text())
        doc = ast.get_docstring(tree) or ""
        if not re.search(r"\w+(\W+\w+){4,}[.!?]", doc) or "import" not in doc:
            problems.append(f"{init.relative_to(ROOT)}: the docstring says in a sentence what the package owns "
                            f"and what it may import (now {doc.partition(chr(10))[0][:60]!r}...)")
        if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree)):
            problems.append(f"{init.relative_to(ROOT)} imports: import modules by their real path, no re-exports")
    assert not problems, "\n".join(problems)


def test_no_core_module_over_the_line_limit_without_a_reason():
    assert all(reason.strip() for reason in LONG_MODULES.values()), "every long module's entry says why"
    long = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in CORE.rglob("*.py")}
    long = {path: n for path, n in long.items() if n > MAX_LINES and path not in LONG_MODULES}
    assert not long, f"modules over {MAX_LINES} lines (split by concept, or say why in LONG_MODULES): {long}"


def test_old_flat_module_paths_are_gone():
    leftovers = [f"dlguide_core/{old}.py" for old in OLD_MODULES if (CORE / f"{old}.py").is_file()]
    # An old name that is now a package (jobs, training) may still be named: as the package, or with a module of it.
    packages = "|".join(old for old in OLD_MODULES if (CORE / old / "__init__.py").is_file()) or "(?!)"
    flat = "|".join(old for old in OLD_MODULES if not (CORE / old / "__init__.py").is_file())
    named = re.compile(rf"\bdlguide_core\.({flat})\b|\bdlguide_core/({'|'.join(OLD_MODULES)})\.py\b"
                       rf"|\bfrom dlguide_core import ({flat})\b")
    # dlguide_core.<subpackage>.<name> must name a module of it (an old name like inference.backends is gone)
    subpackages = "|".join(p.name for p in CORE.iterdir() if (p / "__init__.py").is_file())
    in_package = re.compile(rf"\bdlguide_core\.({packages}|{subpackages})\.(\w+)")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for rel in tracked.splitlines():
        path = ROOT / rel
        if path.name == "test_architecture.py" or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue  # images, weights
        leftovers += [f"{rel}: {m.group(0)}" for m in named.finditer(text)]
        leftovers += [f"{rel}: {m.group(0)}" for m in in_package.finditer(text)
                      if not _is_module(f"dlguide_core.{m.group(1)}.{m.group(2)}")]
    assert not leftovers, "old module paths (before issue 11) still named:\n" + "\n".join(leftovers)


def test_tests_import_helpers_only_from_tests_support():
    """Test modules share helpers through tests/support/ only, never by importing each other."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if "support" in path.relative_to(ROOT / "tests").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(ROOT)} imports {n}" for n in names
                          if n.startswith("tests.") and not n.startswith("tests.support")]
    assert not offenders, offenders


def test_tests_mirror_the_package():
    """tests/<subpackage>/ for each subpackage of the core (and the UI layers: pages, ui, web, served; docker)."""
    subpackages = {p.name for p in CORE.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert subpackages <= folders, f"no tests/<name>/ for {sorted(subpackages - folders)}"
    assert folders - subpackages <= {"pages", "ui", "web", "served", "support", "docker"}, sorted(folders - subpackages)


def test_the_cli_parses_and_prints_and_runs_no_process_itself():
    """docs/ARCHITECTURE.md: cli/ is argparse only. Claiming, starting and supervising a job's processes (Popen,
    signals) is the jobs layer's (jobs.foreground, issue 23)."""
    offenders = sorted(f"{m} imports {t}" for m, targets in _import_graph(CORE / "cli").items() for t in targets
                       if t in ("subprocess", "signal", "multiprocessing", "threading"))
    assert not offenders, "\n".join(offenders)


def test_the_device_choices_are_spelled_only_where_they_are_declared():
    """("auto", "cpu", "cuda") lives in training/fields.py (DEVICE_CHOICES, with the one device rule); forms and
    flags read it from there (issue 23 found it typed out in 4 places)."""
    declared = CORE / "training" / "fields.py"
    offenders = []
    for path in [*CORE.rglob("*.py"), *UI, *WEB, *PAGES]:
        if path == declared:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List)) and [getattr(e, "value", None) for e in node.elts] == [
                    "auto", "cpu", "cuda"]:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders


# --- Issue 23: each architecture is declared once, in the registry (dlguide_core/vision/architectures.py).
# Everything else asks `architectures.architecture(name)`; a string naming an architecture elsewhere is a branch
# or a table that a new architecture would have to be added to. Scanned: the core, the UI layer and the served
# entry points. Not scanned, on purpose: tests/ and bench/ (they pick the architecture they exercise or measure,
# as a user does on the command line) and the docs (they teach the recipes by name). The CLI's help names the
# weights sources through `architectures.weights_help()`, so it needs no allowance.
ARCH_REGISTRY = CORE / "vision" / "architectures.py"
ARCH_SCANNED = [*CORE.rglob("*.py"), *UI, *WEB, *PAGES, ROOT / "serve.py"]


def _string_literals(tree: ast.AST) -> list[tuple[int, str]]:
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_no_architecture_name_literals_outside_the_registry():
    from dlguide_core.vision.architectures import names

    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names())) + r")\b")
    offenders = [f"{path.relative_to(ROOT)}:{line} {text.strip()[:60]!r}"
                 for path in ARCH_SCANNED if path != ARCH_REGISTRY
                 for line, text in _string_literals(ast.parse(path.read_text())) if pattern.search(text)]
    assert not offenders, "architecture names belong to vision/architectures.py:\n" + "\n".join(offenders)


@pytest.mark.slow
def test_the_type_checker_is_clean():
    """mypy with pyproject.toml's [tool.mypy] (what `make lint` runs): the core, ui/, pages/ and the entry points.
    About 20 s cold on a 2-core machine; its cache (.mypy_cache) makes a rerun take about a second."""
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_make_lint_runs_the_type_checker_after_ruff():
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert lint is not None
    steps = lint.group(1).split("\n")
    assert "ruff check" in steps[0] and "-m mypy" in steps[1], steps


# --- Issue 23: each backend is declared once (dlguide_core/inference/specs.py). Its name is a contract (bench
# --backends, bench rows, DLGUIDE_KIOSK_BACKEND); anywhere else, code names it through names' constants, so a
# new backend is its module plus one entry there. Docs, tests and bench/ scripts are exempt.
BACKEND_NAME_HOME = "dlguide_core/inference/specs.py"
BACKEND_NAME_ALLOWED = {
    # The Python module `migraphx` (ROCm's library), looked up in sys.modules and on disk by its import name:
    # the library's name, which the backend happens to share, not a reference to the backend.
    "dlguide_core/migraphx_lib.py": {"migraphx"},
}


def _string_constants(tree: ast.Module) -> list[ast.Constant]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_backend_names_are_spelled_only_in_the_backend_names_module():
    from dlguide_core.inference import specs

    assert set(specs.NAMES) >= {"torch", "onnxruntime", "migraphx"}
    offenders = []
    for path in [*CORE.rglob("*.py"), *PAGES, *UI, *WEB, ROOT / "serve.py"]:
        rel = str(path.relative_to(ROOT))
        if rel == BACKEND_NAME_HOME:
            continue
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        allowed = BACKEND_NAME_ALLOWED.get(rel, set())
        offenders += [f"{rel}:{n.lineno} {n.value!r}" for n in _string_constants(tree)
                      if n.value in specs.NAMES and n.value not in allowed and id(n) not in skip]
    assert not offenders, ("backend names spelled outside dlguide_core/inference/specs.py (use its constants):\n"
                           + "\n".join(offenders))


def test_the_backend_name_rule_sees_a_literal():
    tree = ast.parse('def f(name):\n    """Docstring naming onnxruntime."""\n    return name == "onnxruntime"\n')
    found = [n.value for n in _string_constants(tree) if id(n) not in _docstrings(tree)]
    assert found == ["onnxruntime"]


# --- Issue 23: one name for the booth. The concept is "booth" in every identifier of the app's code; "kiosk"
# stays only where it is a contract, and those are all strings: the DLGUIDE_KIOSK* variables, the /kiosk URL
# (app.py's url_path="kiosk"), the booth's widget and session keys ("kiosk_..."). `make kiosk` is the Makefile's.
# Docstrings and comments are checked by reading, not here. Not scanned: tests/ and bench/ (their file and test
# names follow the `make kiosk` they exercise).
BOOTH_NAME_SCANNED = [*CORE.rglob("*.py"), *UI, *WEB, *PAGES, ROOT / "serve.py"]


def _identifiers(tree: ast.AST) -> list[tuple[int, str]]:
    """Every name the code declares or uses: functions, classes, arguments, variables, attributes, keywords,
    imported modules and their aliases (a string, a docstring or a comment is no identifier)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((line, node.name))
        elif isinstance(node, ast.Name):
            found.append((line, node.id))
        elif isinstance(node, ast.Attribute):
            found.append((line, node.attr))
        elif isinstance(node, ast.arg):
            found.append((line, node.arg))
        elif isinstance(node, ast.keyword) and node.arg:
            found.append((line, node.arg))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found += [(line, part) for alias in node.names
                      for part in [*alias.name.split("."), alias.asname or ""] if part]
            found += [(line, part) for part in (getattr(node, "module", None) or "").split(".") if part]
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found += [(line, name) for name in node.names]
    return found


def test_the_booth_has_one_name_in_the_code():
    offenders = [str(path.relative_to(ROOT)) for path in BOOTH_NAME_SCANNED if "kiosk" in path.stem.lower()]
    offenders += [f"{path.relative_to(ROOT)}:{line} {name}" for path in BOOTH_NAME_SCANNED
                  for line, name in _identifiers(ast.parse(path.read_text())) if "kiosk" in name.lower()]
    assert not offenders, ('the concept is "booth"; "kiosk" only in strings that are contracts (DLGUIDE_KIOSK*, '
                           "the /kiosk URL, widget and session keys):\n" + "\n".join(offenders))


def test_the_booth_name_rule_sees_identifiers_not_strings():
    tree = ast.parse('import ui.kiosk as k\nfrom ui.booth import hide_in_kiosk\nclass KioskView:\n'
                     '    def show(self, kiosk_mode=1):\n'
                     '        st.session_state.kiosk_job = os.environ["DLGUIDE_KIOSK"]\n'
                     '        st.button("Go", key="kiosk_go")\n')
    assert sorted({name for _, name in _identifiers(tree) if "kiosk" in name.lower()}) == [
        "KioskView", "hide_in_kiosk", "kiosk", "kiosk_job", "kiosk_mode"]


def test_the_booth_page_keeps_its_kiosk_address():
    """The booth's page script is pages/booth.py; its URL stays /kiosk (README, `make kiosk`), wherever app.py
    routes it."""
    pages = [node for node in ast.walk(ast.parse((ROOT / "app.py").read_text()))
             if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Page"
             and node.args and getattr(node.args[0], "value", None) == "pages/booth.py"]
    assert pages, "app.py routes no pages/booth.py"
    for page in pages:
        keywords = {k.arg: k.value for k in page.keywords}
        if getattr(keywords.get("default"), "value", False):  # the booth server's "/": its url_path is no address
            continue
        url = keywords.get("url_path")
        assert isinstance(url, ast.Constant) and url.value == "kiosk", ast.unparse(page)


# --- Issue 33 (N6): a run's name is anyone's text. Streamlit renders Markdown (links, remote images, :red[...]) in
# markdown/write/caption/titles/alerts/toasts, so a name never goes into one: it is shown with st.text, st.code,
# a table cell, a widget label, or escaped HTML (st.html(html.escape(...))). Spotted: `<something job>.name`,
# `run_name`/`display_name`/`display_label(...)`, or a variable called `name`/`run_name` inside such a call's
# arguments, unless ui.literal_text.literal(...) escaped it.
NAME_RULE_EXEMPT = {"pages/devices.py"}  # its `name`s are MIGraphX's own target names (gpu, cpu, ref), not people's
MARKDOWN_CALLS = {"markdown", "write", "caption", "title", "header", "subheader", "info", "success", "warning",
                  "error", "toast"}


NAMING_CALLS = {"run_name", "display_name", "display_label"}


def _unescaped(tree: ast.AST):
    """Every node of `tree` except what sits inside ui.literal_text.literal(...), which escapes Markdown."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "literal":
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _names_in_markdown(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr in MARKDOWN_CALLS):
            continue
        for node in _unescaped(ast.Module(body=[ast.Expr(a) for a in [*call.args, *(k.value for k in call.keywords)]],
                                          type_ignores=[])):
            job_name = (isinstance(node, ast.Attribute) and node.attr == "name"
                        and "job" in ast.unparse(node.value).lower())
            named = isinstance(node, ast.Name) and node.id in ("name", "run_name")
            called = isinstance(node, ast.Call) and getattr(node.func, "id", None) in NAMING_CALLS
            if job_name or named or called:
                found.append((call.lineno, ast.unparse(call)[:80]))
                break
    return found


def test_run_names_are_never_rendered_as_markdown():
    offenders = [f"{path.relative_to(ROOT)}:{line} {text}" for path in [*PAGES, *UI]
                 if str(path.relative_to(ROOT)) not in NAME_RULE_EXEMPT
                 for line, text in _names_in_markdown(ast.parse(path.read_text()))]
    assert not offenders, "a run's name reaches Markdown (show it as text):\n" + "\n".join(offenders)


def test_the_run_name_rule_sees_a_name_in_markdown():
    tree = ast.parse('st.markdown(f"**{job.name}**")\nst.caption(run_name(j))\nst.text(job.name)\n'
                     'st.info(f"{literal(name)} saved")\nst.error(display_label(job))\n'
                     'st.success(f"{name} saved")\nst.html(html.escape(job.name))\n')
    assert [line for line, _ in _names_in_markdown(tree)] == [1, 2, 5, 6]


def test_streamlit_secrets_are_never_committed_nor_baked_into_an_image():
    """Issue 33 (N9): .streamlit/secrets.toml holds the sign-in cookie_secret, which mints sessions."""
    for name in (".gitignore", ".dockerignore"):
        lines = {line.strip() for line in (ROOT / name).read_text().splitlines()}
        assert ".streamlit/secrets.toml" in lines, name
    ignored = subprocess.run(["git", "check-ignore", "-q", ".streamlit/secrets.toml"], cwd=ROOT)
    assert ignored.returncode == 0


# Plotly's trace types that draw with WebGL: each plot holds a WebGL context, browsers keep about 16 per page.
WEBGL_TRACES = {"Scattergl", "Scatterpolargl", "Splom", "Parcoords", "Heatmapgl", "Pointcloud", "Scatter3d",
                "Surface", "Mesh3d", "Cone", "Streamtube", "Volume", "Isosurface"}


def test_charts_draw_with_svg_not_webgl():
    # Issue 31: the Train page drew its curves with go.Scattergl; every redraw of a live page made new WebGL
    # contexts (134 in 90 s) and the browser dropped the oldest, blanking the loss chart. Downsampled SVG instead.
    offenders = []
    for path in [*UI, *PAGES]:
        for node in ast.walk(ast.parse(path.read_text())):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
            if name in WEBGL_TRACES:
                offenders.append(f"{path.name}:{node.lineno} {name}")
            if isinstance(node, ast.Constant) and node.value == "webgl":  # plotly.express render_mode="webgl"
                offenders.append(f"{path.name}:{node.lineno} 'webgl'")
    assert not offenders, f"WebGL charts (a context per redraw; use go.Scatter): {offenders}"
def test_threads_and_waiting_are_decided_only_in_dlguide_core_threads():
    # issue 31: one place per kind of process decides torch's threads, OpenMP's wait policy and ONNX Runtime's
    # spinning (bench/ scripts time variants on purpose and are left out).
    decides = re.compile(r"set_num_threads|set_num_interop_threads|OMP_WAIT_POLICY|allow_spinning")
    sources = [*CORE.rglob("*.py"), *UI, *WEB, *PAGES, ROOT / "serve.py"]
    offenders = [p.relative_to(ROOT) for p in sources
                 if p != CORE / "threads.py" and decides.search(p.read_text())]
    assert not offenders, f"threads and waiting belong to dlguide_core/threads.py: {offenders}"


def test_each_kind_of_process_declares_its_threads_once_at_its_entry():
    declared = {}
    for path in [*CORE.rglob("*.py"), ROOT / "serve.py", ROOT / "app.py", *UI, *WEB, *PAGES]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "declare"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "threads"):
                declared.setdefault(str(path.relative_to(ROOT)), []).append(ast.unparse(node.args[0]))
    assert declared == {"serve.py": ["'server'"], "dlguide_core/cli/main.py": ["process_kind(args)"],
                        "dlguide_core/jobs/runner.py": ["'job'"], "dlguide_core/jobs/worker.py": ["'job'"],
                        "dlguide_core/jobs/executors/job_entry.py": ["'job'"]}
    main = next(n for n in ast.parse((ROOT / "serve.py").read_text()).body
                if isinstance(n, ast.FunctionDef) and n.name == "main")
    source = ast.unparse(main)  # the server declares before anything that may load torch
    assert source.index("threads.declare") < min(source.index(s) for s in ("warm_", "install_middleware", "cli.main"))


def _imports_past_the_door(module: str, door: Path, sources: list[Path]) -> list[str]:
    """Where `sources` import `module` (or a submodule) themselves instead of through `door`."""
    offenders = []
    for path in sources:
        if path == door:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if _inside(n, module)]
    return offenders


def test_torchvision_is_imported_only_through_its_door():
    # dlguide_core/torchvision_lib.py imports torchvision without torch._dynamo (1.5 s of CPU and 150 MB of RSS in
    # every server, CLI call and export); a plain `import torchvision` anywhere else would load it first.
    sources = [*CORE.rglob("*.py"), *UI, *WEB, *PAGES, ROOT / "serve.py", ROOT / "app.py"]
    offenders = _imports_past_the_door("torchvision", CORE / "torchvision_lib.py", sources)
    assert not offenders, "import torchvision through dlguide_core.torchvision_lib:\n" + "\n".join(offenders)


def test_onnxruntime_is_imported_only_through_its_door():
    # dlguide_core/onnxruntime_lib.py turns ONNX Runtime's telemetry off before the library starts (local by
    # default; at exit it waited on DNS past Docker's stop); a plain `import onnxruntime` elsewhere could come first.
    sources = [*CORE.rglob("*.py"), *UI, *WEB, *PAGES, *(ROOT / "bench").glob("*.py"), ROOT / "serve.py"]
    offenders = _imports_past_the_door("onnxruntime", CORE / "onnxruntime_lib.py", sources)
    assert not offenders, "import onnxruntime through dlguide_core.onnxruntime_lib:\n" + "\n".join(offenders)


def test_the_booth_screen_sets_no_text_as_html():
    """Issue 30: the booth's visitor screen (ui/booth_screen.js) draws what visitors and the model give it (labels,
    error lines, a run's name) as text nodes; innerHTML takes only its own icon constants, and no string is ever
    evaluated as code."""
    source = (ROOT / "ui" / "booth_screen.js").read_text()
    assignments = re.findall(r"\.(?:innerHTML|outerHTML)\s*=\s*([^;]+);", source)
    assert assignments == ["SVG[name]"], assignments
    assert not re.search(r"insertAdjacentHTML|document\.write|\beval\(|new Function\(|setTimeout\(\s*['\"`]", source)


def test_the_booth_screen_rule_sees_html_set_from_data():
    source = 'node.innerHTML = data.label;'
    assert re.findall(r"\.(?:innerHTML|outerHTML)\s*=\s*([^;]+);", source) == ["data.label"]


# Issue 45, typed executors: one plug-in style (an ABC generic in its options, a template submit in the base),
# the job's entry on a node names no scheduler, and no untyped options or config crosses a layer.
PRODUCT = [*CORE.rglob("*.py"), *UI, *WEB, *PAGES, ROOT / "serve.py"]
EXECUTORS_DIR = CORE / "jobs" / "executors"


def _untyped_parameters(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every argument or field called one of `names` and annotated `Any`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.arg in names and node.annotation is not None:
            annotation, name = node.annotation, node.arg
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in names:
            annotation, name = node.annotation, node.target.id
        else:
            continue
        if "Any" in ast.unparse(annotation).replace("|", " ").split():
            found.append((node.lineno, name))
    return found


def test_no_options_or_config_is_typed_any_in_product_code():
    offenders = [f"{p.relative_to(ROOT)}:{line} {name}: Any" for p in PRODUCT
                 for line, name in _untyped_parameters(ast.parse(p.read_text()), {"options", "config"})]
    assert not offenders, "type it (an executor's options_cls, training.recipes.RecipeConfig):\n" + "\n".join(offenders)


def test_the_untyped_parameter_rule_sees_any():
    tree = ast.parse("def submit(store, config: Any, options: Any | None = None, other: Any = 1): ...\n"
                     "class R:\n    options: Any = None\n")
    found = sorted(name for _, name in _untyped_parameters(tree, {"options", "config"}))
    assert found == ["config", "options", "options"]


def _classes(path: Path) -> list[ast.ClassDef]:
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]


def test_executors_subclass_the_abc_and_leave_submit_to_its_template():
    import inspect

    from dlguide_core.jobs.executors import registry
    from dlguide_core.jobs.executors.base import Executor

    assert inspect.isabstract(Executor)
    assert {"available", "status", "cancel", "hand_over"} <= Executor.__abstractmethods__
    for spec in registry.SPECS:
        cls = spec.load()
        assert issubclass(cls, Executor) and not inspect.isabstract(cls), spec.name
        assert cls.name == spec.name, f"{spec.entry} is named {cls.name!r}, declared as {spec.name!r}"
        assert "submit" not in vars(cls), f"{spec.entry} re-implements submit: fill the base's hooks instead"
        assert cls.__orig_bases__[0].__args__[0] is cls.options_cls, f"{spec.entry}: Executor[its options_cls]"
    for path in EXECUTORS_DIR.glob("*.py"):  # nothing else in the package claims to be an executor
        for node in _classes(path):
            bases = {ast.unparse(b).split("[")[0] for b in node.bases}
            errors = {"DlguideError", "Exception"} & bases  # UnknownExecutor is an error, not an executor
            if node.name.endswith("Executor") and path.name != "base.py" and not errors:
                assert "Executor" in bases, f"{path.name}: {node.name} must derive base.Executor"


def test_job_entry_reaches_its_executor_through_node_hooks_only():
    # Each scheduler's part in the job's own process is its NodeHooks (claim, judge_stop), found by the executor's
    # name in jobs.executors.node_hooks: not through the registry, whose executors write job_entry's command lines.
    from dlguide_core.jobs.executors import node_hooks, registry
    from dlguide_core.jobs.executors.base import NodeHooks

    imported = _import_graph(CORE)["dlguide_core.jobs.executors.job_entry"]
    assert "dlguide_core.jobs.executors.registry" not in imported
    assert "dlguide_core.jobs.executors.tracking" not in imported
    names = {spec.name for spec in registry.SPECS}
    assert set(node_hooks.HOOKS) <= names, f"hooks for unknown executors: {set(node_hooks.HOOKS) - names}"
    for name in names:
        hooks = node_hooks.for_executor(name)
        assert isinstance(hooks, NodeHooks), name
        assert (type(hooks) is NodeHooks) == (name not in node_hooks.HOOKS), name
    assert type(node_hooks.for_executor("slurm")).__name__ == "SlurmNode"


def test_job_entry_names_no_scheduler():
    tree = ast.parse((EXECUTORS_DIR / "job_entry.py").read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    strings = [(n.lineno, n.value) for n in ast.walk(tree)
               if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]
    words = _identifiers(tree) + strings
    schedulers = re.compile(r"slurm|\bray\b|ray_|scontrol|sbatch|srun", re.IGNORECASE)
    offenders = [f"job_entry.py:{line} {word!r}" for line, word in words if schedulers.search(word)]
    assert not offenders, "job_entry is scheduler-neutral:\n" + "\n".join(offenders)


def _thread_pool_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every function returning a ThreadPoolExecutor and every name or attribute bound to one."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            if "ThreadPoolExecutor" in ast.unparse(node.returns):
                found.append((node.lineno, node.name))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if ast.unparse(node.value.func).endswith("ThreadPoolExecutor"):
                found += [(node.lineno, ast.unparse(t)) for t in node.targets]
    return found


def test_thread_pools_are_not_called_executors():
    # "executor" is where a job runs (jobs.executors, the store's column, --executor); a thread pool is a pool.
    offenders = [f"{p.relative_to(ROOT)}:{line} {name}" for p in PRODUCT
                 for line, name in _thread_pool_names(ast.parse(p.read_text())) if "executor" in name.lower()]
    assert not offenders, "name thread pools for what they are:\n" + "\n".join(offenders)
    sample = "def _executor() -> ThreadPoolExecutor: ...\nself.executor = futures.ThreadPoolExecutor(2)\n"
    assert [name for _, name in _thread_pool_names(ast.parse(sample))] == ["_executor", "self.executor"]


# Issue 45: a stored job's launch fields (nodes, processes per node, device, rendezvous, restarts) are read once,
# by jobs.job.launch_fields (Job.launch): nothing else reads them out of a config again.
LAUNCH_KEYS = ("device", "nnodes", "nproc_per_node", "rdzv_endpoint", "max_restarts")
LAUNCH_READ = re.compile(r"config(?:\.get\(|\[)[\"'](" + "|".join(LAUNCH_KEYS) + r")[\"']")


def test_a_jobs_launch_fields_are_read_only_by_launch_fields():
    home = ROOT / "dlguide_core" / "jobs" / "job.py"
    offenders = [f"{p.relative_to(ROOT)}:{n} {line.strip()}" for p in PRODUCT if p != home
                 for n, line in enumerate(p.read_text().splitlines(), 1) if LAUNCH_READ.search(line)]
    assert not offenders, "read a job's launch fields through Job.launch:\n" + "\n".join(offenders)
    assert LAUNCH_READ.search('int(job.config.get("nnodes", 1))') and not LAUNCH_READ.search('job.config.get("data")')


def test_tests_run_their_event_loops_apart_from_playwrights():
    # Playwright's sync API keeps an event loop running in a pytest worker's main thread for the rest of the session:
    # asyncio.run there raises "cannot be called from a running event loop", but only when a browser test ran first
    # on that worker (CI went red on it twice). tests/support/own_loop.py runs a loop in a thread of its own.
    home = ROOT / "tests" / "support" / "own_loop.py"
    offenders = [f"{p.relative_to(ROOT)}:{node.lineno}" for p in (ROOT / "tests").rglob("*.py") if p != home
                 for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.Call)
                 and ast.unparse(node.func) == "asyncio.run"]
    assert not offenders, "use tests.support.own_loop.run_in_own_loop:\n" + "\n".join(offenders)


def test_the_job_store_composes_its_parts():
    # Issue 45: JobStore -> SchedulerRestarts -> MetricTables -> Database was a chain built by the line limit.
    from dlguide_core.jobs.database import Database
    from dlguide_core.jobs.metric_tables import MetricTables
    from dlguide_core.jobs.requeues import SchedulerRestarts
    from dlguide_core.jobs.store import JobStore

    for cls in (JobStore, SchedulerRestarts, MetricTables, Database):
        assert cls.__bases__ == (object,), f"{cls.__name__} inherits {cls.__bases__}: compose instead"
    parts = {"db": Database, "metrics": MetricTables, "requeues": SchedulerRestarts}
    init = ast.parse((CORE / "jobs" / "store.py").read_text())
    assigned = {ast.unparse(t) for n in ast.walk(init) if isinstance(n, ast.Assign) for t in n.targets}
    assert {f"self.{name}" for name in parts} <= assigned, "JobStore holds its parts"
    for name, part in parts.items():  # every public method of a part is reachable from the store by its name
        missing = [m for m in vars(part) if not m.startswith("_") and not hasattr(JobStore, m)]
        assert not missing or name == "db", f"JobStore does not offer {part.__name__}'s {missing}"


# --- Issue 45: one harness for the benches. A bench script runs as `python -m bench.NAME` from the project root and
# imports the project, bench.common and tests.support (the plumbing), never another bench script nor tests.conftest;
# nothing under bench/ edits sys.path. bench/ is type-checked and byte-compiled with the rest.


def _bench_imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
    return names


def test_bench_scripts_share_plumbing_only_through_common_and_tests_support():
    offenders = []
    for path in sorted((ROOT / "bench").glob("*.py")):
        text = path.read_text()
        if "sys.path" in text.replace("without touching sys.path", ""):
            offenders.append(f"{path.name} edits sys.path")
        for name in _bench_imports(path):
            bench_module = name.startswith(("bench.", "bench_", ".")) and name not in ("bench.common", ".common")
            if bench_module or name == "tests.conftest" or name.startswith("tests.conftest."):
                offenders.append(f"{path.name} imports {name}")
    assert not offenders, offenders


def test_the_bench_import_rule_sees_a_sibling_import(tmp_path: Path):
    script = tmp_path / "bench_x.py"
    script.write_text("from bench_kiosk_load import shot\nimport bench.bench_y\nfrom bench.common import parser\n")
    assert _bench_imports(script) == ["bench_kiosk_load", "bench.bench_y", "bench.common"]


def test_bench_is_type_checked_and_compiled():
    mypy_files = re.search(r"^files = \[(.*)\]", (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert mypy_files is not None and '"bench"' in mypy_files.group(1), "bench/ is not in [tool.mypy] files"
    compileall = next(line for line in (ROOT / "Makefile").read_text().splitlines() if "-m compileall" in line
                      and "purelib" not in line)
    assert " bench " in f"{compileall} ", compileall



# --- Issue 45: docs/ARCHITECTURE.md's tree names every product module once, so it cannot drift again. A tree line
# is an entry (its names, then two or more spaces, then what they are) or, indented to the description column, a
# description going on. A name ending in "/" opens a folder for the lines indented below it.
TREE_DESCRIPTION_COLUMN = 26


def _tree_names(markdown: str) -> list[str]:
    """Every module path the tree's entries name ("dlguide_core/jobs/store.py"), in order, repeats kept."""
    block = markdown.split("## The tree", 1)[1].split("```", 2)[1]
    named: list[str] = []
    folders: list[str] = []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        if not line.strip() or indent >= TREE_DESCRIPTION_COLUMN:
            continue
        level = indent // 2
        folders = folders[:level]
        for token in re.split(r"\s{2,}", line.strip(), maxsplit=1)[0].split():
            if token.endswith("/"):
                folders = [*folders[:level], token.rstrip("/")]
            elif token.endswith(".py"):
                named.append("/".join([*folders[:level], token]))
    return named


def test_the_architecture_doc_names_every_product_module_once():
    named = _tree_names((ROOT / "docs" / "ARCHITECTURE.md").read_text())
    product = [p for p in [*CORE.rglob("*.py"), *UI, *WEB, *PAGES, ROOT / "serve.py"] if p.name != "__init__.py"]
    modules = sorted(str(p.relative_to(ROOT)) for p in product)
    missing = [m for m in modules if m not in named]
    twice = sorted({n for n in named if named.count(n) > 1})
    stale = [n for n in named if not (ROOT / n).is_file()]
    assert not missing, f"docs/ARCHITECTURE.md's tree does not name {missing}"
    assert not twice, f"docs/ARCHITECTURE.md's tree names {twice} more than once"
    assert not stale, f"docs/ARCHITECTURE.md's tree names modules that are gone: {stale}"


def test_the_tree_reader_follows_folders():
    markdown = ("## The tree\n\n```\nserve.py                    the launcher\npkg/                        a package\n"
                "  a.py b.py                 two modules\n                            a.py, said again, is prose\n"
                "  sub/                      a folder\n    c.py                    one more\n  d.py  back up\n```\n")
    assert _tree_names(markdown) == ["serve.py", "pkg/a.py", "pkg/b.py", "pkg/sub/c.py", "pkg/d.py"]
