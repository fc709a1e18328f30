"""Snakemake's re-planning timers: one pending per scheduler, a daemon, re-armed once it fires."""

import threading
from types import SimpleNamespace

from snakemake.scheduling.job_scheduler import JobScheduler

from miarepro import replanning


def fake_scheduler() -> SimpleNamespace:
    return SimpleNamespace(_open_jobs=threading.Semaphore(0))


def timers_since(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in set(threading.enumerate()) - before if isinstance(t, threading.Timer)]


def test_install_replaces_the_method_snakemakes_scheduler_arms_its_timer_with(monkeypatch):
    monkeypatch.setattr(JobScheduler, replanning._ARM, JobScheduler._schedule_reevalutation)
    assert replanning.install()
    assert JobScheduler._schedule_reevalutation is replanning.arm_once


def test_passes_while_a_wake_up_is_pending_arm_no_other():
    before = set(threading.enumerate())
    scheduler = fake_scheduler()
    for _ in range(50):  # fifty passes before the first timer fires
        replanning.arm_once(scheduler, 600)
    timers = timers_since(before)
    for timer in timers:
        timer.cancel()
    assert len(timers) == 1, timers
    assert scheduler._replan_pending


def test_the_pass_a_timer_wakes_can_arm_the_next_one():
    scheduler = fake_scheduler()
    replanning.arm_once(scheduler, 0.01)
    assert scheduler._open_jobs.acquire(timeout=30)
    assert not scheduler._replan_pending  # cleared before the wake-up
    replanning.arm_once(scheduler, 0.01)
    assert scheduler._open_jobs.acquire(timeout=30)


def test_a_pending_timer_does_not_keep_snakemake_from_exiting():
    before = set(threading.enumerate())
    replanning.arm_once(fake_scheduler(), 600)
    (timer,) = timers_since(before)
    assert timer.daemon
    timer.cancel()
