"""Sphinx configuration for sklearn-measattn.

Build with ``make html`` (``make html-noplot`` skips running the gallery).
Everything is local: no intersphinx, no network access.
"""

import os
import sys
import warnings

# The package is normally installed (editable) in the build environment; fall
# back to the source tree so a bare checkout still builds.
sys.path.insert(0, os.path.abspath(".."))

import sklearn_measattn  # noqa: E402

# The gallery examples train tiny models; one intra-op thread is as fast for
# them and avoids oversubscribing shared CI runners (sphinx-gallery runs the
# examples inside this process, so this applies to them).
try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass

# -- Project -----------------------------------------------------------------
project = "sklearn-measattn"
author = "sklearn-measattn developers"
copyright = "2026, sklearn-measattn developers"
release = sklearn_measattn.__version__
version = ".".join(release.split(".")[:2])

# -- Extensions --------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    # Ships MathJax and points sphinx.ext.mathjax at that copy: formulas render
    # without fetching anything from a CDN.
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "assimilation_results.rst",  # included by assimilation.rst
                    "assimilation_reference_results.rst",  # included by assimilation.rst
                    "local_analysis_results.rst",  # included by local_analysis.rst
                    "phase_diagram_results.rst"]  # included by phase_diagram.rst
root_doc = "index"
default_role = "literal"

# -- autodoc / autosummary ---------------------------------------------------
autosummary_generate = True  # stubs go to docs/generated/ (see api.rst)
autosummary_imported_members = False
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # numpydoc docstrings carry the types
add_module_names = False

# -- numpydoc ----------------------------------------------------------------
# Members are listed by our autosummary class template, not by numpydoc
# (numpydoc would also list the many methods inherited from torch.nn.Module).
numpydoc_show_class_members = False
numpydoc_show_inherited_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

# -- sphinx-gallery ----------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "plot_gallery": "True",
    "download_all_examples": False,
    "within_subsection_order": "FileNameSortKey",
    "remove_config_comments": True,
    "show_memory": False,
    "reference_url": {"sklearn_measattn": None},  # link names in code to the API pages
    "doc_module": ("sklearn_measattn",),
    "backreferences_dir": "generated/backreferences",
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "min_reported_time": 1,
    # The execution-time pages load their table scripts from a CDN; the docs stay offline.
    "write_computation_times": False,
}

# Non-interactive figures; an example that calls plt.show() must not block.
os.environ.setdefault("MPLBACKEND", "Agg")
warnings.filterwarnings(
    "ignore", category=UserWarning, message="Matplotlib is currently using agg"
)

# -- HTML --------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"sklearn-measattn {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 5,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
# The top-level pages without sub-pages have nothing to put in the left sidebar
# ("Section Navigation" would stand empty): without it their content column is
# about 900 px wide at a 1280 px window instead of 620, room for the study
# pages' results tables and heatmaps. The top bar keeps the site navigation.
# The kernel study, a user-guide page, gets the same room for its tables.
_WIDE_PAGES = ("reproduction", "phase_diagram", "sample_size", "assimilation", "kernel_study", "guarantees",
               "glossary", "architecture")
html_sidebars = {"index": [], "api": [], **{page: [] for page in _WIDE_PAGES}}
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_show_sourcelink = False
html_copy_source = False

# -- No network ----------------------------------------------------------------
# intersphinx is deliberately not enabled: CI has no network access.
