"""Servers for local runs and tests, started by the top floor (:mod:`ldpctl`) and the test
fixtures: the embedded broker and Redis, Apache Kafka, the replicated cluster's servers,
the containers backend.  Nothing here imports or starts a service."""
