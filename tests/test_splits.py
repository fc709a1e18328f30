import numpy as np
import pytest

from miarepro import splits

BMIA = {"scheme": "partition", "seed": 3,
        "fractions": {"target_train": 0.2, "target_test": 0.2, "reference_pool": 0.4,
                      "population": 0.2}}
BALANCED = {"scheme": "balanced", "seed": 3, "population_fraction": 0.1}


def test_partition_is_disjoint_with_requested_sizes():
    split = splits.make_split(1000, BMIA)
    parts = [split[name] for name in ("target_train", "target_test", "reference_pool",
                                      "population")]
    assert [len(p) for p in parts] == [200, 200, 400, 200]
    assert len(np.unique(np.concatenate(parts))) == 1000
    np.testing.assert_array_equal(split["audit"],
                                  np.sort(np.concatenate(parts[:2])))


def test_partition_references_are_halves_of_the_pool_and_never_audited():
    split = splits.make_split(1000, BMIA)
    for index in range(4):
        trained = splits.training_indices(split, "reference", index)
        assert len(trained) == 200
        assert np.isin(trained, split["reference_pool"]).all()
        assert not splits.training_mask(split, "reference", index)[split["audit"]].any()
    target = splits.training_mask(split, "target", 0)
    np.testing.assert_array_equal(np.flatnonzero(target), split["target_train"])


def test_references_can_train_on_the_targets_part_and_the_pool_together():
    """LiRA's setup as QMIA's authors run it: each reference on a random half of the target's
    training part and the public pool, the target's size; every target member and pool record
    IN for half of an even number of references, the test part for none, in every repetition.
    Without the key, the split file holds what it held before."""
    qmia = {"scheme": "partition", "seed": 3,
            "fractions": {"target_train": 0.4, "target_test": 0.2, "reference_pool": 0.4}}
    split = splits.make_split(1000, {**qmia, "references_train_on": ["target_train",
                                                                     "reference_pool"]})
    for group in (0, 1):
        part = splits.repetition(split, group)
        masks = np.stack([splits.training_mask(split, "reference", group * splits.STRIDE + i)
                          for i in range(4)])
        assert len(part["target_train"]) == 400
        assert (masks.sum(axis=1) == 400).all()
        assert (masks[:, part["target_train"]].sum(axis=0) == 2).all()
        assert (masks[:, part["reference_pool"]].sum(axis=0) == 2).all()
        assert not masks[:, part["target_test"]].any()
        np.testing.assert_array_equal(np.flatnonzero(splits.training_mask(split, "target", group)),
                                      part["target_train"])
    plain = splits.make_split(1000, qmia)
    assert set(split) - set(plain) == {"reference_parts"}
    assert all(np.array_equal(plain[key], split[key]) for key in plain)
    assert np.isin(splits.training_indices(plain, "reference", 0), plain["reference_pool"]).all()


def test_balanced_masks_put_each_sample_in_half_of_any_even_prefix():
    split = splits.make_split(500, BALANCED)
    masks = np.stack([splits.training_mask(split, "reference", i) for i in range(6)])
    pool = split["reference_pool"]
    assert (masks[:, pool].sum(axis=0) == 3).all()
    assert not masks[:, split["population"]].any()
    assert len(split["population"]) == 50


def test_model_masks_do_not_depend_on_how_many_models_exist_and_are_seeded():
    split = splits.make_split(500, BALANCED)
    first = splits.training_indices(split, "reference", 5)
    again = splits.training_indices(splits.make_split(500, BALANCED), "reference", 5)
    np.testing.assert_array_equal(first, again)
    other_seed = splits.make_split(500, {**BALANCED, "seed": 4})
    assert not np.array_equal(first, splits.training_indices(other_seed, "reference", 5))
    # targets and references are different draws
    assert not np.array_equal(splits.training_indices(split, "target", 0),
                              splits.training_indices(split, "reference", 0))


def test_partition_repetitions_have_their_own_split_and_references():
    split = splits.make_split(1000, BMIA)
    first, second = splits.repetition(split, 0), splits.repetition(split, 1)
    assert first is split
    assert not np.array_equal(first["target_train"], second["target_train"])
    np.testing.assert_array_equal(splits.repetition(split, 1)["audit"], second["audit"])
    np.testing.assert_array_equal(splits.training_indices(split, "target", 1),
                                  second["target_train"])
    (reference,) = splits.reference_indices("partition", 1, 1)
    assert reference == splits.STRIDE
    trained = splits.training_indices(split, "reference", reference)
    assert np.isin(trained, second["reference_pool"]).all()
    assert splits.reference_indices("balanced", 1, 3) == [0, 1, 2]


def test_held_out_samples_are_never_trained_on():
    for spec in (BMIA, BALANCED):
        split = splits.make_split(600, spec)
        for role, index in (("target", 0), ("target", 1), ("reference", 3)):
            if spec is BMIA and role == "reference":
                index = splits.STRIDE + 3  # a reference model of repetition 1
            held_out = splits.held_out_indices(split, role, index)
            assert len(held_out) > 0
            assert not np.isin(held_out, splits.training_indices(split, role, index)).any()


