import dataclasses
import hashlib
import io
import json
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest

from miarepro.data import (
    SOURCES,
    Dataset,
    DatasetUnavailable,
    check_spec,
    fetch,
    load_dataset,
    require_file,
    subsample,
    tabular_archives,
    with_ood,
)
from miarepro.data.download import NotTheFile

EMBEDDED = {
    # source: (input_shape, n_classes, task, is_image)
    "digits": ((1, 8, 8), 10, "classification", True),
    "breast_cancer": ((30,), 2, "classification", False),
    "mnist_subset": ((1, 28, 28), 10, "classification", True),
    "sm_synthetic": ((75,), 10, "classification", False),
    "purchase_like": ((600,), 100, "classification", False),
    "toy_sin": ((1,), 0, "regression", False),
}
SMALL = {"purchase_like": {"n_samples": 1000}}
GENERATED = {"sm_synthetic": {}, "purchase_like": {"n_samples": 300}, "toy_sin": {}}


@pytest.fixture(scope="module")
def loaded():
    """Every embedded source loaded once (mnist_subset parses a CSV: load it only once)."""
    return {source: load_dataset({"source": source, **SMALL.get(source, {})})
            for source in EMBEDDED}


@pytest.mark.parametrize("source", sorted(EMBEDDED))
def test_embedded_source_shapes_dtypes_and_classes(loaded, source):
    input_shape, n_classes, task, is_image = EMBEDDED[source]
    dataset = loaded[source]
    assert dataset.input_shape == input_shape and dataset.X.shape[1:] == input_shape
    assert dataset.X.dtype == np.float32 and len(dataset.X) == len(dataset.y) > 0
    assert (dataset.n_classes, dataset.task, dataset.name) == (n_classes, task, source)
    if task == "classification":
        assert dataset.y.dtype == np.int64
        assert set(np.unique(dataset.y)) == set(range(n_classes))
    else:
        assert dataset.y.dtype == np.float32
    if is_image:
        assert dataset.X.min() == 0.0 and dataset.X.max() == 1.0
    assert dataset.meta["source"] == source and "license" in dataset.meta
    json.dumps(dataset.meta)  # the workflow stores meta as JSON


def test_breast_cancer_is_standardised(loaded):
    X = loaded["breast_cancer"].X
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(X.std(axis=0), 1.0, atol=1e-4)


@pytest.mark.parametrize("source", ["digits", "breast_cancer"])
def test_embedded_sources_are_deterministic(source):
    first, second = (load_dataset({"source": source}) for _ in range(2))
    np.testing.assert_array_equal(first.X, second.X)
    np.testing.assert_array_equal(first.y, second.y)


@pytest.mark.parametrize("source", sorted(GENERATED))
def test_generators_depend_on_the_seed_only(source):
    spec = {"source": source, **GENERATED[source]}
    first, again = (load_dataset({**spec, "seed": 3}) for _ in range(2))
    other = load_dataset({**spec, "seed": 4})
    np.testing.assert_array_equal(first.X, again.X)
    np.testing.assert_array_equal(first.y, again.y)
    assert not np.array_equal(first.X, other.X)


def test_sm_synthetic_balanced_with_parameters_in_meta():
    dataset = load_dataset({"source": "sm_synthetic", "n_samples": 1600, "seed": 1})
    assert np.bincount(dataset.y).tolist() == [160] * 10
    means, variances = np.array(dataset.meta["means"]), np.array(dataset.meta["variances"])
    assert means.shape == (10, 75) and variances.shape == (75,)
    assert means.min() >= 0 and means.max() <= 1
    assert variances.min() >= 0.5 and variances.max() <= 1.5
    # the records really come from those parameters
    empirical = np.stack([dataset.X[dataset.y == k].mean(axis=0) for k in range(10)])
    assert np.abs(empirical - means).mean() < 0.1
    pooled = dataset.X - means[dataset.y]
    assert np.corrcoef(pooled.var(axis=0), variances)[0, 1] > 0.8
    with pytest.raises(ValueError, match="multiple of n_classes"):
        load_dataset({"source": "sm_synthetic", "n_samples": 405})


def test_purchase_like_is_binary_learnable_and_labelled_by_kmeans():
    from sklearn.naive_bayes import BernoulliNB

    dataset = load_dataset({"source": "purchase_like", "n_samples": 2000, "seed": 0})
    assert set(np.unique(dataset.X)) == {0.0, 1.0}
    assert 0.02 < dataset.X.mean() < 0.2  # sparse, like purchase histories
    model = BernoulliNB().fit(dataset.X[:1000], dataset.y[:1000])
    assert model.score(dataset.X[1000:], dataset.y[1000:]) > 10 / dataset.n_classes
    # Labels are a k-means fixed point, as in the real set: every record is closest to the
    # mean of its own class (a Voronoi cell), so the label is a function of the record.
    present = np.unique(dataset.y)
    centres = np.stack([dataset.X[dataset.y == k].mean(axis=0) for k in present])
    distances = ((dataset.X[:, None, :] - centres[None]) ** 2).sum(axis=-1)
    assert np.array_equal(present[distances.argmin(axis=1)], dataset.y)
    assert dataset.meta["kmeans_iterations"] < 100
    assert sum(dataset.meta["class_sizes"]) == 2000


def test_purchase_like_taste_weight_sets_separability():
    """More weight on the profiles' own taste: clusters that a simple model separates better."""
    from sklearn.naive_bayes import BernoulliNB

    accuracy = {}
    for weight in (0.3, 0.9):
        data = load_dataset({"source": "purchase_like", "n_samples": 3000,
                             "taste_weight": weight, "seed": 0})
        model = BernoulliNB().fit(data.X[:2000], data.y[:2000])
        accuracy[weight] = model.score(data.X[2000:], data.y[2000:])
    assert accuracy[0.9] > accuracy[0.3] + 0.1
    with pytest.raises(ValueError, match="taste_weight"):
        load_dataset({"source": "purchase_like", "taste_weight": 1.5})


def test_toy_sin_follows_the_recipe(loaded):
    dataset = loaded["toy_sin"]
    x, y = dataset.X[:, 0], dataset.y
    assert len(dataset) == 500
    assert np.abs(y - np.sin(1.2 * x)).max() < 0.06  # noise sd 0.01
    assert np.mean(np.abs(x) < 1) < 0.05  # two modes at ±3, empty middle
    assert 0.4 < np.mean(x > 0) < 0.6


