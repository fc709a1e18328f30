"""Labeled Faces in the Wild through scikit-learn (Stolen Memories reads it that way).

scikit-learn keeps LFW under ``<data_home>/lfw_home``: the funnelled images
(``lfw_funneled/<Person_Name>/<Person_Name>_0001.jpg``) and the three ``pairs*.txt`` files it
checks for. Here ``data_home`` is ``<root>/lfw``. With ``download: true`` scikit-learn fetches
the archives from figshare and verifies their SHA-256 itself; offline, a copy of that folder
works. The paper states neither its face filter nor the image size (matrix §2.3):
``min_faces_per_person`` and ``resize`` are parameters, recorded in ``meta``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from miarepro.data.dataset import Dataset
from miarepro.data.download import DatasetUnavailable


def lfw(root: Path, download: bool = False, min_faces_per_person: int = 20,
        resize: float = 0.5, color: bool = False) -> Dataset:
    """LFW people with at least ``min_faces_per_person`` images each, one class per person,
    as channel-first images in [0, 1] (62 x 47 grey at the default ``resize``)."""
    from sklearn.datasets import fetch_lfw_people

    home = Path(root) / "lfw"
    try:
        bunch = fetch_lfw_people(data_home=str(home), min_faces_per_person=min_faces_per_person,
                                 resize=resize, color=color, download_if_missing=download)
    except OSError as error:
        raise DatasetUnavailable(
            f"LFW not found under {home / 'lfw_home'} ({error}); set `download: true` in the "
            "dataset spec on a machine with internet (scikit-learn fetches and verifies "
            "lfw-funneled.tgz and pairs*.txt), or copy scikit-learn's lfw_home folder "
            "(lfw_funneled/ and the pairs*.txt files) there") from None
    images = bunch.images.astype(np.float32)
    X = images.transpose(0, 3, 1, 2) if color else images[:, None]
    X = np.ascontiguousarray(X)
    return Dataset(X=X, y=bunch.target.astype(np.int64), n_classes=len(bunch.target_names),
                   input_shape=X.shape[1:], name="lfw",
                   meta={"source": "lfw", "min_faces_per_person": min_faces_per_person,
                         "resize": resize, "color": color,
                         "class_names": [str(n) for n in bunch.target_names],
                         "citation": "Huang, Ramesh, Berg & Learned-Miller 2007, Labeled Faces "
                                     "in the Wild (funnelled), via sklearn.datasets",
                         "license": "research use; see vis-www.cs.umass.edu/lfw"})