def test_loo_records_alternate_members_and_grow_as_prefixes():
    split = splits.make_split(400, BALANCED)
    records = splits.loo_records(split, 6)
    member = splits.training_mask(split, "target", 0)[records]
    np.testing.assert_array_equal(member, [True, False] * 3)
    np.testing.assert_array_equal(splits.loo_records(split, 10)[:6], records)
    loo = splits.training_indices(split, "loo", 1 * splits.STRIDE + 2)  # seed 1, record 2
    target = splits.training_indices(split, "target", 0)
    assert records[2] not in loo and len(loo) == len(target) - 1
    assert np.isin(np.delete(target, np.searchsorted(target, records[2])), loo).all()


def test_balanced_records_of_target_zero_are_the_loo_records():
    """An attack's ``records`` subset and the leave-one-out records coincide on target 0, so
    IHA's agreement table compares every attack on the same records."""
    split = splits.make_split(400, BALANCED)
    mask = splits.training_mask(split, "target", 0)
    subset = splits.balanced_records(split["audit"], mask, int(split["seed"]), 8)
    np.testing.assert_array_equal(subset, splits.loo_records(split, 8))
    other = splits.balanced_records(split["audit"], splits.training_mask(split, "target", 1),
                                    int(split["seed"]), 8)
    assert splits.training_mask(split, "target", 1)[other].tolist() == [True, False] * 4
    with pytest.raises(ValueError, match="cannot pick 1000 balanced records"):
        splits.balanced_records(split["audit"], mask, 0, 1000)


def test_bad_specs_fail_with_the_key():
    with pytest.raises(ValueError, match="unknown part"):
        splits.make_split(10, {"scheme": "partition", "seed": 0, "fractions": {"train": 0.5}})
    with pytest.raises(ValueError, match="sum to"):
        splits.make_split(10, {"scheme": "partition", "seed": 0,
                               "fractions": {"target_train": 0.7, "target_test": 0.7}})
    with pytest.raises(ValueError, match="unknown split scheme"):
        splits.make_split(10, {"scheme": "nope", "seed": 0})


def test_ood_records_are_never_trained_on_and_audited_only_as_nonmembers():
    plain = splits.make_split(1000, BMIA)
    split = splits.make_split(1300, BMIA, ood_start=1000)
    for name in ("target_train", "target_test", "reference_pool", "population"):
        np.testing.assert_array_equal(split[name], plain[name])  # adding ood moves nothing
    np.testing.assert_array_equal(split["ood"], np.arange(1000, 1300))
    for role, index in (("target", 0), ("reference", 1), ("target", 2)):
        assert splits.training_indices(split, role, index).max() < 1000
    second = splits.repetition(split, 2)
    np.testing.assert_array_equal(second["ood"], split["ood"])
    np.testing.assert_array_equal(second["target_train"],
                                  splits.repetition(plain, 2)["target_train"])
    audit = splits.audit(split, "ood")
    member = splits.training_mask(split, "target", 0)[audit]
    assert member.sum() == 200 and (audit[~member] >= 1000).all() and (~member).sum() == 300
    np.testing.assert_array_equal(splits.audit(split), split["audit"])


def test_adding_ood_records_moves_no_part_of_a_balanced_split():
    """The population is a fraction of the records the parts draw from: 200 of 1,000 with
    or without 1,000 out-of-distribution records appended (it once took 400)."""
    spec = {"scheme": "balanced", "seed": 0, "population_fraction": 0.2}
    plain = splits.make_split(1000, spec)
    split = splits.make_split(2000, spec, ood_start=1000)
    assert len(split["population"]) == 200
    for name in ("population", "reference_pool", "audit"):
        np.testing.assert_array_equal(split[name], plain[name])


def test_aligned_ood_copies_audit_only_the_copies_of_test_records():
    split = splits.make_split(2000, BMIA, ood_start=1000, ood_aligned=True)
    audit = splits.audit(split, "ood")
    member = splits.training_mask(split, "target", 0)[audit]
    np.testing.assert_array_equal(np.sort(audit[~member]), np.sort(split["target_test"] + 1000))
    again = splits.repetition(split, 1)
    assert bool(again["ood_aligned"])
    np.testing.assert_array_equal(np.sort(splits.audit(again, "ood")[200:]),
                                  np.sort(again["target_test"] + 1000))


def test_public_data_is_never_audited():
    """The population where there is one; a partition's reference pool (QMIA's 50/50); and
    nothing for a balanced split without a population, whose pool is the audit."""
    qmia = splits.make_split(100, {"scheme": "partition", "seed": 0,
                            "fractions": {"target_train": 0.4, "target_test": 0.2,
                                          "reference_pool": 0.4}})
    np.testing.assert_array_equal(splits.public(qmia), qmia["reference_pool"])
    with_population = splits.make_split(100, {"scheme": "balanced", "seed": 0,
                                       "population_fraction": 0.2})
    np.testing.assert_array_equal(splits.public(with_population), with_population["population"])
    balanced = splits.make_split(100, {"scheme": "balanced", "seed": 0})
    assert len(splits.public(balanced)) == 0
    for part in (qmia, with_population, balanced):
        assert not np.isin(splits.public(part), part["audit"]).any()
    assert not splits.has_public({"scheme": "balanced", "seed": 0})
    assert splits.has_public({"scheme": "balanced", "seed": 0, "population_fraction": 0.1})
    assert not splits.has_public({"scheme": "partition", "seed": 0,
                                  "fractions": {"target_train": 0.5, "target_test": 0.5}})