def test_digits_in_mnist_layout_fill_mnist_s_centre_box(loaded):
    framed = load_dataset({"source": "digits", "layout": "mnist"})
    assert framed.X.shape == (1797, 1, 28, 28) and framed.X.dtype == np.float32
    assert framed.X[:, :, :4].max() == 0 and framed.X[:, :, :, -4:].max() == 0
    np.testing.assert_array_equal(framed.y, loaded["digits"].y)
    # each digit keeps its ink: mean intensity of the 20x20 box tracks the 8x8 original
    box = framed.X[:, 0, 4:24, 4:24].mean(axis=(1, 2))
    assert np.corrcoef(box, loaded["digits"].X.mean(axis=(1, 2, 3)))[0, 1] > 0.95


def test_ood_records_come_after_the_dataset(loaded):
    both = load_dataset({"source": "mnist_subset", "ood": {"source": "digits",
                                                           "layout": "mnist"}})
    assert len(both) == 5000 + 1797 and both.meta["ood_start"] == 5000
    np.testing.assert_array_equal(both.X[:5000], loaded["mnist_subset"].X)
    assert both.meta["ood"]["layout"] == "mnist"
    with pytest.raises(ValueError, match="does not match"):
        with_ood(loaded["mnist_subset"], loaded["digits"])
    with pytest.raises(ValueError, match=r"ood: .*did you mean 'layout'"):
        check_spec({"source": "mnist_subset", "ood": {"source": "digits", "layot": "x"}})
    with pytest.raises(ValueError, match="without an ood of its own"):
        check_spec({"source": "digits", "ood": {"source": "digits", "ood": {}}})


def test_rotated_copies_follow_the_dataset_in_order(loaded):
    from miarepro.data import with_rotated_copies

    digits = loaded["digits"]
    both = with_rotated_copies(digits, 15)
    n = len(digits)
    assert len(both) == 2 * n and both.meta["ood_start"] == n and both.meta["ood_aligned"]
    np.testing.assert_array_equal(both.y[n:], digits.y)
    np.testing.assert_array_equal(both.X[:n], digits.X)
    copies, originals = both.X[n:], digits.X
    assert not np.allclose(copies, originals) and 0 <= copies.min() and copies.max() <= 1
    # a mild shift: each copy still resembles its own original more than another image
    def similarity(a, b):
        return np.mean([np.corrcoef(x.ravel(), z.ravel())[0, 1]
                        for x, z in zip(a, b, strict=True)])

    assert similarity(copies[:50], originals[:50]) > similarity(copies[:50],
                                                                originals[1:51]) + 0.2
    with pytest.raises(ValueError, match="needs images"):
        with_rotated_copies(loaded["breast_cancer"], 15)
    with pytest.raises(ValueError, match="either ood"):
        check_spec({"source": "digits", "ood_rotation": 10, "ood": {"source": "digits"}})
    with pytest.raises(ValueError, match="ood_rotation"):
        check_spec({"source": "digits", "ood_rotation": 0})


def test_cinic10_reads_class_folders_and_leaves_out_cifar_images(tmp_path):
    from PIL import Image

    from miarepro.data.cinic import CLASSES

    with pytest.raises(DatasetUnavailable, match=r"CINIC-10\.tar\.gz"):
        load_dataset({"source": "cinic10"}, root=tmp_path)
    rng = np.random.default_rng(0)
    for label in (2, 9):  # bird, truck
        folder = tmp_path / "cinic10" / "test" / CLASSES[label]
        folder.mkdir(parents=True)
        for stem in (f"n0{label}_1", f"n0{label}_2", f"cifar10-test-{label}-7"):
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
                folder / f"{stem}.png")
    imagenet = load_dataset({"source": "cinic10"}, root=tmp_path)
    assert imagenet.X.shape == (4, 3, 32, 32) and list(imagenet.y) == [2, 2, 9, 9]
    assert 0.0 <= imagenet.X.min() and imagenet.X.max() <= 1.0
    assert len(load_dataset({"source": "cinic10", "imagenet_only": False},
                            root=tmp_path)) == 6


def test_imagenet_reads_wnid_folders_centre_cropped_to_the_resolution(tmp_path):
    from PIL import Image

    with pytest.raises(DatasetUnavailable, match=r"ILSVRC2012_img_train\.tar and "
                                                 r"ILSVRC2012_devkit_t12\.tar\.gz"):
        load_dataset({"source": "imagenet"}, root=tmp_path)
    # three classes, three JPEGs each: landscape images, blue in the middle square and red in
    # the margins a centre crop removes; portrait images green
    for wnid in ("n01440764", "n01443537", "n01484850"):
        folder = tmp_path / "imagenet" / "train" / wnid
        folder.mkdir(parents=True)
        for k in range(3):
            image = np.zeros((40, 80, 3), dtype=np.uint8)
            image[:, :, 0] = 255
            image[:, 20:60] = (0, 0, 255)
            if k == 2:
                image = np.full((60, 30, 3), (0, 255, 0), dtype=np.uint8)
            Image.fromarray(image).save(folder / f"{wnid}_{k}.JPEG", quality=95)
    (tmp_path / "imagenet" / "train" / "n01440764" / "notes.txt").write_text("not an image")
    data = load_dataset({"source": "imagenet", "resolution": 8}, root=tmp_path)
    assert data.X.shape == (9, 3, 8, 8) and data.n_classes == 3
    assert list(data.y) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    blue, green = data.X[0], data.X[2]
    assert blue[2].min() > 0.85 and blue[0].max() < 0.15  # no red margin left
    assert green[1].min() > 0.85 and green[[0, 2]].max() < 0.15
    assert data.meta["wnids"] == ["n01440764", "n01443537", "n01484850"]
    subset = load_dataset({"source": "imagenet", "resolution": 8, "classes": 2,
                           "per_class": 2}, root=tmp_path)
    assert list(subset.y) == [0, 0, 1, 1] and subset.n_classes == 2
    np.testing.assert_array_equal(subset.X[:2], data.X[:2])
    with pytest.raises(ValueError, match="classes: 1001 is outside"):
        check_spec({"source": "imagenet", "classes": 1001})


