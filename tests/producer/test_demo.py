"""producer.demo: the collections ``ldpstream up`` fills, each with a distribution the
simulator can draw."""

from __future__ import annotations

import numpy as np

from ldpcore.collection import CollectionSpec
from producer.demo import demo_collections
from producer.simulate import distribution


def test_every_demo_collection_is_valid_and_its_distribution_fits_its_domain() -> None:
    demos = demo_collections()
    ids = [spec["id"] for spec, _ in demos]
    assert len(set(ids)) == len(ids) and {"app-version", "emoji", "latency-ms"} <= set(ids)
    for raw, dist in demos:
        spec = CollectionSpec.from_dict(raw)
        p = distribution(dist, spec.domain.size)
        assert p.shape == (spec.domain.size,) and abs(p.sum() - 1) < 1e-9 and (p >= 0).all()


def test_the_emoji_labels_come_from_the_bundled_histograms() -> None:
    emoji = next(raw for raw, _ in demo_collections() if raw["id"] == "emoji")
    labels = emoji["domain"]["labels"]
    assert len(labels) > 100 and len(set(labels)) == len(labels)
    assert all(isinstance(x, str) and x for x in labels)
    assert np.unique(labels).size == len(labels)
