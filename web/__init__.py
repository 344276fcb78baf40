"""What serve.py mounts in the Streamlit server: ASGI middleware, routes and hooks that run in the server's event
loop, its timers and the booth route's request threads, never in a script run. One module per concern:

- `stack`: the middleware stack's assembly (`install_middleware`) and the session bounds (`bound_sessions`);
- `token_gate`: the full app's token; `sign_in_return`: back to the page asked for after signing in;
- `upload_caps`: uploads capped per session and server; `control_messages`: what a browser may ask;
- `static_gzip`: Streamlit's scripts sent compressed; `booth_api`: the booth's HTTP route.

Layer rule (tests/test_architecture.py): `pages/` and `ui/` never import `web`; `web` never imports `pages` and never
draws (it may read `ui.cache`'s shared resources and `ui.auth`'s sign-in check, which draw nothing). This file
re-exports nothing, and nothing here has side effects at import time.
"""
