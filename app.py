"""dlguide: every page is routed from here (served by serve.py, which keeps it the only router).

Nothing heavy is imported before the navigation is drawn: serve.py has usually loaded torch already, but a
server started with --no-warm must still show its pages' names at once. With sign-in configured
(ui/auth.py), an anonymous visitor is routed to the sign-in page and the public booth only.
"""

from pathlib import Path

import streamlit as st

from dlguide_core import settings
from ui import auth

st.set_page_config(page_title="dlguide · Inception v3 on ROCm", layout="wide",
                   page_icon=str(Path(__file__).with_name("assets") / "favicon.png"))  # served by the app: offline

# The booth's address stays /kiosk (a documented URL: `make kiosk`, README); its page script is pages/booth.py.
BOOTH = st.Page("pages/booth.py", title="Booth", icon=":material/storefront:", url_path="kiosk")
PAGES = [
    st.Page("pages/classify.py", title="Classify", icon=":material/image_search:", url_path="classify", default=True),
    st.Page("pages/devices.py", title="Devices", icon=":material/memory:", url_path="devices"),
    st.Page("pages/train.py", title="Train", icon=":material/model_training:", url_path="train"),
    BOOTH,
    st.Page("pages/compiled.py", title="Compiled inference", icon=":material/bolt:", url_path="compiled"),
]

# Each branch ends the run normally, never with st.stop(): Streamlit forgets a timer fragment (st.fragment with
# run_every) that a run no longer draws only when the run reaches its end, and a forgotten one's late tick is
# dropped instead of drawn at its old place (which blanked the booth's page after "Start over"; ui/slots.py).
if settings.booth_mode():
    # Booth mode routes the booth page alone (an allow-list: pages added later stay hidden too), and needs
    # no sign-in. st.navigation serves only the pages in its list, so /train or ?page=devices land here.
    # Its own address /kiosk is routed too (issue 33, N12): a default page answers "/" only, so /kiosk is a hidden
    # second entry of the same script (the default's url_path, "booth", names it and is never an address).
    PAGES = [st.Page("pages/booth.py", title="Booth", icon=":material/storefront:", url_path="booth", default=True),
             st.Page("pages/booth.py", title="Booth", icon=":material/storefront:", url_path="kiosk",
                     visibility="hidden")]
    st.navigation(PAGES, position="hidden").run()
elif auth.sign_in_configured() and not auth.signed_in():
    # Anonymous: the sign-in page, and the booth (public, read-only) for whoever knows its address.
    # Each page's own address shows the sign-in page too, not "Page not found" over it (issue 31, item 8); after
    # signing in, the visitor lands on that page (serve.py's web.sign_in_return).
    sign_in = st.Page(auth.sign_in_page, title="Sign in", icon=":material/login:", url_path="signin", default=True)
    asked = [st.Page(auth.sign_in_page, title="Sign in", icon=":material/login:", url_path=page.url_path,
                     visibility="hidden") for page in PAGES if page.url_path and page is not BOOTH]
    st.navigation([sign_in, *asked, BOOTH], position="hidden").run()
else:
    page = st.navigation(PAGES)
    auth.sidebar_identity()
    from ui.cache import device_summary  # torch: after the navigation is on screen

    with st.sidebar:
        st.caption(f"Device: **{device_summary()}**")
    page.run()
