"""Booth mode in the UI: the guard every other page calls first, and freeing a visitor's uploads.
The booth's model, runner and attract view are cached in ui.cache (serve.py warms them)."""

from __future__ import annotations

import streamlit as st


def hide_in_kiosk() -> None:
    """Defence in depth for booth mode: a non-booth page reached by any route renders nothing."""
    from dlguide_core import settings

    if settings.kiosk_mode():
        st.info("This page is not available in booth mode.")
        st.stop()


def forget_uploaded_files(files: list) -> None:
    """Free a visitor's uploaded/captured files from Streamlit's in-memory store now, not at session end."""
    ids = [f.file_id for f in files if f is not None and getattr(f, "file_id", None)]
    if not ids:
        return
    from streamlit.runtime import get_instance
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    try:
        manager = get_instance().uploaded_file_mgr
    except RuntimeError:  # no runtime (AppTest): nothing is held beyond the session state just cleared
        return
    for file_id in ids:
        # The runtime's MemoryUploadedFileManager has remove_file; the protocol it is typed as lacks it.
        manager.remove_file(ctx.session_id, file_id)  # type: ignore[attr-defined,union-attr]
