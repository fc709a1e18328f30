"""One pending re-planning timer for Snakemake's scheduler, instead of one more per pass.

With ``max-jobs-per-timespan`` set (Snakemake's default is ``100/1s``), every scheduling pass
that finds jobs ready arms a timer that wakes the scheduler for another pass once the
timespan is over, so that jobs the rate limit held back still start. Every pass arms one,
including the passes those timers wake, so each finished job starts a chain of passes that
lasts as long as jobs are waiting: a run that has finished N jobs with jobs still waiting
re-plans N times per timespan (Snakemake 9.27). Each pass stats every input file of the jobs
it weighs, so the scheduler's CPU grows with the square of the run's length: its process took
1,098 of the cold default run's 10,230 CPU-seconds on two cores.

:func:`install` makes a pass arm a timer only where none is pending: the pending one already
wakes the scheduler within a timespan, which is all the rate limit needs; jobs that finish
wake it too, as before. The timer is a daemon thread, so a pending one no longer keeps
Snakemake waiting up to a timespan before it exits. Which jobs run, and their files, do not
change. Measured: on a synthetic workflow of 400 jobs, 406 passes against 1,527; the cold
default run's scheduler took 67 CPU-seconds against 1,098, every score and fit file byte for
byte the same.
"""

from __future__ import annotations

import threading
from typing import Any

#: the attribute of Snakemake's JobScheduler that arms the timer (its spelling)
_ARM = "_schedule_reevalutation"


def install() -> bool:
    """Patch Snakemake's scheduler where it has the method this replaces; True if patched."""
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return False
    if not callable(getattr(JobScheduler, _ARM, None)):
        return False  # another Snakemake: leave it as it is
    setattr(JobScheduler, _ARM, arm_once)
    return True


def arm_once(scheduler: Any, delay: float) -> None:
    """Wake ``scheduler`` for another pass in ``delay`` seconds, unless a wake-up is pending.

    The flag is cleared before the timer wakes the scheduler, so the pass it wakes can arm
    the next one.
    """
    if getattr(scheduler, "_replan_pending", False):
        return
    scheduler._replan_pending = True

    def wake() -> None:
        scheduler._replan_pending = False
        scheduler._open_jobs.release()

    timer = threading.Timer(delay, wake)
    timer.daemon = True
    timer.start()
