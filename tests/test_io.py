"""Atomic, group-readable outputs and readers that name a damaged file and the fix."""

import os

import numpy as np
import pytest
from study_files import partition_study

from miarepro import io
from miarepro.data.download import require_file


def test_outputs_follow_the_umask_not_mkstemps_0600(tmp_path):
    previous = os.umask(0o022)
    try:
        io.write_text(tmp_path / "a.txt", "x")
        assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
        os.umask(0o002)
        io.write_array(tmp_path / "b.npy", np.zeros(3))
        assert (tmp_path / "b.npy").stat().st_mode & 0o777 == 0o664
    finally:
        os.umask(previous)


def test_an_interrupted_write_leaves_nothing_and_orphans_are_removed(tmp_path):
    target = tmp_path / "scores.parquet"
    with pytest.raises(KeyboardInterrupt), io.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    orphan = tmp_path / ".scores.parquet.abc123.parquet"  # what kill -9 mid-write leaves
    orphan.write_text("half")
    io.write_text(target, "whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.parquet"]


@pytest.mark.parametrize(("name", "write", "read"), [
    ("split.npz", lambda p: io.write_arrays(p, a=np.arange(1000)), io.read_arrays),
    ("fit.npz", lambda p: io.write_arrays(p, a=np.arange(1000)), io.LazyArrays),
    ("signals.npy", lambda p: io.write_array(p, np.ones((1, 100, 10))), io.read_array),
    ("scores.parquet", lambda p: io.write_table(
        p, __import__("pandas").DataFrame({"a": range(1000)})), io.read_table),
    ("card.json", lambda p: io.write_json(p, {"a": list(range(100))}), io.read_json),
])
def test_truncated_files_fail_with_their_path_and_the_fix(tmp_path, name, write, read):
    path = tmp_path / name
    write(path)
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with pytest.raises(io.CorruptFile, match=r"with `--forcerun .*` added: it remakes") as error:
        read(path)
    assert str(path) in str(error.value)


def test_a_checkpoint_that_is_not_plain_tensors_is_refused_without_advice_to_unpickle(tmp_path):
    import pickle

    path = tmp_path / "model.pt"
    path.write_bytes(pickle.dumps({"weights": object()}))
    with pytest.raises(io.CorruptFile, match="not a checkpoint of plain tensors") as error:
        io.load_checkpoint(path)
    assert "weights_only" not in str(error.value) and "torch.load" not in str(error.value)
    assert f"--forcerun {path}" in str(error.value)


def test_archives_without_a_checksum_are_verified_against_their_first_use(tmp_path):
    archive = tmp_path / "dataset.tgz"
    archive.write_bytes(b"original")
    require_file(archive)
    assert (tmp_path / "dataset.tgz.sha256").exists()
    require_file(archive)  # unchanged: fine
    archive.write_bytes(b"origin")  # truncated later
    with pytest.raises(ValueError, match="changed since its first use"):
        require_file(archive)


def test_equal_models_give_byte_identical_checkpoints_whatever_the_file_name(tmp_path):
    import torch

    state = torch.nn.Linear(3, 2).state_dict()
    with io.atomic_path(tmp_path / "a.pt") as temporary:
        io.save_checkpoint(temporary, state)
    with io.atomic_path(tmp_path / "b.pt") as temporary:
        io.save_checkpoint(temporary, state)
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    loaded = io.load_checkpoint(tmp_path / "a.pt")
    assert all(torch.equal(loaded[key], state[key]) for key in state)


def _split_and_score_peak(tmp_path, features: int) -> int:
    """Bytes traced at the peak of a split job and a score job on a dataset of ``features``."""
    import tracemalloc

    from miarepro import pipeline

    rng = np.random.default_rng(0)
    n, work = 600, tmp_path / str(features)
    dataset = work / "data.npz"
    io.write_arrays(dataset, X=np.zeros((n, features), np.float32), y=rng.integers(0, 3, n))
    io.write_json(work / "data.json", {"n_classes": 3, "meta": {}})
    io.write_array(work / "logits.npy", rng.normal(size=(1, n, 3)).astype(np.float32))
    tracemalloc.start()
    pipeline.make_split(str(dataset), {"scheme": "partition", "seed": 0, "fractions": {
        "target_train": 0.5, "target_test": 0.5}}, str(work / "split.npz"))
    pipeline.score({"attack": "marginal"}, str(dataset), str(work / "split.npz"),
                   [str(work / "logits.npy")], [], [], str(work / "scores.parquet"),
                   fprs=[0.1])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(io.read_table(work / "scores.parquet")) == n
    return peak


