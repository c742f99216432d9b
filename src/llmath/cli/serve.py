"""``llmath serve``: the local web page on 127.0.0.1."""

from __future__ import annotations

from typing import Annotated

import typer

from llmath import output as out
from llmath.cli.app import app
from llmath.cli.options import ints
from llmath.errors import WorkloadError


@app.command()
def serve(
    port: Annotated[
        int, typer.Option("--port", help="Port on 127.0.0.1 (0: any free port).", callback=ints(0, 65535))
    ] = 8765,
):
    """The local web page: pick a model, an accelerator and a workload; see the report. Loopback only.

    Example: llmath serve --port 8765   (then open http://127.0.0.1:8765/)
    """
    from llmath.web import make_server

    try:
        server = make_server(port)
    except OSError as e:
        raise WorkloadError(f"--port {port}: cannot listen on 127.0.0.1 ({e.strerror}); pick another port") from None
    out.note(f"llmath: serving on http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
