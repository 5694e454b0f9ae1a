r"""The synthetic set-valued data model used by the simulator, the tests and ``experiment svim``.

No real set-valued data set is available offline, so sets come from a stated
model (in the spirit of the retail / click-stream data of Wang et al., S&P 2018):

* item popularity is Zipf: item i (0-based rank) has weight
  :math:`w_i \propto (i + 1)^{-s}` over d items (default s = 1.1);
* a device draws a nominal length :math:`L \sim \mathrm{Geometric}(1/\mu)` on
  {1, 2, …} (mean μ, default 4; heavy enough that a tenth of the sets exceed
  ~2.3 μ), capped at ``max_length``;
* it then draws L items i.i.d. from w; duplicates collapse, so :math:`|v| \le L`.

Items are drawn independently, so an itemset's support is roughly the product
of its items' frequencies (frequent itemsets concentrate on the top items).

>>> import numpy as np
>>> b = zipf_sets(1000, 50, rng=np.random.default_rng(1))
>>> len(b), int(b.lengths.min()) >= 1, float(b.lengths.mean()) < 4.0
(1000, True, True)
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .._validate import check_float, check_int
from .base import SetBatch

__all__ = ["zipf_sets", "zipf_weights", "item_frequencies"]


def zipf_weights(d: int, s: float = 1.1) -> npt.NDArray[np.float64]:
    """Zipf(s) probabilities of d items by rank."""
    w = 1.0 / np.arange(1, d + 1, dtype=np.float64) ** s
    out: npt.NDArray[np.float64] = w / w.sum()
    return out


def zipf_sets(n: int, d: int, *, zipf_s: float = 1.1, mean_length: float = 4.0,
              max_length: int | None = None,
              rng: np.random.Generator | None = None) -> SetBatch:
    """n sets over d items from the model of the module docstring."""
    n = check_int("n", n, low=0)
    d = check_int("d", d, low=2)
    zipf_s = check_float("zipf_s", zipf_s, low=0.0, high=10.0)
    mean_length = check_float("mean_length", mean_length, low=1.0, high=1e6)
    cap = check_int("max_length", d if max_length is None else max_length, low=1)
    gen = rng if rng is not None else np.random.default_rng()
    lengths = np.minimum(gen.geometric(1.0 / mean_length, size=n), cap).astype(np.int64)
    items = gen.choice(d, size=int(lengths.sum()), p=zipf_weights(d, zipf_s))
    owners = np.repeat(np.arange(n, dtype=np.int64), lengths)
    return SetBatch.from_pairs(owners, items.astype(np.int64), n, d)


def item_frequencies(batch: SetBatch) -> npt.NDArray[np.float64]:
    """The true fraction of sets holding each item."""
    out: npt.NDArray[np.float64] = (np.bincount(batch.items, minlength=batch.domain_size)
                                    / max(len(batch), 1))
    return out
