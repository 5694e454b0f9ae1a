"""Frequency oracles whose report is one symbol of a finite output alphabet.

The state is the histogram of the symbols.  One report under a value distribution
:math:`f` has some output law :math:`P`, so n i.i.d. reports make the state exactly
:math:`\\mathrm{Multinomial}(n, P)`: simulating a state costs O(size of the alphabet)
whatever n.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from ..base import Column, FloatArray, FrequencyOracle, IntArray

__all__ = ["CategoricalOracle"]


class CategoricalOracle(FrequencyOracle):
    """A frequency oracle reporting one symbol ``y`` in ``[0, output_size)``.

    Subclasses give :attr:`output_size` and the output law of one report
    (:meth:`_output_probs`).
    """

    @property
    @abstractmethod
    def output_size(self) -> int:
        """Number of symbols a report may carry."""

    @abstractmethod
    def _output_probs(self, distribution: FloatArray) -> FloatArray:
        """Probability of each symbol in one report whose value is drawn from ``distribution``."""

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return (Column.index("y", self.output_size),)

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (self.output_size,)

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        return np.bincount(columns["y"], minlength=self.output_size).astype(np.int64)

    def _sample_counts(self, distribution: FloatArray, n: int, size: int,
                       rng: np.random.Generator) -> IntArray:
        probs = self._output_probs(distribution)
        out: IntArray = rng.multinomial(n, probs / probs.sum(), size=size).astype(np.int64)
        return out
