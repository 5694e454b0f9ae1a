"""The HTTP ingestion gateway: devices without Kafka post report messages over HTTP.

``POST /v1/reports`` takes one binary message, a batch of framed binary messages or
JSON messages (:mod:`gateway.parse`), checks them against the collection catalogue,
re-batches the accepted reports per collection into Kafka messages and answers 202
once the broker has acknowledged them (:mod:`gateway.batcher`).  The HTTP side is a
lean asyncio protocol (:mod:`gateway.server`); start-up and the catalogue cache are in
:mod:`gateway.app`; settings in :mod:`gateway.config`.  The contract: ``docs/gateway.md``.
"""
