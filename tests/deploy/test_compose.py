"""docker-compose.yml: valid for Debian's docker-compose, converging, consistent with the code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ldpctl.cli import build_parser
from ldpstream.collections_file import read_collections_file

from .conftest import ROOT, run

LDP_SERVICES = ("aggregator", "api", "gateway", "issuer", "simulator-app-version",
                "simulator-latency-ms")
VERB_BY_SERVICE = {"aggregator": "aggregate", "api": "serve", "gateway": "gateway",
                   "issuer": "issuer"}


@pytest.fixture(scope="module")
def compose(docker_compose: str) -> dict[str, Any]:
    """The file as docker-compose resolves it (every profile on)."""
    out = run(docker_compose, "-f", "docker-compose.yml", "--profile", "simulator",
              "--profile", "tokens", "config")
    cfg: dict[str, Any] = yaml.safe_load(out.stdout)
    return cfg


def documented_variables() -> set[str]:
    """Every ``LDP_…`` variable named in the configuration modules' reference tables."""
    names: set[str] = set()
    for mod in ("aggregator/config.py", "ldpstream/connections.py", "query_api/config.py",
                "gateway/config.py", "issuer/config.py"):
        names |= {v for v in re.findall(r"\bLDP_[A-Z_]+\b", (ROOT / mod).read_text())
                  if not v.endswith("_")}  # "LDP_REDIS_TLS_*" is prose, not a name
    return names


def _binds(svc: dict[str, Any]) -> dict[str, str]:
    """Bind mounts as {source relative to the repo: target} (short or long syntax)."""
    out = {}
    for v in svc["volumes"]:
        src, dst = ((v["source"], v["target"]) if isinstance(v, dict)
                    else str(v).split(":")[:2])
        if src.startswith("/"):
            out[str(Path(src).relative_to(ROOT))] = dst
    return out


def test_compose_file_is_valid_and_simulators_are_a_profile(
        docker_compose: str, compose: dict[str, Any]) -> None:
    run(docker_compose, "-f", "docker-compose.yml", "config", "-q")
    services = compose["services"]
    assert {"kafka", "redis", "aggregator", "api", "gateway", "prometheus",
            "grafana"} <= set(services)
    for name, svc in services.items():
        expected = (["simulator"] if name.startswith("simulator-")
                    else ["oidc"] if name == "oauth2-proxy"
                    else ["tokens"] if name == "issuer" else None)
        assert svc.get("profiles") == expected, name


def test_kafka_runs_kraft_from_the_pinned_official_image(compose: dict[str, Any]) -> None:
    kafka = compose["services"]["kafka"]
    image, _, tag = kafka["image"].partition(":")
    assert image == "apache/kafka" and re.fullmatch(r"\d+\.\d+\.\d+", tag)
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "CONTROLLER" in env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert "kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert any(v.endswith(":/var/lib/kafka/data") or "/var/lib/kafka/data" in str(v)
               for v in map(str, kafka["volumes"]))