def test_a_score_job_refuses_non_finite_scores(tmp_path):
    """A NaN score would rank above every other in the metrics (sorting puts it last), so an
    attack that returns one fails its job, naming the records, and writes no scores."""
    from miarepro import pipeline

    rng = np.random.default_rng(0)
    n = 100
    io.write_arrays(tmp_path / "data.npz", X=np.zeros((n, 2), np.float32),
                    y=rng.integers(0, 3, n))
    io.write_json(tmp_path / "data.json", {"n_classes": 3, "meta": {}})
    logits = rng.normal(size=(1, n, 3)).astype(np.float32)
    logits[0, 7] = np.nan
    io.write_array(tmp_path / "logits.npy", logits)
    pipeline.make_split(str(tmp_path / "data.npz"), {"scheme": "partition", "seed": 0,
                        "fractions": {"target_train": 0.5, "target_test": 0.5}},
                        str(tmp_path / "split.npz"))
    with pytest.raises(RuntimeError, match=r"'marginal' returned 1 non-finite scores on target "
                                           r"0 \(records \[7\]"):
        pipeline.score({"attack": "marginal"}, str(tmp_path / "data.npz"),
                       str(tmp_path / "split.npz"), [str(tmp_path / "logits.npy")], [], [],
                       str(tmp_path / "scores.parquet"))
    assert not (tmp_path / "scores.parquet").exists()


def test_split_and_score_jobs_read_labels_without_the_features(tmp_path):
    """Their memory does not grow with X: 50,000 features (120 MB of float32 here, 63 GB for
    ImageNet at 64 x 64) peak within 2 MB of 8 features."""
    _split_and_score_peak(tmp_path / "warm", 8)  # the first call imports pandas, pyarrow, ...
    small, large = (_split_and_score_peak(tmp_path, f) for f in (8, 50_000))
    assert large < small + 2 * 2**20, (small, large)


def test_a_fit_is_read_array_by_array_as_an_attack_uses_it(tmp_path, monkeypatch):
    """A score job reads the fit arrays its attack uses, equal to reading the file whole, and
    the time it spent reading them (which an attack's timing leaves out): on a clock one second
    later at each reading, each first read as long as the other, a repeated one nothing, and
    asking whether it holds an array reads none."""
    import tracemalloc

    path = tmp_path / "fit.npz"
    io.write_arrays(path, small=np.arange(3.0), large=np.ones((1000, 1000)))
    clock = iter(range(1000))
    monkeypatch.setattr(io.time, "perf_counter", lambda: float(next(clock)))
    tracemalloc.start()
    fit = io.LazyArrays(path)
    np.testing.assert_array_equal(fit["small"], np.arange(3.0))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**20  # the 8 MB array stays on disk
    assert sorted(fit) == ["large", "small"] and "large" in fit and len(fit) == 2
    once = fit.read_seconds
    np.testing.assert_array_equal(fit["small"], np.arange(3.0))  # kept: not read again
    assert fit.get("absent") is None and fit.read_seconds == once > 0
    np.testing.assert_array_equal(fit["large"], io.read_arrays(path)["large"])
    assert fit.read_seconds == 2 * once


def test_a_score_job_records_the_seconds_of_the_models_and_fit_each_target_read(tmp_path,
                                                                               monkeypatch):
    """Artifacts' compute columns come from the metrics: per target, the training seconds on
    the cards beside the reference signals its attack read (repetition 1's own reference,
    1000) and its fit card's seconds; never another target's."""
    from miarepro import pipeline
    from miarepro.splits import STRIDE

    rng = np.random.default_rng(0)
    n = 40
    dataset, split = partition_study(tmp_path, n, rng)
    models = tmp_path / "models"
    for role, index, seconds in (("target", 0, 1.0), ("target", 1, 1.0),
                                 ("reference", 0, 3.0), ("reference", STRIDE, 5.0)):
        io.write_array(models / role / f"{index}.npy",
                       rng.normal(size=(1, n, 3)).astype(np.float32))
        io.write_json(models / role / f"{index}.json", {"train_seconds": seconds})
    fits = [str(tmp_path / f"fit/{target}.npz") for target in (0, 1)]
    for target, path in enumerate(fits):
        io.write_arrays(path, unused=np.zeros(1))
        io.write_json(path.replace(".npz", ".json"), {"fit_seconds": 10.0 * (target + 1)})
    clock = iter(range(1000))  # each reading of the clock one second later: the same
    monkeypatch.setattr(pipeline.time, "perf_counter", lambda: float(next(clock)))  # per target
    costs = pipeline.score(
        {"attack": "lira", "mode": "offline", "n_reference": 1}, str(dataset), split,
        [str(models / "target" / f"{t}.npy") for t in (0, 1)],
        [str(models / "reference" / f"{i}.npy") for i in (0, STRIDE)], [],
        str(tmp_path / "scores.parquet"), fit_paths=fits)
    pipeline.measure(str(tmp_path / "scores.parquet"), {"fprs": [0.1], "bootstrap": 10},
                     split, str(tmp_path / "metrics.parquet"), costs)
    points = io.read_table(tmp_path / "metrics.parquet").query("replicate < 0")
    assert points["model_seconds"].tolist() == [3.0, 5.0]
    assert points["fit_seconds"].tolist() == [10.0, 20.0]
    first, second = points["score_seconds"]
    assert first == second > 0  # each target's own scoring, timed alike
