"""The SDKs refuse exactly the specs ldpcore refuses for its parameter ranges.

A served spec is only hashed, not signed: a wrong or malicious catalogue could serve GRR at
ε = 40 (its reports would be the raw value) or ε = 1000 (NaN probabilities).  Each SDK
carries ldpcore's ranges (``sdks/vectors/limits``, generated from ldpcore) and checks them
before any draw.  Here a battery of specs at and just beyond every bound goes through
ldpcore and each SDK's check tool: the verdicts agree, and a refusal names the parameter.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpcore.limits import EPSILON_RANGES

from .conftest import SDKS, java_tool, js_tool


def _served(decl: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(CollectionSpec.from_dict({"id": "lim", **decl}).to_json())
    return out


def _ints(n: int) -> dict[str, Any]:
    return {"kind": "integers", "low": 0, "high": n - 1}


BASES: dict[str, dict[str, Any]] = {
    "grr": {"oracle": {"mechanism": "grr", "epsilon": 1.0}, "domain": _ints(8)},
    "sue": {"oracle": {"mechanism": "sue", "epsilon": 1.0}, "domain": _ints(8)},
    "oue": {"oracle": {"mechanism": "oue", "epsilon": 1.0}, "domain": _ints(8)},
    "blh": {"oracle": {"mechanism": "blh", "epsilon": 1.0}, "domain": _ints(8)},
    "olh": {"oracle": {"mechanism": "olh", "epsilon": 1.0, "g": 3}, "domain": _ints(8)},
    "hr": {"oracle": {"mechanism": "hr", "epsilon": 1.0}, "domain": _ints(8)},
    "hrr": {"oracle": {"mechanism": "hrr", "epsilon": 1.0}, "domain": _ints(8)},
    "ss": {"oracle": {"mechanism": "ss", "epsilon": 1.0}, "domain": _ints(8)},
    "cms": {"oracle": {"mechanism": "cms", "epsilon": 1.0}, "domain": _ints(8)},
    "hcms": {"oracle": {"mechanism": "hcms", "epsilon": 1.0}, "domain": _ints(8)},
    "hh": {"oracle": {"mechanism": "hh", "epsilon": 1.0}, "domain": _ints(64)},
    "haar": {"oracle": {"mechanism": "haar", "epsilon": 1.0}, "domain": _ints(8)},
    "sw": {"oracle": {"mechanism": "sw", "epsilon": 1.0},
           "domain": {"kind": "interval", "low": 0.0, "high": 1.0, "bins": 8}},
    "pm": {"oracle": {"mechanism": "pm", "epsilon": 1.0},
           "domain": {"kind": "interval", "low": 0.0, "high": 1.0, "bins": 8}},
    "duchi": {"oracle": {"mechanism": "duchi", "epsilon": 1.0},
              "domain": {"kind": "interval", "low": 0.0, "high": 1.0, "bins": 8}},
    "pem": {"oracle": {"mechanism": "pem", "epsilon": 1.0, "bits": 8, "keep": 4, "eta": 2,
                       "pool": 4}, "domain": _ints(256)},
    "ps": {"oracle": {"mechanism": "ps", "epsilon": 1.0, "length": 2}, "domain": _ints(8)},
    "psi": {"oracle": {"mechanism": "psi", "epsilon": 1.0, "length": 2}, "domain": _ints(8)},
    "setsize": {"oracle": {"mechanism": "setsize", "epsilon": 1.0, "max_size": 4,
                           "inner": "grr"}, "domain": _ints(8)},
    "multi": {"oracle": {"mechanism": "multi", "epsilon": 1.0, "sample": 1},
              "domain": {"kind": "attributes", "attributes": [
                  {"name": "a", "kind": "categories", "labels": ["x", "y"]},
                  {"name": "b", "kind": "integers", "low": 0, "high": 3}]}},
}


def _variant(mech: str, why: str, **oracle: Any) -> tuple[str, dict[str, Any]]:
    raw = _served(BASES[mech])
    raw.pop("fingerprint")
    raw["oracle"].update(oracle)
    return f"{mech}: {why}", raw


def _cases() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for mech, (lo, hi) in EPSILON_RANGES.items():
        if mech not in BASES:
            continue  # adaptive and vector are not served
        out.append(_variant(mech, f"epsilon {hi} (the bound)", epsilon=float(hi)))
        out.append(_variant(mech, f"epsilon {hi + 0.01}", epsilon=hi + 0.01))
        out.append(_variant(mech, f"epsilon {lo / 2}", epsilon=lo / 2))
    out += [
        _variant("grr", "epsilon 40: the raw value would be sent", epsilon=40.0),
        _variant("grr", "epsilon 1000: NaN probabilities", epsilon=1000.0),
        _variant("olh", "g 65537", g=65537),
        _variant("cms", "m 65537", m=65537),
        _variant("hcms", "m 8192", m=8192),
        _variant("ss", "subset_size = d", subset_size=8),
        _variant("hh", "fanout 1025", fanout=1025),
        _variant("hh", "base oue above its 9.7", base="oue", epsilon=9.8),
        _variant("hh", "base oue at 9.7", base="oue", epsilon=9.7),
        _variant("sw", "out_bins 4097", out_bins=4097),
        _variant("sw", "b 0", b=0.0),
        _variant("pem", "keep 4097", keep=4097),
        _variant("pem", "pool 0", pool=0),
        _variant("ps", "length 4097", length=4097),
        _variant("ps", "length 4096 at 21.5", length=4096, epsilon=21.5),
        _variant("setsize", "max_size 4097", max_size=4097),
        _variant("setsize", "inner oue above its 9.7", inner="oue", epsilon=9.8),
    ]
    multi = _served({"oracle": {"mechanism": "multi", "epsilon": 1.0, "sample": 1,
                                "attributes": [{"mechanism": "grr"}, {"mechanism": "oue"}]},
                     "domain": BASES["multi"]["domain"]})
    multi.pop("fingerprint")
    multi["oracle"]["epsilon"] = 10.0
    out.append(("multi: an oue attribute at epsilon 10 / 1", multi))
    two = _served({**BASES["grr"], "memoization": "two-level", "epsilon_1": 1.0})
    two.pop("fingerprint")
    for e1, why in ((100.0, "epsilon_1 100 (the bound)"), (100.5, "epsilon_1 100.5")):
        t = copy.deepcopy(two)
        t["epsilon_1"] = e1
        out.append((f"two-level: {why}", t))
    big = _served({"oracle": {"mechanism": "grr", "epsilon": 1.0}, "domain": _ints(1 << 24)})
    big.pop("fingerprint")
    out.append(("grr: domain_size 2^24 (the bound)", big))
    bigger = copy.deepcopy(big)
    bigger["domain"]["high"] = 1 << 24
    bigger["oracle"]["domain_size"] = (1 << 24) + 1
    out.append(("grr: domain_size 2^24 + 1", bigger))
    return out


def _ldpcore(raw: dict[str, Any]) -> tuple[bool, str]:
    try:
        CollectionSpec.from_dict(copy.deepcopy(raw))
    except ValueError as exc:
        return False, str(exc)
    return True, ""


def _sdk(sdk: str, raws: list[dict[str, Any]], tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "specs.json"
    path.write_text(json.dumps(raws))
    cmd = js_tool("check") if sdk == "js" else java_tool("CheckTool")
    proc = subprocess.run([*cmd, str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("sdk", SDKS)
def test_an_sdk_refuses_what_ldpcore_refuses_naming_the_parameter(sdk: str,
                                                                   tmp_path: Path) -> None:
    cases = _cases()
    verdicts = _sdk(sdk, [raw for _, raw in cases], tmp_path)
    assert len(verdicts) == len(cases)
    refused = 0
    for (name, raw), got in zip(cases, verdicts, strict=True):
        ok, why = _ldpcore(raw)
        assert got["ok"] is ok, f"{name}: ldpcore {'accepts' if ok else 'refuses: ' + why}, " \
                                f"{sdk} {got}"
        if not ok:
            refused += 1
            assert got["type"] == ("SpecError" if sdk == "js" else "SpecException"), got
            assert got["parameter"] and got["parameter"].split(".")[-1].split("[")[0] in (
                *raw["oracle"], "epsilon", "epsilon_1", "domain_size", "attributes"), got
    assert refused >= 30
    eps40 = next(v for (n, _), v in zip(cases, verdicts, strict=True) if "epsilon 40" in n)
    assert eps40["parameter"] == "oracle.epsilon" and "29.8" in eps40["error"]
