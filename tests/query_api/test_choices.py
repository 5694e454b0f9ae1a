"""query_api.choices: an ``auto`` choice is kept per query shape while n stays near."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from query_api.choices import Choice, Choices


def test_a_choice_is_used_while_n_stays_within_the_factor() -> None:
    c = Choices(factor=1.25, max_age_s=300)
    assert c.lookup("k", 100) == (None, False)
    c.put("k", Choice("norm-sub", 1000, time.time()))
    assert c.lookup("k", 1200)[0] is not None and c.lookup("k", 800)[0] is not None
    assert c.lookup("k", 1300) == (None, False)  # n moved too far: choose again now


def test_an_old_choice_is_used_but_flagged_for_a_refresh() -> None:
    c = Choices(max_age_s=1.0)
    c.put("k", Choice("base", 10, time.time() - 5))
    hit, again = c.lookup("k", 10)
    assert hit is not None and again


def test_the_lru_keeps_size_entries() -> None:
    c = Choices(size=2)
    for k in "abc":
        c.put(k, Choice("base", 1, time.time()))
    assert c.lookup("a", 1)[0] is None and c.lookup("c", 1)[0] is not None


def test_a_refresh_runs_once_at_a_time_in_the_background() -> None:
    calls = []
    with ThreadPoolExecutor(1) as pool:
        c = Choices(executor=pool)

        def make() -> Choice:
            calls.append(1)
            time.sleep(0.05)
            return Choice("power", 7, time.time())

        c.refresh("k", make)
        c.refresh("k", make)  # already under way: not submitted again
    assert calls == [1] and c.lookup("k", 7)[0] == Choice("power", 7, c.lookup("k", 7)[0].at)  # type: ignore[union-attr]
    assert "made again when n leaves" in c.describe(Choice("base", 1, time.time()))["refresh"]


def test_kept_parts_follow_the_choices_rule_and_say_it() -> None:
    c = Choices(factor=1.25, max_age_s=300)
    now = time.time()
    assert c.near(1000, now, 1200) and c.near(1000, now, 800)
    assert not c.near(1000, now, 1300) and not c.near(1000, now - 301, 1000)
    said = c.describe_simulation(1000, now - 5)
    assert said["errors_simulated_at_n"] == 1000 and said["age_s"] >= 5
    assert "n·1.25" in said["refresh"] and "300 s" in said["refresh"]
