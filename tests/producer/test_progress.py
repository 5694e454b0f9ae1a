"""producer.progress: the progress bar and the result a simulation returns."""

from __future__ import annotations

import io

import numpy as np

import ldpcore
from producer.progress import Progress, SimulationResult


def test_the_bar_is_drawn_at_most_every_fifth_of_a_second_and_ends_with_a_newline() -> None:
    out = io.StringIO()
    bar = Progress(100, stream=out)
    bar.update(10)
    bar.update(20)  # within 0.2 s: not drawn
    assert out.getvalue().count("\r") == 1 and "10/100 reports" in out.getvalue()
    bar.update(100)  # the end is always drawn
    assert out.getvalue().endswith("\n") and "#" * 30 in out.getvalue()
    quiet = io.StringIO()
    Progress(10, enabled=False, stream=quiet).update(10)
    assert quiet.getvalue() == ""


def test_a_result_states_its_rate() -> None:
    o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=2)
    r = SimulationResult(1000, 4, 0.5, np.array([600, 400]), o.new_state())
    assert r.rate == 2000.0
    assert r.summary() == "sent 1000 reports in 4 messages in 0.50 s (2,000 reports/s)"