def test_imagenet_archives_are_verified_and_extracted_by_torchvision(tmp_path, monkeypatch):
    """With the archives and no folders, torchvision's ImageNet (MD5 check, extraction) runs."""
    from miarepro.compat import ensure_torchvision
    from miarepro.data import imagenet

    ensure_torchvision()
    import torchvision.datasets

    folder = tmp_path / "imagenet"
    folder.mkdir()
    for name in (imagenet.ARCHIVES["val"], imagenet.DEVKIT):
        (folder / name).write_bytes(b"archive")
    calls = []

    def extract(root, split):
        calls.append((root, split))
        (Path(root) / split / "n01440764").mkdir(parents=True)
        from PIL import Image
        Image.new("RGB", (20, 20)).save(Path(root) / split / "n01440764" / "a.JPEG")

    monkeypatch.setattr(torchvision.datasets, "ImageNet", extract)
    data = load_dataset({"source": "imagenet", "part": "val", "resolution": 8}, root=tmp_path)
    assert calls == [(str(folder / ".extracting"), "val")] and data.X.shape == (1, 3, 8, 8)
    assert sorted(p.name for p in folder.iterdir()) == sorted(  # the archives kept, no scratch
        ["val", imagenet.ARCHIVES["val"], imagenet.DEVKIT])


def test_an_interrupted_extraction_leaves_nothing_that_looks_complete(tmp_path):
    """CINIC-10's archive extracted in a job killed mid-way leaves no part folder; the next
    job clears the scratch folder and extracts again, and the images land only when done."""
    import io
    import tarfile

    from PIL import Image

    from miarepro.data.cinic import CLASSES

    folder = tmp_path / "cinic10"
    folder.mkdir()
    with tarfile.open(folder / "CINIC-10.tar.gz", "w:gz") as tar:
        for k in range(3):
            buffer = io.BytesIO()
            Image.new("RGB", (32, 32)).save(buffer, format="PNG")
            info = tarfile.TarInfo(f"test/{CLASSES[0]}/n0_{k}.png")
            info.size = buffer.tell()
            buffer.seek(0)
            tar.addfile(info, buffer)
    real_extractall = tarfile.TarFile.extractall

    def killed(self, path, *args, **kwargs):
        (Path(path) / "test" / CLASSES[0]).mkdir(parents=True)  # a first image, then killed
        raise KeyboardInterrupt

    tarfile.TarFile.extractall = killed
    try:
        with pytest.raises(KeyboardInterrupt):
            load_dataset({"source": "cinic10"}, root=tmp_path)
    finally:
        tarfile.TarFile.extractall = real_extractall
    def entries():  # beside the archive and the checksum it is trusted by on first use
        return sorted(p.name for p in folder.iterdir() if not p.name.startswith("CINIC-10."))

    assert entries() == []
    (folder / ".extracting" / "test").mkdir(parents=True)  # a scratch folder a kill -9 left
    assert len(load_dataset({"source": "cinic10"}, root=tmp_path)) == 3
    assert entries() == ["test"]


def test_relabel_odd_even(loaded):
    dataset = load_dataset({"source": "digits", "relabel": "odd_even"})
    np.testing.assert_array_equal(dataset.y, loaded["digits"].y % 2)
    assert dataset.n_classes == 2 and dataset.meta["relabel"] == "odd_even"
    with pytest.raises(ValueError, match="classification"):
        load_dataset({"source": "toy_sin", "relabel": "odd_even"})
    with pytest.raises(ValueError, match="unknown relabel"):
        load_dataset({"source": "digits", "relabel": "mod3"})


def test_subsample_is_seeded_and_ordered(loaded):
    full = loaded["digits"]
    part = load_dataset({"source": "digits", "subsample": 100, "subsample_seed": 5})
    again = load_dataset({"source": "digits", "subsample": 100, "subsample_seed": 5})
    other = load_dataset({"source": "digits", "subsample": 100, "subsample_seed": 6})
    assert len(part) == 100 and part.meta["subsample"] == {"size": 100, "seed": 5, "of": 1797}
    np.testing.assert_array_equal(part.X, again.X)
    assert not np.array_equal(part.X, other.X)
    rows = {row.tobytes(): label for row, label in zip(full.X, full.y, strict=True)}
    assert all(rows[row.tobytes()] == label for row, label in zip(part.X, part.y, strict=True))
    with pytest.raises(ValueError, match="subsample"):
        load_dataset({"source": "digits", "subsample": 5000})


def test_subsample_moves_the_official_test_boundary():
    dataset = Dataset(X=np.zeros((10, 2), np.float32), y=np.arange(10), n_classes=10,
                      input_shape=(2,), name="toy", meta={"official_test_start": 6})
    part = subsample(dataset, 5, seed=0)
    assert part.meta["official_test_start"] == int(np.sum(part.y < 6))


def test_unknown_source_and_parameter_are_named():
    with pytest.raises(ValueError, match="'nope'") as error:
        load_dataset({"source": "nope"})
    assert "purchase_like" in str(error.value) and "cifar10" in str(error.value)
    with pytest.raises(ValueError, match="'n_sample'"):
        load_dataset({"source": "purchase_like", "n_sample": 10})
    with pytest.raises(ValueError, match="'root'"):
        load_dataset({"source": "digits", "root": "elsewhere"})
    with pytest.raises(ValueError, match="source"):
        load_dataset({"n_samples": 10})


def test_check_spec_validates_without_loading():
    check_spec({"source": "cifar10", "download": True, "subsample": 10})  # nothing on disk
    with pytest.raises(ValueError, match="'downlaod'"):
        check_spec({"source": "cifar10", "downlaod": True})
    with pytest.raises(ValueError, match="unknown relabel"):
        check_spec({"source": "mnist", "relabel": "odd"})


def test_every_source_is_callable_with_root_first():
    import inspect

    for source, loader in SOURCES.items():
        assert next(iter(inspect.signature(loader).parameters)) == "root", source


def test_dataset_rejects_wrong_dtypes():
    with pytest.raises(TypeError, match="float32"):
        Dataset(X=np.zeros((2, 1)), y=np.zeros(2, np.int64), n_classes=2, input_shape=(1,),
                name="bad")
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        Dataset(X=np.zeros((2, 1), np.float32), y=np.array([0, 2]), n_classes=2,
                input_shape=(1,), name="bad")


# --- downloads and missing files ---------------------------------------------------------

def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_fetch_verifies_the_checksum(tmp_path):
    source = tmp_path / "remote" / "file.bin"
    source.parent.mkdir()
    source.write_bytes(b"membership" * 1000)
    url = source.as_uri()
    good = tmp_path / "ok" / "file.bin"
    assert fetch(url, good, _sha256(source.read_bytes())) == good
    assert good.read_bytes() == source.read_bytes()
    assert sorted(p.name for p in good.parent.iterdir()) == ["file.bin"]

    bad = tmp_path / "bad" / "file.bin"
    with pytest.raises(ValueError, match="checksum mismatch") as error:
        fetch(url, bad, "0" * 64)
    assert str(bad) in str(error.value) and "0" * 64 in str(error.value)
    assert _sha256(source.read_bytes()) in str(error.value)
    assert list(bad.parent.iterdir()) == []  # neither the file nor a partial download


