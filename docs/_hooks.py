"""mkdocs hook: serve the benchmark figures from ``benchmarks/results`` under ``results/``.

The figures live next to the JSON the benchmark scripts write; the pages link them as
``results/<name>.png`` (``results/dwsm/<name>.png``) without a copy in ``docs/``.
"""

from __future__ import annotations

import os

from mkdocs.structure.files import File

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RESULTS = os.path.join(_ROOT, "benchmarks", "results")


def on_files(files, config):
    for dirpath, _, names in os.walk(_RESULTS):
        for name in sorted(names):
            if not name.endswith(".png"):
                continue
            path = os.path.join(dirpath, name)
            uri = "results/" + os.path.relpath(path, _RESULTS).replace(os.sep, "/")
            files.append(File.generated(config, uri, abs_src_path=path))
    return files
