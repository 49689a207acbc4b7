"""Sphinx configuration of the jaxgraphops documentation.

Build (warnings are errors; about a minute on 2 cores):

    pip install ".[flax,equinox]" -r docs/requirements.txt
    sphinx-build -W --keep-going -b html docs docs/_build/html

Why Sphinx with MyST, not MkDocs-Material with mkdocstrings:

- The docstrings are reStructuredText: Google-style sections (``Args:``, ``Returns:``, read by
  napoleon) with reST roles (``:func:`gspmm```, ``:class:`~jaxgraphops.Graph```) and literal blocks.
  autodoc renders them as written and resolves every role to its entry; mkdocstrings reads
  Markdown docstrings and would print the roles verbatim.
- ``-W`` turns every unresolved reference, missing include, bad toctree or malformed docstring
  into an error, so the build is the docs' test; and the API pages are generated from the modules'
  ``__all__`` by a 100-line extension (``_ext/api_pages.py``) that ``tests/test_docs_api.py``
  checks without Sphinx.
- MyST keeps the existing Markdown pages (``semantics.md``, ``distributed.md``, ...) as they are,
  and ``{include}``/``{literalinclude}`` bring in ``BENCHMARKS.md``, ``CONTRIBUTING.md`` and the
  examples from outside ``docs/`` (MkDocs serves only its own folder).
- It is JAX's and Flax's toolchain, so their users know the layout.

Figures: the data-flow SVGs in ``_static/figures`` come from ``_figures_src/make_figures.py``; the
example plots in ``_static/examples`` from the example scripts (each page names the command).
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_ext"))

import jaxgraphops

project = "jaxgraphops"
author = "the jaxgraphops authors"
copyright = "the jaxgraphops authors, Apache-2.0"
release = version = jaxgraphops.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "api_pages",  # _ext/api_pages.py: writes api/*.rst from the modules' __all__
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_figures_src", "_ext"]

# MyST: $...$ math, ::: fences, heading anchors for the existing pages' [text](#anchor) links
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# autodoc: the docstrings are Google style (napoleon) with reST roles
autodoc_member_order = "bysource"
autodoc_typehints = "description"  # signatures stay readable; types join the documented parameters
autodoc_typehints_description_target = "documented_params"
autodoc_preserve_defaults = True  # "nn.initializers.zeros_init()", not "<function zeros>"
autosummary_generate = False  # the tables link to the entries of api/*.rst; no stub pages
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# Every reference must resolve; only the names of other projects (there is no network at build
# time for intersphinx) and the placeholders of type annotations are exempt.
nitpicky = True
nitpick_ignore_regex = [
    ("py:.*", r"(jax|jaxlib|numpy|np|flax|nn|eqx|equinox|optax|scipy|networkx|jraph|torch|collections|typing)(\..*)?"),
    ("py:.*", r"(Array|ArrayLike|Callable|Any|Sequence|NamedTuple|Initializer|PRNGKey|Mesh|Dtype|DTypeLike)"),
    ("py:.*", r"(int|float|bool|str|tuple|list|dict|None|object|type)"),
]

html_theme = "furo"
html_title = f"jaxgraphops {release}"
html_theme_options = {"navigation_with_keys": True}
pygments_style = "friendly"
