"""Warm workers for local runs: jobs fork from a process that has imported their libraries.

Snakemake runs every job in a Python process of its own. In the default run each training or
fit job spent about 1.6 s of wall time outside its work, 1.0 to 1.1 s of it importing torch,
and each score job about 1 s importing pandas and scikit-learn: together some 1,300
core-seconds, a quarter of the run on two cores; each table and figure job spent 0.7 s importing
pandas, matplotlib and the artifact builders. On a local run the Snakefile starts one worker
per kind of job (:func:`start`, :data:`PRELOADS`), which imports what those jobs import, once.
A job script's first call, :func:`delegate`, hands the job over: the worker forks, and the
child runs the same script with the same ``snakemake`` object, in the job's directory and
environment, writing to the job's own stdout and stderr; its exit status becomes the job's. The
code, the seeds and the files written are those of a job run on its own (tested: every model,
fit and score file and figure byte for byte). A worker of training, fit or score jobs imports
nothing its jobs would not, so the peak memory a job records (its card's, its metrics') is of
the same libraries; it reads 30 to 50 MB lower than in a process of its own, which also counts
the import's transient peak and library pages the job never touches (the tiny test config: 159
against 192 MB for a LOSS score job, 186 against 240 MB for a training job). Score jobs that
run the models import torch themselves: the exact IHA, which does not, would otherwise record
torch's memory too.

Where no worker answers (a cluster job, ``resources: warm_worker: false``, a worker not ready
yet) or the job runs another Python than the workers (``--use-conda``, a container),
:func:`delegate` returns and the job runs in its own process as before. Snakemake's
benchmark file of a delegated job times it right but measures the memory of its own process
only, so score jobs record their peak memory themselves. A child whose job process goes away
(Snakemake cancelled it) stops too.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from miarepro.logs import THREAD_VARIABLES

SOCKET_VARIABLE = "MIAREPRO_WARM_SOCKETS"  # the folder of the workers' sockets
#: what each worker imports before it forks: exactly what its jobs import on their own
PRELOADS = {
    "torch": ("torch", "miarepro.training", "miarepro.pipeline"),  # training and fit jobs
    # score jobs; those that run the models import torch themselves (the exact IHA does not)
    "scores": ("pandas", "pyarrow.parquet", "sklearn.metrics", "miarepro.attacks",
               "miarepro.uncertainty", "miarepro.pipeline"),
    # tables, figures and the index (matplotlib on its headless backend, as figures.py sets it)
    "artifacts": ("pandas", "pyarrow.parquet", "matplotlib.pyplot",
                  "miarepro.artifacts.builders", "miarepro.artifacts.index"),
}
_LENGTH = struct.Struct("!Q")
_PID = struct.Struct("!q")
_STATUS = struct.Struct("!i")
_DECLINED = -1  # the worker's answer to a job of another Python interpreter
_workers: dict[Path, subprocess.Popen] = {}  # by log file


# --- the job's side ---------------------------------------------------------------------------

def delegate(snakemake: Any, kind: str) -> None:
    """Run this job in the warm worker of its ``kind`` (:data:`PRELOADS`) and exit with its
    status; return if there is none."""
    folder = os.environ.get(SOCKET_VARIABLE)  # a worker's child has none: it runs the job
    if not folder:
        return
    path = os.path.join(folder, kind)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError:  # no worker (yet): this process runs the job itself
        connection.close()
        return
    request = pickle.dumps({  # the job's object apart: another Python may not unpickle it
        "python": _python(), "snakemake": pickle.dumps(snakemake),
        "script": sys.modules["__main__"].__file__, "cwd": os.getcwd(), "env": dict(os.environ),
        "path": list(sys.path)})
    socket.send_fds(connection, [_LENGTH.pack(len(request))], [0, 1, 2])
    connection.sendall(request)
    child = _read(connection, _PID)
    if child == _DECLINED:  # another Python (--use-conda, a container): the job runs here
        connection.close()
        return
    if child is not None:  # a signal to this process (Snakemake cancels a job) goes to the job
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, lambda received, _frame: _forward(child, received))
    status = _read(connection, _STATUS)
    if status is None:
        print("the warm worker's child ended without a status (killed?)", file=sys.stderr)
        status = 1
    sys.stdout.flush()
    os._exit(status)


def _python() -> tuple[str, str]:
    """The interpreter and its environment (a virtual environment shares its interpreter)."""
    return os.path.realpath(sys.executable), sys.prefix


def _forward(child: int, received: int) -> None:
    try:
        os.kill(child, received)
    except ProcessLookupError:  # it has just ended: its status is on the way
        pass


def _read(connection: socket.socket, layout: struct.Struct) -> int | None:
    data = _receive(connection, layout.size)
    return None if data is None else layout.unpack(data)[0]


def _receive(connection: socket.socket, size: int) -> bytes | None:
    """Exactly ``size`` bytes, or None if the other side closed first."""
    data = bytearray()
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


# --- the Snakefile's side ---------------------------------------------------------------------

def start(log_folder: str) -> None:
    """Start the workers of this Snakemake process; jobs find them through the environment."""
    folder = tempfile.mkdtemp(prefix="miarepro-warm-")  # a short path: sockets allow 107 bytes
    Path(log_folder).mkdir(parents=True, exist_ok=True)
    for kind in PRELOADS:
        log = Path(log_folder) / f"warm-{kind}.log"
        with open(log, "w") as output:
            _workers[log] = subprocess.Popen(
                [sys.executable, "-m", "miarepro.warm", os.path.join(folder, kind),
                 str(os.getpid())], stdout=output, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
    os.environ[SOCKET_VARIABLE] = folder


def stop() -> None:
    """Stop the workers (after the last job) and wait for them, so that their CPU time and
    their children's count in this process's. A worker that had already failed (an import
    it could not make) is named: its jobs ran correctly, each in a process of its own, but
    without the time it saves, and nothing else would say so."""
    folder = os.environ.pop(SOCKET_VARIABLE, None)
    for log, worker in _workers.items():
        if worker.poll() not in (None, 0):
            print(f"A warm worker failed (exit status {worker.returncode}; see {log}): its "
                  "jobs ran in processes of their own.", file=sys.stderr)
        worker.terminate()
    for worker in _workers.values():
        worker.wait()
    _workers.clear()
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


# --- the worker ---------------------------------------------------------------------------------

def serve(path: str, parent: int) -> None:
    """Import the kind's libraries (the socket's name), then fork a child per job until
    ``parent`` is gone."""
    import importlib

    for variable in THREAD_VARIABLES:  # each job takes one thread unless it sets its own
        os.environ.setdefault(variable, "1")
    os.environ.setdefault("MPLBACKEND", "Agg")  # what a figure job selects before pyplot
    # pyarrow's bundled jemalloc starts a background thread as it loads (Arrow allocates
    # through mimalloc here); without it the worker forks with one thread, as fork() wants
    # (Python 3.12 warns at each fork of a process with several)
    os.environ.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")
    # unpickling a job's ``snakemake`` object imports snakemake.script
    for module in ("numpy", "snakemake.script", *PRELOADS[os.path.basename(path)]):
        importlib.import_module(module)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(1.0)
    print(f"warm worker {os.getpid()} listening on {path}", flush=True)
    while not stopping.is_set() and _alive(parent):
        _reap()
        try:
            connection, _ = listener.accept()
        except (TimeoutError, InterruptedError):
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            listener.close()
            _run_child(connection)  # never returns
        connection.close()
    listener.close()
    while _reap(block=True):  # their CPU time then counts in this process's children
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _reap(block: bool = False) -> bool:
    """Collect finished children; True while some are left (``block``: wait for one)."""
    try:
        while True:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
            if pid == 0 or block:
                return True
    except ChildProcessError:
        return False


def _run_child(connection: socket.socket) -> None:
    status = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        header, fds, _, _ = socket.recv_fds(connection, _LENGTH.size, 3)
        payload = _receive(connection, _LENGTH.unpack(header)[0])
        if payload is None:  # the job's process went away
            os._exit(1)
        request = pickle.loads(payload)
        if request["python"] != _python():
            connection.sendall(_PID.pack(_DECLINED))
            os._exit(0)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        connection.sendall(_PID.pack(os.getpid()))
        threading.Thread(target=_exit_with_client, args=(connection,), daemon=True).start()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ.pop(SOCKET_VARIABLE, None)  # the script's own delegate() then returns
        sys.path[:] = request["path"]
        status = _run_script(request["script"], pickle.loads(request["snakemake"]))
    except BaseException:  # before the job's script ran: on its stderr once it is received
        import traceback

        traceback.print_exc()
    finally:
        import logging

        logging.shutdown()  # flush the job's log file
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            connection.sendall(_STATUS.pack(status))
        finally:
            os._exit(status)


def _run_script(script: str, snakemake: Any) -> int:
    """The job's exit status: 0, a ``sys.exit`` code, or 1 after an exception (logged by the
    script's own excepthook, :func:`miarepro.logs.setup`, as a job of its own would)."""
    import runpy

    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(snakemake.threads)
    try:
        runpy.run_path(script, init_globals={"snakemake": snakemake}, run_name="__main__")
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except BaseException:  # any failure is the job's
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


def _exit_with_client(connection: socket.socket) -> None:
    """The job's process sends nothing after its request: end of stream means it is gone."""
    try:
        connection.recv(1)
    finally:
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