def test_redis_keeps_an_append_only_file_on_a_volume(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    assert redis["image"].startswith("redis:7.")
    cmd = redis["command"]
    assert cmd[cmd.index("--appendonly") + 1] == "yes"
    assert any("/data" in str(v) for v in redis["volumes"])


def test_every_dependency_waits_for_a_health_check(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, svc in services.items():
        for dep, cond in (svc.get("depends_on") or {}).items():
            if cond["condition"] == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits on {dep}'s health"
    for stateful in ("kafka", "redis", "prometheus", "grafana"):
        assert "healthcheck" in services[stateful], stateful
    assert services["aggregator"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert services["aggregator"]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_ldpstream_services_run_real_verbs_with_documented_variables(
        compose: dict[str, Any]) -> None:
    known = documented_variables()
    parser = build_parser()
    for name in LDP_SERVICES:
        svc = compose["services"][name]
        argv = svc["command"]
        parser.parse_args(argv)  # a typo in a flag would exit here (SystemExit)
        if name in VERB_BY_SERVICE:
            assert argv[0] == VERB_BY_SERVICE[name]
        unknown = {k for k in svc["environment"] if k.startswith("LDP_")} - known
        assert not unknown, f"{name} sets undocumented variables {unknown}"
        assert svc["read_only"] is True and "ALL" in svc["cap_drop"]
    replicas = compose["services"]["aggregator"]["deploy"]["replicas"]
    assert int(replicas) >= 2


def test_declared_collections_load_and_cover_the_simulators(compose: dict[str, Any]) -> None:
    specs = {s.id: s for s in read_collections_file(str(ROOT / "deploy/collections.yaml"))}
    for spec in specs.values():
        spec.oracle()  # builds: mechanism and parameters are valid
    for name in LDP_SERVICES:
        argv = compose["services"][name]["command"]
        if "--collection" in argv:
            assert argv[argv.index("--collection") + 1] in specs


def test_monitoring_files_are_mounted_where_the_configs_expect_them(
        compose: dict[str, Any]) -> None:
    assert _binds(compose["services"]["prometheus"])["deploy/prometheus"] == "/etc/prometheus"
    gm = _binds(compose["services"]["grafana"])
    provider = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/dashboards.yml")
                              .read_text())
    assert provider["providers"][0]["options"]["path"] == gm["deploy/grafana/dashboards"]
    assert gm["deploy/grafana/provisioning"] == "/etc/grafana/provisioning"


def test_configuration_reference_lists_every_variable() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    missing = sorted(v for v in documented_variables() if f"`{v}`" not in page)
    assert not missing, f"docs/configuration.md lacks {missing}"


def test_compose_environment_is_accepted_by_the_services_settings(
        compose: dict[str, Any]) -> None:
    from aggregator.config import WorkerSettings
    from ldpstream.connections import KafkaSecurity
    from query_api.config import ApiSettings

    for name in LDP_SERVICES:
        svc = compose["services"][name]
        env = {k: str(v) for k, v in svc["environment"].items() if v is not None}
        env["LDP_COLLECTIONS_FILE"] = str(ROOT / "deploy" / "collections.yaml")
        verb = svc["command"][0]
        if verb == "aggregate":
            s = WorkerSettings.from_env(env)
            assert s.metrics_host == "0.0.0.0" and s.metrics_port == 9100
        elif verb == "serve":
            assert ApiSettings.from_env(env).host == "0.0.0.0"
        elif verb == "gateway":
            from gateway.config import GatewaySettings
            from ldpstream.settings import ConfigError

            # closed by default: without keys (or the explicit open flag) it refuses
            with pytest.raises(ConfigError, match="LDP_GATEWAY_OPEN"):
                GatewaySettings.from_env(env)
            gw = GatewaySettings.from_env({**env, "LDP_GATEWAY_KEYS": "fleet:k"})
            assert (gw.host, gw.port, gw.access, gw.cors_origins) == (
                "0.0.0.0", 8080, "keys", ("*",))
            assert GatewaySettings.from_env({**env, "LDP_GATEWAY_OPEN": "true"}).access == \
                "open"
            assert gw.tokens == "off"
        elif verb == "issuer":
            from issuer.config import IssuerSettings
            from ldpstream.settings import ConfigError

            with pytest.raises(ConfigError, match="LDP_ISSUER_KEYS"):  # closed by default
                IssuerSettings.from_env(env)
            iss = IssuerSettings.from_env({**env, "LDP_ISSUER_KEYS": "app:k"})
            assert (iss.host, iss.port) == ("0.0.0.0", 8090)
        else:
            KafkaSecurity.from_env(env)


def test_replicated_profile_has_three_voters_sentinels_and_settings_the_services_accept(
        docker_compose: str) -> None:
    """deploy/compose.replicated.yml over docker-compose.yml: 3 KRaft brokers of one
    cluster, RF 3 / min ISR 2, Redis replica + 3 Sentinels, services through them."""
    import base64

    from aggregator.config import WorkerSettings
    from gateway.config import GatewaySettings
    from query_api.config import ApiSettings

    out = run(docker_compose, "-f", "docker-compose.yml", "-f", "deploy/compose.replicated.yml",
              "--profile", "simulator", "config")
    services = yaml.safe_load(out.stdout)["services"]
    brokers = {n: s for n, s in services.items() if n in ("kafka", "kafka-2", "kafka-3")}
    assert len(brokers) == 3
    ids = {str(s["environment"]["KAFKA_NODE_ID"]) for s in brokers.values()}
    assert ids == {"1", "2", "3"}
    for s in brokers.values():
        env = s["environment"]
        assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == (
            "1@kafka:9093,2@kafka-2:9093,3@kafka-3:9093")
        assert str(env["KAFKA_MIN_INSYNC_REPLICAS"]) == "2"
        assert str(env["KAFKA_DEFAULT_REPLICATION_FACTOR"]) == "3"
        assert str(env["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"]) == "false"
        cid = env["CLUSTER_ID"]
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16  # a KRaft cluster id
    assert len({s["environment"]["CLUSTER_ID"] for s in brokers.values()}) == 1
    assert "--replicaof" in services["redis-replica"]["command"]
    sentinels = [n for n in services if n.startswith("sentinel-")]
    assert len(sentinels) == 3
    for n in sentinels:
        assert "sentinel monitor ldp redis 6379 2" in " ".join(services[n]["command"])
    for name in ("aggregator", "api", "gateway"):
        env = {k: str(v) for k, v in services[name]["environment"].items() if v is not None}
        env["LDP_COLLECTIONS_FILE"] = str(ROOT / "deploy" / "collections.yaml")
        if name == "gateway":  # closed by default: it starts with device keys
            env["LDP_GATEWAY_KEYS"] = "fleet:k"
        settings: Any = {"aggregator": WorkerSettings, "api": ApiSettings,
                         "gateway": GatewaySettings}[name].from_env(env)
        opts = settings.redis_options
        assert opts.mode == "sentinel" and opts.master_name == "ldp"
        assert [f"{h}:{p}" for h, p in opts.sentinels] == [f"{n}:26379" for n in sentinels]
        assert len(env["LDP_KAFKA_BOOTSTRAP"].split(",")) == 3
        if name == "aggregator":
            assert (settings.topic_replication, settings.topic_min_isr) == (3, 2)
            assert settings.release_replicas == 1


def test_the_oidc_profile_puts_a_login_in_front_of_the_api(docker_compose: str) -> None:
    out = run(docker_compose, "-f", "docker-compose.yml", "--profile", "oidc", "config")
    services = yaml.safe_load(out.stdout)["services"]
    proxy, api = services["oauth2-proxy"], services["api"]
    assert proxy["profiles"] == ["oidc"] and proxy["image"].startswith(
        "quay.io/oauth2-proxy/oauth2-proxy:v7.")
    assert "--provider=oidc" in proxy["command"] and "--pass-basic-auth=true" in proxy["command"]
    assert "--upstream=http://api:8000/" in proxy["command"]
    assert api["environment"]["LDP_API_PORT"] == "8000"
    # Prometheus scrapes the API's metrics port, which needs no read token
    prom = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "ldp-api")
    assert job["static_configs"][0]["targets"] == [
        f"api:{api['environment']['LDP_API_METRICS_PORT']}"]
    assert _binds(api)["deploy/access"] == "/etc/ldpstream/access"
