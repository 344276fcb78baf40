"""dlguide core: the ROCm Deep Learning Guide's Inception v3 case study as a library.

This package never imports streamlit; the pages and the CLI are its clients.
"""

__version__ = "0.1.0"
