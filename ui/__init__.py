"""The Streamlit UI shared by the routed pages of pages/: the cached core objects (models, backends, the booth's
runner, the one job store), the weights and backend pickers, the prediction display, the training charts, the
booth-mode guard, and the evaluation, run-comparison and TensorFlow widgets; one module per concept. It is Streamlit
glue only: it may import streamlit, plotly, pandas, numpy, PIL, the standard library and dlguide_core (where all
logic lives), never `pages` (pages import it, not the other way round). It lives beside pages/, not in it, because
Streamlit would route every file under pages/ as a page. Import its modules by their real path (`ui.cache`); this
file re-exports nothing, and no module here calls Streamlit while being imported.
"""
