"""dlguide: `streamlit run app.py` routes every page from here."""

import streamlit as st

from dlguide_core import settings
from pages.common import device_label

st.set_page_config(page_title="dlguide · Inception v3 on ROCm", page_icon="🧠", layout="wide")

PAGES = [
    st.Page("pages/classify.py", title="Classify", icon="🖼️", url_path="classify", default=True),
    st.Page("pages/devices.py", title="Devices", icon="🖥️", url_path="devices"),
]
KIOSK_HIDDEN = {"devices", "train"}

if settings.kiosk_mode():
    PAGES = [p for p in PAGES if p.url_path not in KIOSK_HIDDEN]

page = st.navigation(PAGES)
with st.sidebar:
    st.caption(f"Device: **{device_label()}**")
page.run()
