"""query_api.server: ``ldpstream serve`` reads its settings first and fails naming a bad one."""

from __future__ import annotations

import pytest

from ldpstream.settings import ConfigError
from query_api.server import main


@pytest.mark.parametrize(("key", "value"), [("LDP_API_PORT", "99999"),
                                            ("LDP_ADMIN_TOKEN", "short")])
def test_a_bad_variable_stops_the_start_naming_it(monkeypatch: pytest.MonkeyPatch, key: str,
                                                  value: str) -> None:
    monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError, match=key):
        main()
