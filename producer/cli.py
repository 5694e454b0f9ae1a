"""``ldpstream simulate``: play N devices publishing perturbed reports to Kafka.

Flags default to these variables (Kafka security: :mod:`ldpstream.connections`):

====================  ==============  ============================================
variable              default         meaning
====================  ==============  ============================================
LDP_COLLECTIONS_FILE  (unset)         ``--collections-file``: the collections file
LDP_KAFKA_BOOTSTRAP   127.0.0.1:9092  ``--kafka``: bootstrap servers
LDP_REPORTS_TOPIC     ldp-reports     ``--topic``: the report topic
LDP_DEVICE_KEY        (unset)         ``--gateway-key``: device key for the gateway
====================  ==============  ============================================
"""

from __future__ import annotations

import argparse
import os

__all__ = ["add_simulate_parser", "cmd_simulate"]


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"batch sizes must be integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("batch sizes must be >= 1")
    return sizes


# Devices come and go: the population the `ldpstream up` demo devices follow.
DEFAULT_CHURN = 0.05
DEFAULT_PRESENCE = 0.9


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def _presence(text: str) -> float:
    value = _fraction(text)
    if value == 0.0:
        raise argparse.ArgumentTypeError("presence must be in (0, 1], got 0")
    return value


def add_simulate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("simulate", help="simulated devices publish perturbed reports to Kafka "
                                        "(or post them to the gateway)")
    p.add_argument("--collection", help="collection id (required if the file declares several)")
    p.add_argument("--collections-file", default=os.environ.get("LDP_COLLECTIONS_FILE"),
                   help="YAML/JSON collections file (default $LDP_COLLECTIONS_FILE)")
    p.add_argument("--api", help="fetch the spec from the query API at this URL instead")
    p.add_argument("--kafka", default=os.environ.get("LDP_KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    p.add_argument("--topic", default=os.environ.get("LDP_REPORTS_TOPIC", "ldp-reports"))
    p.add_argument("--gateway", default=None, metavar="URL",
                   help="post to the HTTP ingestion gateway at URL (e.g. http://127.0.0.1:8080)"
                        " instead of publishing to Kafka")
    p.add_argument("--gateway-key", default=os.environ.get("LDP_DEVICE_KEY"),
                   help="device key for the gateway (default $LDP_DEVICE_KEY)")
    p.add_argument("--reports", type=int, default=100_000, help="reports to send")
    p.add_argument("--devices", type=int, default=None,
                   help="device population (default: one device per report); each device "
                        "reports at most once per collection window")
    p.add_argument("--churn", type=_fraction, default=DEFAULT_CHURN,
                   help="fraction of the devices replaced by new ones (new value, new memo) "
                        f"at every window (default {DEFAULT_CHURN})")
    p.add_argument("--presence", type=_presence, default=DEFAULT_PRESENCE,
                   help="probability that a device reports in a given window "
                        f"(default {DEFAULT_PRESENCE})")
    p.add_argument("--dist", default="zipf:1.1",
                   help="zipf:s | uniform | geometric:p | cauchy:center,height | hist:PATH[:NAME]; "
                        "set-valued collections: zipf:s | zipfsets:s,mean (Zipf items, "
                        "Geometric set lengths: producer/simulate_sets.py)")
    p.add_argument("--batch-size", type=_sizes, default=[512],
                   help="reports per Kafka message; a comma list cycles (e.g. 1,64,512)")
    p.add_argument("--rate", type=float, default=None, help="reports/s (default: max speed)")
    p.add_argument("--seed", type=int, default=None, help="fixed seed (reproducible run)")
    p.add_argument("--format", choices=("binary", "json"), default="binary")
    p.add_argument("--truth", default=None, help="write ground-truth counts (JSON) here")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_simulate)


def cmd_simulate(args: argparse.Namespace) -> int:
    from .sdk import Client, GatewayClient, fetch_spec, load_spec
    from .simulate import simulate, write_truth

    if args.api:
        if not args.collection:
            raise SystemExit("--api needs --collection")
        spec = fetch_spec(args.api, args.collection)
    elif args.collections_file:
        spec = load_spec(args.collections_file, args.collection)
    else:
        raise SystemExit("give --collections-file (or LDP_COLLECTIONS_FILE) or --api")
    from ldpstream.connections import KafkaSecurity

    client: Client | GatewayClient
    if args.gateway:
        client = GatewayClient(args.gateway, fmt=args.format, key=args.gateway_key)
    else:
        security = KafkaSecurity.from_env()  # LDP_KAFKA_SECURITY_PROTOCOL, SASL, TLS files
        client = Client(args.kafka, args.topic, fmt=args.format, **security.kafka_python())
    with client:
        result = simulate(spec, lambda batch: client.send(spec, batch), dist=args.dist,
                          reports=args.reports, devices=args.devices,
                          batch_sizes=args.batch_size, seed=args.seed, rate=args.rate,
                          progress=not args.no_progress, churn=args.churn,
                          presence=args.presence)
        client.flush()
    print(f"collection {spec.id} ({spec.oracle_spec['mechanism']}, "
          f"epsilon={spec.oracle_spec['epsilon']}): {result.summary()}")
    if args.truth:
        write_truth(args.truth, spec, result, dist=args.dist, seed=args.seed)
        print(f"ground truth written to {args.truth}")
    return 0
