"""A local S3-compatible server for the tests: moto's, in a child process (off the test
process's interpreter, where the JVM's py4j threads run) on 127.0.0.1 and a free port.

Its requests are served one at a time. moto checks a conditional write's precondition
(`If-None-Match: *`, `If-Match`) and then writes, with nothing between them on its
threaded server: two racing creates of one key could both succeed, which S3 itself never
allows. One at a time, the check and the write are one step, as on S3.

`python tests/support/s3server.py` serves until stopped; the first line it prints is its port.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

START_SECONDS = 60
# A connection that sends nothing for this long is closed: a request stalled inside the
# gate (its body never sent in full) would otherwise hold every other client back.
IDLE_SECONDS = 30


def serve() -> None:
    """Serve S3 on 127.0.0.1 and a free port (printed first) until killed."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    app, gate = DomainDispatcherApplication(create_backend_app), threading.Lock()

    class Handler(MotoRequestHandler):
        timeout = IDLE_SECONDS

    def one_at_a_time(environ, start_response):
        with gate:  # the whole request, its response's body included
            return list(app(environ, start_response))

    server = make_server("127.0.0.1", 0, one_at_a_time, threaded=True, request_handler=Handler)
    print(server.server_address[1], flush=True)
    os.dup2(2, 1)  # the parent reads the port only: anything else goes to the log
    server.serve_forever()


class S3Server:
    """The server in a child process; `endpoint` once started. Its log is `log` (moto's
    request lines, and why it failed if it does)."""

    def __init__(self, log: Path):
        self.log = log
        self.process: subprocess.Popen | None = None
        self.endpoint: str | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE, stderr=log,
                                            stdin=subprocess.DEVNULL, text=True)
        port: list[str] = []
        reader = threading.Thread(target=lambda: port.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_SECONDS)
        started = bool(port) and port[0].strip().isdigit()
        if not started:
            self.stop()  # the reader then reads the end of the pipe
            reader.join()
        self.process.stdout.close()
        if not started:
            raise RuntimeError(f"the S3 server did not start: {self.log.read_text()[-2000:]}")
        self.endpoint = f"http://127.0.0.1:{int(port[0])}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


if __name__ == "__main__":
    serve()
