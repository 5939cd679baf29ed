"""A module's graph as a page a browser renders: the DOT that XLA makes, laid out by Graphviz.

Like XLA's own ``--xla_dump_hlo_as_html`` pages, the page loads Graphviz (built for
WebAssembly) from a CDN when it is opened; offline it shows the DOT source, which
``dot -Tsvg`` renders. The DOT travels as a JSON string in which ``<`` is escaped, so a
module's names can never close the script or inject markup.
"""

from __future__ import annotations

import html as html_escape
import json

GRAPHVIZ = "https://cdn.jsdelivr.net/npm/@hpcc-js/wasm@2.22.4/dist/graphviz.umd.js"

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1em; }}
#graph svg {{ max-width: 100%; height: auto; }}
pre {{ white-space: pre-wrap; font-size: 85%; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p id="status">Rendering with Graphviz (loaded from {cdn})...</p>
<div id="graph"></div>
<details id="source"><summary>DOT source</summary><pre id="dot"></pre></details>
<script>
const dot = {dot};
document.getElementById("dot").textContent = dot;
</script>
<script src="{cdn}"></script>
<script>
(async () => {{
  const status = document.getElementById("status");
  try {{
    const graphviz = await window["@hpcc-js/wasm"].Graphviz.load();
    document.getElementById("graph").innerHTML = graphviz.layout(dot, "svg", "dot");
    status.remove();
  }} catch (e) {{
    status.textContent = "Graphviz could not be loaded here; render the DOT source below " +
      "with: dot -Tsvg module.dot > module.svg";
    document.getElementById("source").open = true;
  }}
}})();
</script>
</body>
</html>
"""


def html(dot: str, *, title: str) -> str:
    """A page that renders ``dot``; ``title`` names the module."""
    safe_dot = json.dumps(dot).replace("<", "\\u003c").replace(">", "\\u003e")
    return _PAGE.format(title=html_escape.escape(title), dot=safe_dot, cdn=GRAPHVIZ)
