#!/usr/bin/env python3
"""Writes a self-contained HTML page that draws a Strata trace.json.

  python3 tools/trace/embed.py out/trace/trace.json /tmp/trace.html

The page is tools/trace/view.html with the trace embedded (see its header):
Strata's own small viewer, for a quick look and the README's picture.
Perfetto (ui.perfetto.dev) and chrome://tracing open trace.json itself.
"""
import json
import os
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: embed.py TRACE_JSON OUT_HTML")
    with open(sys.argv[1]) as f:
        trace = json.load(f)  # Fails on a file that is not JSON.
    text = json.dumps(trace).replace("</", "<\\/")
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "view.html")) as f:
        page = f.read()
    marker = "/*TRACE_JSON*/"
    if page.count(marker) != 1:
        sys.exit("embed.py: view.html must hold the marker once")
    with open(sys.argv[2], "w") as f:
        f.write(page.replace(marker, text))


if __name__ == "__main__":
    main()
