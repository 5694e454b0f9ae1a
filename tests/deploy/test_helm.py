"""The Helm chart: lint, render with default and non-default values, validate the manifests.

``kubernetes-validate --strict`` checks every built-in kind against the Kubernetes schemas
(offline); ServiceMonitor is a CRD it has no schema for, so its wiring is checked here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import load_collections

from .conftest import CHART, load_all, run
from .test_compose import documented_variables

VALUES = [None, *sorted((CHART / "ci").glob("*-values.yaml"))]
IDS = ["default", *(p.stem for p in VALUES[1:] if p is not None)]


def render(helm: str, values: Path | None, *extra: str, ok: bool = True) -> Any:
    argv = [helm, "template", "rel", str(CHART), "--namespace", "ldp"]
    if values is not None:
        argv += ["-f", str(values)]
    return run(*argv, *extra, ok=ok)


def containers(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(d["metadata"]["name"], c) for d in docs if d["kind"] == "Deployment"
            for c in d["spec"]["template"]["spec"]["containers"]]


@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_chart_lints_strictly(helm: str, values: Path | None) -> None:
    argv = [helm, "lint", str(CHART), "--strict"]
    if values is not None:
        argv += ["-f", str(values)]
    run(*argv)


@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_rendered_manifests_pass_strict_schema_validation(
        helm: str, kubernetes_validate: str, values: Path | None, tmp_path: Path) -> None:
    docs = load_all(render(helm, values).stdout)
    builtin = [d for d in docs if d["kind"] != "ServiceMonitor"]
    out = tmp_path / "manifests.yaml"
    import yaml
    out.write_text(yaml.safe_dump_all(builtin))
    proc = run(kubernetes_validate, "--strict", str(out))
    passed = proc.stdout.count(" passed for resource ")
    assert passed == len(builtin), proc.stdout + proc.stderr


def test_non_default_values_render_every_optional_resource(helm: str) -> None:
    docs = load_all(render(helm, CHART / "ci" / "production-values.yaml").stdout)
    kinds = sorted(d["kind"] for d in docs)
    for kind in ("HorizontalPodAutoscaler", "Ingress", "PodDisruptionBudget",
                 "ServiceMonitor", "ConfigMap", "ServiceAccount"):
        assert kind in kinds
    assert "Secret" not in kinds  # existingSecret: the chart creates none
    hpa = next(d for d in docs if d["kind"] == "HorizontalPodAutoscaler"
               and d["metadata"]["name"].endswith("aggregator"))
    metric_types = {m["type"] for m in hpa["spec"]["metrics"]}
    assert metric_types == {"Resource", "External"}


@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_pods_are_non_root_read_only_probed_and_resourced(
        helm: str, values: Path | None) -> None:
    docs = load_all(render(helm, values).stdout)
    for d in docs:
        if d["kind"] != "Deployment":
            continue
        pod = d["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False
            assert c["resources"]["requests"] and c["resources"]["limits"]
            assert any(m["mountPath"] == "/tmp" for m in c["volumeMounts"])
            if c["name"] != "simulator":
                assert "livenessProbe" in c and "readinessProbe" in c


@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_env_is_documented_unique_and_secrets_come_from_secrets(
        helm: str, values: Path | None) -> None:
    known = documented_variables()
    for name, c in containers(load_all(render(helm, values).stdout)):
        env = [e["name"] for e in c["env"]]
        assert len(env) == len(set(env)), f"{name}: duplicate env {env}"
        undocumented = {e for e in env if e.startswith("LDP_")} - known
        assert not undocumented, f"{name}: {undocumented}"
        for e in c["env"]:
            if e["name"].endswith(("PASSWORD", "TOKEN")):
                assert "secretKeyRef" in e.get("valueFrom", {}), f"{name}: {e['name']} inline"
        if c["name"] == "simulator":  # devices never get Redis credentials
            assert not [e for e in env if e.startswith("LDP_REDIS")]


@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_collections_config_map_holds_valid_specs(helm: str, values: Path | None) -> None:
    import yaml
    docs = load_all(render(helm, values).stdout)
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    specs = load_collections(yaml.safe_load(cm["data"]["collections.yaml"]))
    assert specs
    for spec in specs:
        spec.oracle()


def test_service_monitors_select_services_with_the_named_port(helm: str) -> None:
    docs = load_all(render(helm, CHART / "ci" / "production-values.yaml").stdout)
    services = [d for d in docs if d["kind"] == "Service"]
    monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert len(monitors) == 3  # aggregator, API, gateway
    for m in monitors:
        assert m["apiVersion"] == "monitoring.coreos.com/v1"
        assert m["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        sel = m["spec"]["selector"]["matchLabels"]
        matched = [s for s in services
                   if sel.items() <= s["metadata"]["labels"].items()]
        assert len(matched) == 1, m["metadata"]["name"]
        ports = {p["name"] for p in matched[0]["spec"]["ports"]}
        for ep in m["spec"]["endpoints"]:
            assert ep["port"] in ports and ep["path"] == "/metrics"


def test_services_select_the_pods_of_their_component(helm: str) -> None:
    docs = load_all(render(helm, None).stdout)
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    for svc in (d for d in docs if d["kind"] == "Service"):
        sel = svc["spec"]["selector"]
        targets = [n for n, d in deployments.items()
                   if sel.items() <= d["spec"]["template"]["metadata"]["labels"].items()]
        assert len(targets) == 1, svc["metadata"]["name"]
        ports = {p["name"] for c in deployments[targets[0]]["spec"]["template"]["spec"]
                 ["containers"] for p in c.get("ports", [])}
        for p in svc["spec"]["ports"]:
            assert p["targetPort"] in ports


def test_sasl_without_a_password_fails_naming_the_value(helm: str) -> None:
    proc = render(helm, None, "--set", "kafka.securityProtocol=SASL_SSL",
                  "--set", "kafka.sasl.username=u", ok=False)
    assert proc.returncode != 0 and "kafka.sasl.password" in proc.stderr


def test_more_workers_than_partitions_fails_naming_the_values(helm: str) -> None:
    proc = render(helm, None, "--set", "aggregator.autoscaling.enabled=true",
                  "--set", "aggregator.autoscaling.maxReplicas=64", ok=False)
    assert proc.returncode != 0 and "kafka.topicPartitions" in proc.stderr


def test_every_value_is_documented() -> None:
    # helm-docs convention: a "# --" comment right above a key documents it and all it holds;
    # every leaf value must be documented itself or through an ancestor.
    undocumented, stack = [], []  # stack of (indent, documented)
    previous = ""
    for line in (CHART / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("-"):
            previous = stripped or previous
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key, _, value = stripped.partition(":")
        documented = previous.startswith("#") or any(doc for _, doc in stack)
        stack.append((indent, documented))
        if value.strip() not in ("", "|") and not documented:
            undocumented.append(key)
        previous = stripped
    assert not undocumented, undocumented


@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_rendered_environment_is_accepted_by_the_services_settings(
        helm: str, values: Path | None, tmp_path: Path) -> None:
    # Every container's env, with secrets filled in and mounted files created, must pass
    # the same start-up validation the processes run (a typo would crash-loop the pods).
    from aggregator.config import WorkerSettings
    from ldpstream.connections import KafkaSecurity
    from query_api.config import ApiSettings

    for name, c in containers(load_all(render(helm, values).stdout)):
        env: dict[str, str] = {}
        for e in c["env"]:
            if "value" in e:
                env[e["name"]] = str(e["value"])
            else:
                env[e["name"]] = "secret-from-" + e["valueFrom"]["secretKeyRef"]["key"]
        for key, val in list(env.items()):
            if val.startswith("/etc/ldpstream/") and key != "LDP_COLLECTIONS_FILE":
                f = tmp_path / key
                f.write_text(f"{'0' * 64}\n" if key == "LDP_READ_TOKENS"  # a token hash
                             else "-----BEGIN CERTIFICATE-----\n")
                env[key] = str(f)
        env["LDP_COLLECTIONS_FILE"] = str(tmp_path / "collections.yaml")
        (tmp_path / "collections.yaml").write_text("collections: []\n")
        verb = c["args"][0]
        if verb == "aggregate":
            WorkerSettings.from_env(env)
        elif verb == "serve":
            ApiSettings.from_env(env)
        elif verb == "gateway":
            from gateway.config import GatewaySettings

            env["LDP_GATEWAY_KEYS"] = "fleet:secret-from-gateway-keys"
            GatewaySettings.from_env(env)
        elif verb == "issuer":
            from issuer.config import IssuerSettings

            env["LDP_ISSUER_KEYS"] = "fleet:" + env["LDP_ISSUER_KEYS"]  # a key from the Secret
            assert IssuerSettings.from_env(env).host == "0.0.0.0"
        else:
            KafkaSecurity.from_env(env)


@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_the_gateway_gets_its_limits_and_a_front_that_terminates_tls(
        helm: str, values: Path | None) -> None:
    from gateway.config import GatewaySettings

    docs = load_all(render(helm, values).stdout)
    gw = next(c for name, c in containers(docs) if name.endswith("-gateway"))
    env = {e["name"]: str(e["value"]) for e in gw["env"] if "value" in e}
    for key in ("LDP_GATEWAY_HEAD_TIMEOUT", "LDP_GATEWAY_BODY_MIN_RATE",
                "LDP_GATEWAY_BODY_GRACE", "LDP_GATEWAY_IDLE_TIMEOUT", "LDP_GATEWAY_MAX_HEAD",
                "LDP_GATEWAY_MAX_HEADERS", "LDP_GATEWAY_MAX_TARGET", "LDP_GATEWAY_BODY_BUDGET",
                "LDP_GATEWAY_MAX_CONNECTIONS", "LDP_GATEWAY_AUTH_FAIL_BURST",
                "LDP_GATEWAY_AUTH_FAIL_RATE"):
        assert key in env, key
    # (the whole environment passes GatewaySettings in the test above)
    limits = {k: v for k, v in env.items() if k.startswith("LDP_GATEWAY_")}
    limits["LDP_GATEWAY_KEYS"] = "fleet:a-key-from-the-secret"  # closed by default
    settings = GatewaySettings.from_env(limits)
    assert settings.head_timeout <= 10 and settings.body_budget >= settings.max_body
    ingresses = [d for d in docs if d["kind"] == "Ingress"
                 and d["metadata"]["name"].endswith("-gateway")]
    if values is not None and values.stem == "production-values":
        (ing,) = ingresses
        assert ing["spec"]["tls"]
        assert "nginx.ingress.kubernetes.io/limit-connections" in ing["metadata"]["annotations"]
        assert settings.trusted_proxies == ("10.0.0.0/8",)
    else:
        assert not ingresses
def test_replicated_values_point_every_service_at_the_sentinels_and_a_redis_cluster_too(
        helm: str) -> None:
    from aggregator.config import WorkerSettings

    docs = load_all(render(helm, CHART / "ci" / "replicated-values.yaml").stdout)
    for name, c in containers(docs):
        env = {e["name"]: str(e.get("value", "")) for e in c["env"]}
        if c["args"][0] in ("aggregate", "serve", "gateway"):
            assert env["LDP_REDIS_MASTER_NAME"] == "mymaster", name
            assert len(env["LDP_REDIS_SENTINELS"].split(",")) == 3, name
        if c["args"][0] == "aggregate":
            assert (env["LDP_TOPIC_REPLICATION"], env["LDP_TOPIC_MIN_ISR"],
                    env["LDP_RELEASE_REPLICAS"]) == ("3", "2", "1")
            env["LDP_REDIS_PASSWORD"] = "x"
            s = WorkerSettings.from_env({k: v for k, v in env.items()
                                         if k != "LDP_COLLECTIONS_FILE"})
            assert s.redis_options.mode == "sentinel" and s.topic_min_isr == 2
    cluster = load_all(render(helm, None, "--set", "redis.cluster=r-0:6379\\,r-1:6379").stdout)
    envs = [{e["name"]: e.get("value") for e in c["env"]} for _, c in containers(cluster)]
    assert any(e.get("LDP_REDIS_CLUSTER") == "r-0:6379,r-1:6379" for e in envs)
    both = render(helm, None, "--set", "redis.cluster=r:1", "--set", "redis.sentinels=s:2",
                  ok=False)
    assert both.returncode != 0 and "cannot both be set" in both.stderr


def test_read_tokens_come_from_the_secret_as_a_rotatable_file_and_metrics_move_port(
        helm: str) -> None:
    docs = load_all(render(helm, CHART / "ci" / "production-values.yaml").stdout)
    api = next(c for n, c in containers(docs) if n.endswith("-api"))
    env = {e["name"]: e for e in api["env"]}
    path = env["LDP_READ_TOKENS"]["value"]
    mount = next(m for m in api["volumeMounts"] if m["name"] == "read-tokens")
    # no subPath: the kubelet updates a whole-directory Secret mount, the API re-reads it
    assert "subPath" not in mount and path.startswith(mount["mountPath"] + "/")
    pod = next(d for d in docs if d["kind"] == "Deployment"
               and d["metadata"]["name"].endswith("-api"))["spec"]["template"]["spec"]
    vol = next(v for v in pod["volumes"] if v["name"] == "read-tokens")
    assert vol["secret"]["items"] == [{"key": "read-tokens", "path": path.rsplit("/", 1)[1]}]
    assert env["LDP_API_METRICS_PORT"]["value"] == "9101"
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor"
                   and d["metadata"]["name"].endswith("-api"))
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


def test_the_ingress_points_at_the_oidc_proxy_which_forwards_to_the_api(helm: str) -> None:
    docs = load_all(render(helm, CHART / "ci" / "production-values.yaml").stdout)
    ingress = next(d for d in docs if d["kind"] == "Ingress")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"].endswith("-oidc-proxy")
    proxy = next(c for n, c in containers(docs) if n.endswith("-oidc-proxy"))
    args = proxy["args"]
    assert "--provider=oidc" in args and "--pass-basic-auth=true" in args
    api_svc = next(d for d in docs if d["kind"] == "Service"
                   and d["metadata"]["name"].endswith("-api"))
    assert f"--upstream=http://{api_svc['metadata']['name']}:80/" in args
    env = {e["name"]: e for e in proxy["env"]}
    assert env["OAUTH2_PROXY_BASIC_AUTH_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == \
        "oidc-read-token"


@pytest.mark.parametrize(("flags", "named"), [
    (["api.readTokens.enabled=true"], "api.metricsPort"),
    (["api.readTokens.enabled=true", "api.metricsPort=9101"], "api.readTokens.hashes"),
    (["oidcProxy.enabled=true", "oidcProxy.issuerUrl=https://x", "oidcProxy.clientId=c"],
     "oidcProxy.clientSecret"),
])
def test_incomplete_access_settings_fail_naming_the_value(
        helm: str, flags: list[str], named: str) -> None:
    extra = [arg for f in flags for arg in ("--set", f)]
    proc = render(helm, None, *extra, ok=False)
    assert proc.returncode != 0 and named in proc.stderr


@pytest.mark.parametrize(("flags", "want"), [
    ([], "false"), (["gateway.open=true"], "true")])
def test_the_gateway_is_closed_unless_keys_come_from_the_secret_or_it_is_opened(
        helm: str, flags: list[str], want: str) -> None:
    docs = load_all(render(helm, None, *[a for f in flags for a in ("--set", f)]).stdout)
    gw = next(c for n, c in containers(docs) if n.endswith("-gateway"))
    env = {e["name"]: e for e in gw["env"]}
    assert env["LDP_GATEWAY_OPEN"]["value"] == want
    assert env["LDP_GATEWAY_KEYS"]["valueFrom"]["secretKeyRef"]["key"] == "gateway-keys"
    assert env["LDP_GATEWAY_HOST"]["value"] == "0.0.0.0"  # so only keys or the flag open it