def test_fetch_without_a_pinned_checksum_still_downloads(tmp_path):
    source = tmp_path / "file.bin"
    source.write_bytes(b"abc")
    assert fetch(source.as_uri(), tmp_path / "copy.bin", None).read_bytes() == b"abc"


def test_an_interrupted_fetch_resumes_where_it_stopped(tmp_path):
    """The partial file of a download cut off halfway is completed by a Range request, and a
    source that cannot resume (a file: URL) sends the whole file again."""
    import http.server
    import threading

    data = bytes(range(256)) * 400
    ranges = []

    class Server(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # http.server's name for it
            start = int(self.headers.get("Range", "bytes=0-")[6:-1])
            ranges.append(start)
            self.send_response(206 if start else 200)
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            self.wfile.write(data[start:])

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        destination = tmp_path / "file.bin"
        (tmp_path / ".file.bin.part").write_bytes(data[:40000])
        url = f"http://127.0.0.1:{server.server_port}/file.bin"
        assert fetch(url, destination, _sha256(data)).read_bytes() == data
        assert ranges == [40000] and sorted(p.name for p in tmp_path.iterdir()) == ["file.bin"]
    finally:
        server.shutdown()
    source = tmp_path / "remote.bin"
    source.write_bytes(data)
    (tmp_path / ".again.bin.part").write_bytes(b"stale bytes")
    assert fetch(source.as_uri(), tmp_path / "again.bin", _sha256(data)).read_bytes() == data


def test_require_file_names_path_source_and_checksum(tmp_path):
    missing = tmp_path / "data" / "archive.tgz"
    with pytest.raises(DatasetUnavailable) as error:
        require_file(missing, sha256="ab" * 32, how_to_get="https://example.org/archive.tgz")
    message = str(error.value)
    assert str(missing) in message and "https://example.org/archive.tgz" in message
    assert "ab" * 32 in message
    assert isinstance(error.value, FileNotFoundError)
    missing.parent.mkdir()
    missing.write_bytes(b"x")
    assert require_file(missing) == missing
    with pytest.raises(ValueError, match="checksum mismatch"):
        require_file(missing, sha256="ab" * 32)


def test_cifar10_on_an_empty_root_says_what_to_put_where(tmp_path):
    with pytest.raises(DatasetUnavailable) as error:
        load_dataset({"source": "cifar10"}, root=tmp_path)
    message = str(error.value)
    assert str(tmp_path / "cifar10") in message
    assert "cifar-10-batches-py" in message and "data_batch_1" in message
    assert "cifar-10-python.tar.gz" in message and "download: true" in message


def _idx(array: np.ndarray) -> bytes:
    """An uncompressed IDX (MNIST) file of unsigned bytes."""
    header = bytes([0, 0, 8, array.ndim]) + b"".join(
        int(n).to_bytes(4, "big") for n in array.shape)
    return header + array.astype(np.uint8).tobytes()


def test_mnist_loader_concatenates_official_splits(tmp_path):
    raw = tmp_path / "mnist" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    images = {"train": rng.integers(0, 256, (6, 28, 28)), "t10k": rng.integers(0, 256, (4, 28, 28))}
    labels = {"train": np.arange(6) % 10, "t10k": np.arange(4) + 5}
    for part in ("train", "t10k"):
        (raw / f"{part}-images-idx3-ubyte").write_bytes(_idx(images[part]))
        (raw / f"{part}-labels-idx1-ubyte").write_bytes(_idx(labels[part]))
    dataset = load_dataset({"source": "mnist"}, root=tmp_path)
    assert dataset.X.shape == (10, 1, 28, 28) and dataset.X.dtype == np.float32
    assert dataset.meta["official_test_start"] == 6 and dataset.n_classes == 10
    np.testing.assert_array_equal(dataset.y, np.concatenate([labels["train"], labels["t10k"]]))
    np.testing.assert_allclose(dataset.X[7, 0] * 255, images["t10k"][1], atol=1e-3)


# --- Purchase100 / Texas100 archives -----------------------------------------------------

def _tgz(path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _rows(labels, features) -> bytes:
    return "".join(",".join(str(v) for v in (label, *row)) + "\n"
                   for label, row in zip(labels, features, strict=True)).encode()


@pytest.fixture
def purchase_rows():
    rng = np.random.default_rng(0)
    labels = np.array([1, 100, 42, 7, 1])
    return labels, rng.integers(0, 2, (5, 600))


def test_purchase100_from_the_archive(tmp_path, purchase_rows):
    labels, features = purchase_rows
    folder = tmp_path / "purchase100"
    folder.mkdir()
    _tgz(folder / "dataset_purchase.tgz", {"dataset_purchase": _rows(labels, features)})
    dataset = load_dataset({"source": "purchase100"}, root=tmp_path)
    assert dataset.X.shape == (5, 600) and dataset.X.dtype == np.float32
    np.testing.assert_array_equal(dataset.X, features)
    np.testing.assert_array_equal(dataset.y, labels - 1)
    assert dataset.n_classes == 100 and dataset.input_shape == (600,)
    assert len(dataset.meta["archive_sha256"]) == 64


def test_purchase100_from_the_extracted_file_and_bad_labels(tmp_path, purchase_rows):
    labels, features = purchase_rows
    folder = tmp_path / "purchase100"
    folder.mkdir()
    (folder / "dataset_purchase").write_bytes(_rows(labels, features))
    dataset = load_dataset({"source": "purchase100"}, root=tmp_path)
    np.testing.assert_array_equal(dataset.y, labels - 1)
    (folder / "dataset_purchase").write_bytes(_rows(labels - 1, features))  # 0-based: refuse
    with pytest.raises(ValueError, match=r"1\.\.100"):
        load_dataset({"source": "purchase100"}, root=tmp_path)


def test_purchase100_missing_then_downloaded(tmp_path, purchase_rows, monkeypatch):
    with pytest.raises(DatasetUnavailable) as error:
        load_dataset({"source": "purchase100"}, root=tmp_path / "data")
    assert str(tmp_path / "data" / "purchase100" / "dataset_purchase.tgz") in str(error.value)
    assert "comp.nus.edu.sg" in str(error.value)

    remote = tmp_path / "remote.tgz"
    _tgz(remote, {"dataset_purchase": _rows(*purchase_rows)})
    archive = dataclasses.replace(tabular_archives.PURCHASE100, urls=(remote.as_uri(),),
                                  sha256=_sha256(remote.read_bytes()))
    monkeypatch.setattr(tabular_archives, "PURCHASE100", archive)
    dataset = load_dataset({"source": "purchase100", "download": True}, root=tmp_path / "data")
    assert len(dataset) == 5
    assert (tmp_path / "data" / "purchase100" / "dataset_purchase.tgz").is_file()


def test_a_moved_link_is_never_kept_as_the_dataset(tmp_path, purchase_rows, monkeypatch):
    """Purchase100 has no published checksum, so its file is trusted on first use. A mirror
    that answers with a web page (a moved link) must not become that file: the next mirror
    is tried, and a page saved by hand in its place is refused, never recorded."""
    page = tmp_path / "moved.html"
    page.write_bytes(b"\n<!DOCTYPE html><html><body>This page has moved</body></html>")
    with pytest.raises(NotTheFile, match=r"sent a web page, not page\.bin"):
        fetch(page.as_uri(), tmp_path / "got" / "page.bin", None)
    assert list((tmp_path / "got").iterdir()) == []  # neither the file nor a partial
    zipped = tmp_path / "remote.zip"
    zipped.write_bytes(b"PK\x03\x04 a zip archive")
    with pytest.raises(NotTheFile, match="not a tar archive"):
        fetch(zipped.as_uri(), tmp_path / "got" / "a.tgz", None, archive=True)

    remote = tmp_path / "remote.tgz"
    _tgz(remote, {"dataset_purchase": _rows(*purchase_rows)})
    archive = dataclasses.replace(tabular_archives.PURCHASE100,
                                  urls=(page.as_uri(), remote.as_uri()))
    monkeypatch.setattr(tabular_archives, "PURCHASE100", archive)
    dataset = load_dataset({"source": "purchase100", "download": True}, root=tmp_path / "data")
    assert len(dataset) == 5  # from the second mirror

    folder = tmp_path / "saved" / "purchase100"
    folder.mkdir(parents=True)
    (folder / "dataset_purchase.tgz").write_bytes(page.read_bytes())
    with pytest.raises(DatasetUnavailable, match="is a web page, not the dataset file"):
        load_dataset({"source": "purchase100"}, root=tmp_path / "saved")
    assert not (folder / "dataset_purchase.tgz.sha256").exists()


def test_texas100_from_the_archive(tmp_path):
    rng = np.random.default_rng(1)
    features, labels = rng.integers(0, 2, (4, 25)), np.array([3, 100, 1, 55])
    feats = "".join(",".join(map(str, row)) + "\n" for row in features).encode()
    folder = tmp_path / "texas100"
    folder.mkdir()
    _tgz(folder / "dataset_texas.tgz", {  # "./" prefixes, as some tar tools write them
        "./texas/100/feats": feats,
        "./texas/100/labels": "".join(f"{v}\n" for v in labels).encode(),
        "./texas/100/README": b"ignored"})
    dataset = load_dataset({"source": "texas100"}, root=tmp_path)
    np.testing.assert_array_equal(dataset.X, features)
    np.testing.assert_array_equal(dataset.y, labels - 1)
    assert dataset.input_shape == (25,) and dataset.n_classes == 100


def test_texas100_archive_without_labels_is_refused(tmp_path):
    folder = tmp_path / "texas100"
    folder.mkdir()
    _tgz(folder / "dataset_texas.tgz", {"texas/100/feats": b"0,1\n"})
    with pytest.raises(ValueError, match="texas/100/labels"):
        load_dataset({"source": "texas100"}, root=tmp_path)



def test_an_openml_task_is_downloaded_through_its_task_description(tmp_path, monkeypatch):
    """With download, the task's dataset id and target come from OpenML's task description,
    the dataset from scikit-learn's fetch_openml; categorical features become their codes.
    A network failure names the task and how to get it by hand."""
    import urllib.error
    import urllib.request

    import pandas as pd
    import sklearn.datasets
    from sklearn.utils import Bunch

    description = {"task": {"input": [{"name": "source_data", "data_set": {
        "data_set_id": "44089", "target_feature": "class"}}, {"name": "estimation_procedure"}]}}
    asked = {}

    def urlopen(url, timeout):
        asked["url"] = url
        return io.BytesIO(json.dumps(description).encode())

    def fetch_openml(data_id, target_column, as_frame, data_home):
        asked.update(data_id=data_id, target=target_column)
        data = pd.DataFrame({"size": [1.5, 2.0, 3.5],
                             "colour": pd.Categorical(["red", "blue", "red"])})
        return Bunch(data=data, target=pd.Series(["b", "a", "b"], name="class"))

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(sklearn.datasets, "fetch_openml", fetch_openml)
    data = load_dataset({"source": "openml_task", "task": 361060, "download": True},
                        root=tmp_path)
    assert asked == {"url": "https://www.openml.org/api/v1/json/task/361060",
                     "data_id": 44089, "target": "class"}
    np.testing.assert_array_equal(data.X, [[1.5, 1.0], [2.0, 0.0], [3.5, 1.0]])
    np.testing.assert_array_equal(data.y, [1, 0, 1])
    assert data.meta["columns"] == ["size", "colour"]
    assert (tmp_path / "openml" / "task-361060.csv").is_file()

    def offline(url, timeout):
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(DatasetUnavailable,
                       match=r"OpenML task 361061 \(.*no route to host.*task-361061\.csv"):
        load_dataset({"source": "openml_task", "task": 361061, "download": True},
                     root=tmp_path)


def test_openml_task_reads_the_csv_and_verifies_it_later(tmp_path):
    from miarepro.data.tabular_benchmarks import write_openml_csv

    with pytest.raises(DatasetUnavailable, match=r"task-361057\.csv"):
        load_dataset({"source": "openml_task", "task": 361057}, root=tmp_path)
    path = tmp_path / "openml" / "task-361057.csv"
    X = np.arange(12, dtype=np.float32).reshape(4, 3)
    write_openml_csv(path, X, np.array(["yes", "no", "yes", "no"]), ["a", "b", "c"])
    data = load_dataset({"source": "openml_task", "task": 361057}, root=tmp_path)
    np.testing.assert_array_equal(data.X, X)
    np.testing.assert_array_equal(data.y, [1, 0, 1, 0])  # sorted classes: no, yes
    assert data.n_classes == 2 and data.meta["class_names"] == ["no", "yes"]
    path.write_text(path.read_text().replace("11", "12"))  # changed after its first use
    with pytest.raises(ValueError, match="changed since its first use"):
        load_dataset({"source": "openml_task", "task": 361057}, root=tmp_path)


def test_acs_without_folktables_says_how_to_get_it(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "folktables", None)  # as if not installed
    with pytest.raises(DatasetUnavailable, match="pip install folktables"):
        load_dataset({"source": "acs", "task": "income"}, root=tmp_path)


def test_tabular_like_is_seeded_and_noisy():
    first = load_dataset({"source": "tabular_like", "n_samples": 300, "label_noise": 0.2})
    again = load_dataset({"source": "tabular_like", "n_samples": 300, "label_noise": 0.2})
    np.testing.assert_array_equal(first.X, again.X)
    assert first.X.shape == (300, 20) and set(np.unique(first.y)) == {0, 1}
    with pytest.raises(ValueError, match="n_informative"):
        load_dataset({"source": "tabular_like", "n_features": 4, "n_informative": 8})


def test_svhn_keeps_the_extra_split_out_of_every_split(tmp_path, monkeypatch):
    """train, test and extra .mat files (torchvision's layout: 32x32x3xN, labels 1-10 with 10
    for the digit 0); the extra records come last and form the split's ``ood`` part."""
    from scipy.io import savemat

    from miarepro.compat import ensure_torchvision
    from miarepro.splits import make_split

    ensure_torchvision()
    from torchvision.datasets import SVHN

    monkeypatch.setattr(SVHN, "_check_integrity", lambda self: True)
    folder = tmp_path / "svhn"
    folder.mkdir()
    rng = np.random.default_rng(0)
    sizes = {"train": 6, "test": 3, "extra": 5}
    for part, n in sizes.items():
        savemat(folder / SVHN.split_list[part][1],
                {"X": rng.integers(0, 256, (32, 32, 3, n)).astype(np.uint8),
                 "y": (np.arange(n) % 10 + 1)[:, None]})
    plain = load_dataset({"source": "svhn"}, root=tmp_path)
    assert plain.X.shape == (9, 3, 32, 32) and "ood_start" not in plain.meta
    assert plain.meta["official_test_start"] == 6 and plain.y[0] == 1 and plain.y[9 - 1] == 3
    dataset = load_dataset({"source": "svhn", "extra": True}, root=tmp_path)
    assert len(dataset) == 14 and dataset.meta["ood_start"] == 9
    split = make_split(len(dataset), {"scheme": "balanced", "seed": 0, "population_fraction": 0.3},
                       ood_start=dataset.meta["ood_start"])
    np.testing.assert_array_equal(split["ood"], np.arange(9, 14))
    assert split["reference_pool"].max() < 9 and split["population"].max() < 9


# first records of the real files, in their formats
UCI_FILES = {
    "adult": {
        "adult.data": "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, "
                      "Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K\n"
                      "52, Self-emp-inc, 287927, HS-grad, 9, Married-civ-spouse, ?, Wife, "
                      "White, Female, 15024, 0, 40, United-States, >50K\n\n",
        "adult.test": "|1x3 Cross validator\n"
                      "25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, "
                      "Own-child, Black, Male, 0, 0, 40, United-States, <=50K.\n"
                      "44, Private, 160323, Some-college, 10, Married-civ-spouse, "
                      "Machine-op-inspct, Husband, Black, Male, 7688, 0, 40, United-States, "
                      ">50K.\n"},
    "pima": {"pima-indians-diabetes.data.csv": "6,148,72,35,0,33.6,0.627,50,1\n"
                                               "1,85,66,29,0,26.6,0.351,31,0\n"
                                               "8,183,64,0,0,23.3,0.672,32,1\n"},
    "hepatitis": {"hepatitis.data": "2,30,2,1,2,2,2,2,1,2,2,2,2,2,1.00,85,18,4.0,?,1\n"
                                    "1,50,1,1,2,1,2,2,1,2,2,2,2,2,0.90,135,42,3.5,?,1\n"
                                    "2,78,1,2,2,1,2,2,2,2,2,2,2,2,0.70,96,32,4.0,?,1\n"
                                    "2,31,1,?,1,2,2,2,2,2,2,2,2,2,0.70,46,52,4.0,80,1\n"},
    "german_credit": {"german.data": "A11 6 A34 A43 1169 A65 A75 4 A93 A101 4 A121 67 A143 "
                                     "A152 2 A173 1 A192 A201 1\n"
                                     "A12 48 A32 A43 5951 A61 A73 2 A92 A101 2 A121 22 A143 "
                                     "A152 1 A173 1 A191 A201 2\n"},
}


@pytest.mark.parametrize("source", sorted(UCI_FILES))
def test_uci_tables_read_their_original_files(tmp_path, source):
    """Each UCI table from its original file: one-hot categoricals, z-scored numbers, the
    positive class 1 (Adult's test labels end in '.'); absent, the error names the path."""
    with pytest.raises(DatasetUnavailable, match=re.escape(str(tmp_path / source))):
        load_dataset({"source": source}, root=tmp_path)
    for name, text in UCI_FILES[source].items():
        (tmp_path / source).mkdir(exist_ok=True)
        (tmp_path / source / name).write_text(text)
    data = load_dataset({"source": source}, root=tmp_path)
    n_rows = sum(line.strip() != "" and not line.startswith("|")
                 for text in UCI_FILES[source].values() for line in text.splitlines())
    assert data.X.shape[0] == n_rows and data.X.dtype == np.float32 and data.n_classes == 2
    assert np.isfinite(data.X).all()
    expected_y = {"adult": [0, 1, 0, 1], "pima": [1, 0, 1], "hepatitis": [0, 1, 0, 0],
                  "german_credit": [0, 1]}[source]
    np.testing.assert_array_equal(data.y, expected_y)
    names = data.meta["features"]
    assert len(names) == data.X.shape[1]
    if source == "adult":
        occupation = [i for i, n in enumerate(names) if n.startswith("occupation=")]
        assert names[occupation[0]] == "occupation=?"  # missing: its own level
        np.testing.assert_array_equal(data.X[:, occupation].sum(1), 1)
        np.testing.assert_allclose(data.X[:, names.index("age")].mean(), 0, atol=1e-6)
    if source == "hepatitis":  # protime: median-imputed, with its missing flag
        flag = data.X[:, names.index("protime missing")]
        np.testing.assert_array_equal(flag, [1, 1, 1, 0])
        assert len(set(data.X[:, names.index("protime")])) == 1  # all 80, then z-scored


def test_uci_table_with_a_wrong_row_names_the_line(tmp_path):
    (tmp_path / "pima").mkdir()
    (tmp_path / "pima" / "pima-indians-diabetes.data.csv").write_text("6,148,72\n")
    with pytest.raises(ValueError, match=r"line 1: 3 fields, expected 9"):
        load_dataset({"source": "pima"}, root=tmp_path)


def test_lfw_reads_scikit_learn_s_folder_and_filters_people(tmp_path):
    """LFW from a scikit-learn lfw_home folder written here (250x250 JPEGs, pairs files);
    without it the error names the folder."""
    from PIL import Image

    with pytest.raises(DatasetUnavailable, match=re.escape(str(tmp_path / "lfw" / "lfw_home"))):
        load_dataset({"source": "lfw"}, root=tmp_path)
    home = tmp_path / "lfw" / "lfw_home"
    rng = np.random.default_rng(0)
    for person, count in (("Ada_Lovelace", 3), ("Alan_Turing", 2), ("Grace_Hopper", 1)):
        folder = home / "lfw_funneled" / person
        folder.mkdir(parents=True)
        for k in range(count):
            pixels = rng.integers(0, 256, size=(250, 250, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"{person}_{k + 1:04d}.jpg")
    for name in ("pairsDevTrain.txt", "pairsDevTest.txt", "pairs.txt"):
        (home / name).write_text("")
    data = load_dataset({"source": "lfw", "min_faces_per_person": 2}, root=tmp_path)
    assert data.X.shape == (5, 1, 62, 47) and data.X.dtype == np.float32
    assert 0 <= data.X.min() and data.X.max() <= 1
    assert data.meta["class_names"] == ["Ada Lovelace", "Alan Turing"]
    assert sorted(np.bincount(data.y)) == [2, 3]


def test_image_like_is_cifar_shaped_seeded_and_learnable():
    """Generated 3x32x32 images in [0, 1]: the same seed gives the same images, and the class
    patterns are learnable (a nearest-class-mean rule beats chance by far)."""
    data = load_dataset({"source": "image_like", "n_samples": 500})
    again = load_dataset({"source": "image_like", "n_samples": 500})
    assert data.X.shape == (500, 3, 32, 32) and data.n_classes == 10
    assert 0 <= data.X.min() and data.X.max() <= 1
    np.testing.assert_array_equal(data.X, again.X)
    flat = data.X.reshape(500, -1)
    means = np.stack([flat[data.y == c].mean(0) for c in range(10)])
    predicted = ((flat[:, None, :] - means[None]) ** 2).sum(-1).argmin(1)
    assert (predicted == data.y).mean() > 0.5


def test_preflight_knows_where_every_real_source_reads():
    from miarepro.data import SOURCES, embedded, preflight, synthetic

    offline = {name for name, loader in SOURCES.items()
               if loader.__module__ in (embedded.__name__, synthetic.__name__)}
    assert set(preflight.LOCATIONS) == set(SOURCES) - offline


def _preflight_config(root, datasets):
    study = {"paper": "bmia", "split": {}, "model": {}, "training": {}, "attacks": {}}
    return {"data_dir": str(root), "datasets": datasets,
            "studies": {f"s-{name}": {**study, "dataset": name} for name in datasets}}


def test_preflight_lists_absent_files_and_accepts_either_alternative(tmp_path):
    from miarepro.data import preflight

    config = _preflight_config(tmp_path, {
        "shop": {"source": "purchase100"}, "svhn": {"source": "svhn", "extra": True},
        "census": {"source": "adult", "download": True}, "digits": {"source": "digits"}})
    (tmp_path / "svhn").mkdir()
    for part in ("train", "test"):
        (tmp_path / "svhn" / f"{part}_32x32.mat").write_bytes(b"")
    found = {entry.dataset: entry for entry in preflight.absent(config)}
    assert set(found) == {"shop", "svhn", "census"}  # digits ships with scikit-learn
    assert found["svhn"].missing == ((tmp_path / "svhn/extra_32x32.mat",),)
    assert found["census"].download and len(found["census"].missing) == 2
    message, blocking = preflight.report(list(found.values()))
    assert blocking and "2 dataset(s) are not on disk" in message
    assert f"- shop (source purchase100, for s-shop): {tmp_path}/purchase100/" in message
    # the extracted members stand in for the archive; with every file present nothing is absent
    (tmp_path / "purchase100").mkdir()
    (tmp_path / "purchase100" / "dataset_purchase").write_bytes(b"")
    (tmp_path / "svhn" / "extra_32x32.mat").write_bytes(b"")
    assert [entry.dataset for entry in preflight.absent(config)] == ["census"]
    assert preflight.report(preflight.absent(config))[1] is False
    assert preflight.absent(config, datasets=["shop", "svhn"]) == []


def test_preflight_checks_the_out_of_distribution_part_too(tmp_path):
    from miarepro.data import preflight

    config = _preflight_config(tmp_path, {"c10": {"source": "cifar10", "ood": {
        "source": "cinic10", "subsample": 100}}})
    (tmp_path / "cifar10" / "cifar-10-batches-py").mkdir(parents=True)
    (entry,) = preflight.absent(config)
    assert entry.dataset == "c10 (ood)" and entry.source == "cinic10"
    assert entry.missing == ((tmp_path / "cinic10/test", tmp_path / "cinic10/CINIC-10.tar.gz"),)


def test_preflight_command_exits_1_when_a_run_would_stop(tmp_path):
    import subprocess
    import sys

    import yaml

    path = tmp_path / "config.yaml"
    config = yaml.safe_load((Path(__file__).resolve().parent.parent / "config" / "papers"
                             / "iha.yaml").read_text())
    config["data_dir"] = str(tmp_path / "data")
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run([sys.executable, "-m", "miarepro.data.preflight", str(path)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr  # the paper config allows downloads
    assert "will be downloaded" in result.stdout and "purchase100" in result.stdout
    for spec in config["datasets"].values():
        spec["download"] = False
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run([sys.executable, "-m", "miarepro.data.preflight", str(path)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 1 and "are not on disk" in result.stdout


def test_offline_sources_read_nothing_under_the_data_dir(tmp_path):
    """The dataset rule gives them no data_dir, so that moving it rebuilds none of them."""
    from miarepro.data import OFFLINE_SOURCES, SOURCES

    assert OFFLINE_SOURCES <= set(SOURCES)
    missing = tmp_path / "nowhere"
    for source in sorted(OFFLINE_SOURCES - {"mnist_subset"}):  # mnist_subset: 5,000 digits
        assert len(load_dataset({"source": source}, root=missing)) > 0, source
    assert not missing.exists()


def test_preflight_reads_torchvision_archives_only_where_download_is_set(tmp_path):
    """torchvision extracts CIFAR's archive and decompresses MNIST's .gz files only with
    `download: true`; without it they are absent, and MNIST needs all four of its files."""
    from miarepro.data import preflight

    config = _preflight_config(tmp_path, {"c10": {"source": "cifar10"},
                                          "digits": {"source": "mnist"}})
    (tmp_path / "cifar10").mkdir()
    (tmp_path / "cifar10" / "cifar-10-python.tar.gz").write_bytes(b"")
    raw = tmp_path / "mnist" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "train-images-idx3-ubyte").write_bytes(b"")
    found = {entry.dataset: entry for entry in preflight.absent(config)}
    assert found["c10"].missing == ((tmp_path / "cifar10/cifar-10-batches-py",),)
    assert [paths[0].name for paths in found["digits"].missing] == [
        "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
    assert preflight.report(list(found.values()))[1]  # blocking
    for spec in config["datasets"].values():
        spec["download"] = True
    assert [entry.dataset for entry in preflight.absent(config)] == ["digits"]  # the archive
    assert not preflight.report(preflight.absent(config))[1]  # MNIST's files: a download


def test_preflight_lists_absent_pretrained_weights(tmp_path, monkeypatch):
    """QMIA's ConvNeXt weights are no dataset: absent, they stop the run at start-up rather
    than fail a fit job after every model trained."""
    from miarepro.data import preflight

    config = _preflight_config(tmp_path, {})
    backbone = {"arch": "convnext", "weights": "weights/convnext_tiny.pt"}
    config["studies"] = {name: {"model": {"arch": "mlp"}, "attacks": {
        "qmia": {"attack": "qmia", "backbone": backbone}}} for name in ("s1", "s2")}
    config["studies"]["s3"] = {"model": {"arch": "mlp"}, "attacks": {}}
    monkeypatch.chdir(tmp_path)
    assert preflight.absent_weights(config) == {"weights/convnext_tiny.pt": ["s1", "s2"]}
    assert preflight.absent_weights(config, ["s3"]) == {}
    message, blocking = preflight.report([], preflight.absent_weights(config))
    assert blocking and "- weights/convnext_tiny.pt (for s1, s2)" in message
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "convnext_tiny.pt").write_bytes(b"")
    assert preflight.absent_weights(config) == {}


def test_acs_is_read_by_folktables_from_the_state_file_preflight_looks_for(tmp_path):
    """QMIA's ACS income task built by folktables from a few rows of New York's 2018 person
    survey, in the file and columns the real one has; preflight names that file (the folder
    alone, which folktables makes before it looks, once read as present), with folktables'
    own state codes."""
    import sys

    import folktables  # noqa: F401  (imports folktables.load_acs)
    import pandas as pd

    from miarepro.data import preflight
    from miarepro.data.tabular_benchmarks import acs

    config = _preflight_config(tmp_path, {"ny": {"source": "acs", "task": "income"}})
    folder = tmp_path / "acs" / "2018" / "1-Year"
    folder.mkdir(parents=True)
    [entry] = preflight.absent(config)
    assert entry.missing == ((folder / "psam_p36.csv",),)
    rng = np.random.default_rng(0)
    n = 60
    columns = {"AGEP": (17, 80), "COW": (1, 9), "SCHL": (1, 25), "MAR": (1, 6),
               "OCCP": (10, 9000), "POBP": (1, 60), "RELP": (0, 18), "WKHP": (1, 60),
               "SEX": (1, 3), "RAC1P": (1, 10), "PINCP": (200, 120000), "PWGTP": (1, 100)}
    frame = pd.DataFrame({name: rng.integers(*bounds, n) for name, bounds in columns.items()})
    frame.to_csv(folder / "psam_p36.csv", index=False)
    assert preflight.absent(config) == []
    data = acs(tmp_path, "income")
    assert data.X.shape == (n, 10) and set(data.y) == {0, 1}
    np.testing.assert_array_equal(data.y, frame["PINCP"] > 50000)  # ACSIncome's target
    # the module, which its package's function of the same name hides
    assert preflight._ACS_STATES == sys.modules["folktables.load_acs"]._STATE_CODES


def test_preflight_does_not_take_scikit_learns_empty_lfw_folder_for_the_images(tmp_path):
    from miarepro.data import preflight

    config = _preflight_config(tmp_path, {"faces": {"source": "lfw"}})
    (tmp_path / "lfw" / "lfw_home").mkdir(parents=True)  # what a failed fetch leaves
    assert [entry.dataset for entry in preflight.absent(config)] == ["faces"]
    (tmp_path / "lfw" / "lfw_home" / "lfw_funneled").mkdir()
    assert preflight.absent(config) == []


def test_two_jobs_extracting_into_one_folder_take_turns(tmp_path):
    """Dataset jobs run side by side on the submit host: the second to extract into a folder
    waits for the first, whose scratch folder it would otherwise have cleared mid-way. The
    lock lies beside the folder, which holds only what was extracted."""
    import multiprocessing
    import time

    from miarepro.data.download import extracting, locked

    folder = tmp_path / "cinic10"
    context = multiprocessing.get_context("fork")
    started = context.Event()

    def slow() -> None:
        with extracting(folder) as scratch:
            started.set()
            (scratch / "train").mkdir()
            time.sleep(1.0)
            (scratch / "train" / "image.png").write_bytes(b"png")

    first = context.Process(target=slow)
    first.start()
    assert started.wait(30)
    with extracting(folder) as scratch:  # waits for the first: its files are in place
        assert (folder / "train" / "image.png").read_bytes() == b"png"
        (scratch / "test").mkdir()
    first.join(30)
    assert first.exitcode == 0
    assert sorted(p.name for p in folder.iterdir()) == ["test", "train"]
    with locked(tmp_path / "missing" / "deeper"):  # made where absent
        assert (tmp_path / "missing" / ".deeper.lock").exists()


def test_a_file_in_a_read_only_folder_is_used_without_its_checksum_record(tmp_path,
                                                                          monkeypatch):
    """A file without a published checksum gets a record of its digest beside it at first use;
    in a shared read-only folder that write fails, and the file is used all the same."""
    from miarepro import io
    from miarepro.data.download import require_file

    data = tmp_path / "adult.data"
    data.write_text("39, State-gov\n")

    def refuse(*_):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(io, "write_text", refuse)
    assert require_file(data, how_to_get="x") == data
    assert not (tmp_path / "adult.data.sha256").exists()


def test_acs_without_its_file_says_where_and_how(tmp_path):
    from miarepro.data.tabular_benchmarks import acs

    with pytest.raises(DatasetUnavailable, match=r"ACS 2018 1-year person survey of NY not "
                                                 r"found under .*acs.*run with download: true"):
        acs(tmp_path, "income")
