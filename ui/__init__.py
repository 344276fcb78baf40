"""The Streamlit widgets and page pieces shared by the routed pages of pages/: the cached core objects (models,
backends, the booth's predictor, the one job store), the weights and backend pickers, the prediction display, the
training charts, the booth's screen, and the evaluation, run-comparison and TensorFlow widgets; one module per
concept. It holds what a page draws and nothing the server mounts (ASGI middleware, routes, gates live in web/). It
may import streamlit, plotly, pandas, numpy, PIL, the standard library and dlguide_core (where all logic lives), never
`pages` (pages import it, not the other way round) and never `web`. It lives beside pages/, not in it, because
Streamlit would route every file under pages/ as a page. Import its modules by their real path (`ui.cache`); this
file re-exports nothing, and no module here calls Streamlit while being imported.
"""
