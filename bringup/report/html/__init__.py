"""The HTML report of a run (bring-up and tuning): one self-contained `report.html`.

`write_html(run_dir, result, tunes)` writes it; `render_html` returns the text; `load_tunes`
reads the tuning sessions saved under the run. See docs/report.md, "The HTML report".
"""

from bringup.report.html.page import REPORT_NAME, load_tunes, render_html, write_html

__all__ = ["REPORT_NAME", "load_tunes", "render_html", "write_html"]
