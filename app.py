"""dlguide: every page is routed from here (served by serve.py, which keeps it the only router)."""

from pathlib import Path

import streamlit as st

from dlguide_core import settings
from ui.cache import device_label

st.set_page_config(page_title="dlguide · Inception v3 on ROCm", layout="wide",
                   page_icon=str(Path(__file__).with_name("assets") / "favicon.png"))  # served by the app: offline

PAGES = [
    st.Page("pages/classify.py", title="Classify", icon=":material/image_search:", url_path="classify", default=True),
    st.Page("pages/devices.py", title="Devices", icon=":material/memory:", url_path="devices"),
    st.Page("pages/train.py", title="Train", icon=":material/model_training:", url_path="train"),
    st.Page("pages/kiosk.py", title="Booth", icon=":material/storefront:", url_path="kiosk"),
    st.Page("pages/compiled.py", title="Compiled inference", icon=":material/bolt:", url_path="compiled"),
]

if settings.kiosk_mode():
    # Booth mode routes the kiosk page alone (an allow-list: pages added later stay hidden too).
    # st.navigation serves only the pages in its list, so /train or ?page=devices land here.
    PAGES = [st.Page("pages/kiosk.py", title="Booth", icon=":material/storefront:", url_path="kiosk", default=True)]
    st.navigation(PAGES, position="hidden").run()
    st.stop()

page = st.navigation(PAGES)
with st.sidebar:
    st.caption(f"Device: **{device_label()}**")
page.run()
