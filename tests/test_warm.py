"""The warm workers: a delegated job runs in a forked child, on the job's own stdout and
stderr, with its exit status; without a worker the job runs in its own process."""

import os
import re
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from miarepro import warm

JOB = """\
import os, sys, time
from types import SimpleNamespace
from miarepro import warm

if "snakemake" not in globals():  # the job's own process (the worker's child is given it)
    snakemake = SimpleNamespace(threads=1, out=sys.argv[1], code=int(sys.argv[2]),
                                kind=sys.argv[3], client=os.getpid())
warm.delegate(snakemake, snakemake.kind)
with open(snakemake.out, "w") as record:
    record.write(f"{snakemake.client} {os.getpid()} {os.getcwd()} {'torch' in sys.modules}")
print("written by the job")
if snakemake.code == 7:
    raise RuntimeError("the job failed")
if snakemake.code == 9:
    time.sleep(60)
sys.exit(snakemake.code)
"""


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    folder = tmp_path_factory.mktemp("warm")
    (folder / "job.py").write_text(JOB)
    saved = os.environ.get(warm.SOCKET_VARIABLE)
    warm.start(str(folder))
    deadline = time.monotonic() + 60
    for kind in warm.PRELOADS:
        while "listening" not in (folder / f"warm-{kind}.log").read_text():
            assert time.monotonic() < deadline, f"the {kind} worker did not start"
            time.sleep(0.2)
    yield folder
    warm.stop()
    assert warm.SOCKET_VARIABLE not in os.environ
    if saved is not None:
        os.environ[warm.SOCKET_VARIABLE] = saved


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux's /proc lists threads")
def test_each_worker_forks_with_one_thread(worker):
    """fork() copies only the calling thread: a lock another thread held would stay locked in
    the child. Every worker, its libraries imported, runs one thread (pyarrow's allocator's
    background thread is turned off)."""
    for kind in warm.PRELOADS:
        pid = re.search(r"warm worker (\d+) listening", (worker / f"warm-{kind}.log").read_text())
        assert os.listdir(f"/proc/{pid.group(1)}/task") == [pid.group(1)], kind


def run_job(folder, code, cwd, env=None, kind="scores", python=sys.executable):
    """The job's result and what it recorded: the job process's pid, the pid that ran the
    job, its directory and whether torch was imported there."""
    out = folder / f"record-{code}-{len(list(folder.iterdir()))}"
    result = subprocess.run([python, str(folder / "job.py"), str(out), str(code), kind],
                            capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    fields = out.read_text().split() if out.exists() else [""] * 4
    return result, SimpleNamespace(client=fields[0], job=fields[1], where=fields[2],
                                   torch=fields[3] == "True")


@pytest.mark.parametrize("kind", ["torch", "scores", "artifacts"])
def test_a_delegated_job_runs_in_the_worker_with_the_jobs_streams(worker, tmp_path, kind):
    result, record = run_job(worker, 0, tmp_path, kind=kind)
    assert result.returncode == 0, result.stderr
    assert record.client != record.job  # forked from the worker, not the job's own process
    assert record.where == str(tmp_path)  # in the job's directory
    assert "written by the job" in result.stdout  # on the job's own stdout
    # a worker imports only what its jobs import: a score job's peak memory is its own
    assert record.torch == (kind == "torch")


@pytest.mark.parametrize(("code", "status", "message"), [(3, 3, ""), (7, 1, "the job failed")])
def test_the_jobs_exit_status_and_traceback_reach_snakemake(worker, tmp_path, code, status,
                                                             message):
    result, record = run_job(worker, code, tmp_path)
    assert result.returncode == status
    assert record.client != record.job and message in result.stderr


def test_without_a_worker_the_job_runs_in_its_own_process(worker, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != warm.SOCKET_VARIABLE}
    result, record = run_job(worker, 0, tmp_path, env)
    assert result.returncode == 0 and record.client == record.job
    gone = {**env, warm.SOCKET_VARIABLE: str(tmp_path / "no-such-folder")}
    result, record = run_job(worker, 0, tmp_path, gone)
    assert result.returncode == 0 and record.client == record.job


def test_a_worker_that_cannot_import_is_named_and_its_jobs_run_alone(tmp_path, monkeypatch,
                                                                     capsys):
    """A worker that fails to import its libraries (scikit-learn shadowed by a broken module
    here) leaves its jobs to run in processes of their own, correctly, and :func:`warm.stop`
    names it, since nothing else would tell the run went without it."""
    (tmp_path / "job.py").write_text(JOB)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "sklearn.py").write_text("raise ImportError('not on this machine')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(broken), os.environ.get("PYTHONPATH")])))
    monkeypatch.setattr(warm, "_workers", {})  # apart from the module's workers
    monkeypatch.setenv(warm.SOCKET_VARIABLE, "restored afterwards")
    warm.start(str(tmp_path))
    scores = warm._workers[tmp_path / "warm-scores.log"]
    assert scores.wait(timeout=60) != 0
    result, record = run_job(tmp_path, 0, tmp_path, kind="scores")
    assert result.returncode == 0 and record.client == record.job
    warm.stop()
    named = capsys.readouterr().err
    assert "warm-scores.log" in named and "warm-torch.log" not in named


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs a virtual environment's base")
def test_a_job_of_another_python_runs_in_its_own_process(worker, tmp_path):
    """--use-conda or a container: the job's interpreter or environment is not the worker's."""
    base = os.path.join(sys.base_prefix, "bin", "python3")
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(warm.__file__))}
    result, record = run_job(worker, 0, tmp_path, env, python=base)
    assert result.returncode == 0, result.stderr
    assert record.client == record.job


def test_a_job_whose_process_is_killed_stops(worker, tmp_path):
    out = worker / "record-killed"
    client = subprocess.Popen([sys.executable, str(worker / "job.py"), str(out), "9", "scores"],
                              cwd=tmp_path, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not out.exists():
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.1)
    job = int(out.read_text().split()[1])
    client.send_signal(signal.SIGKILL)  # no forwarding: the child must notice by itself
    client.wait()
    deadline = time.monotonic() + 30
    while _running(job):
        assert time.monotonic() < deadline, "the job outlived its process"
        time.sleep(0.1)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"  # a zombie until the worker reaps it
    except FileNotFoundError:
        return False
