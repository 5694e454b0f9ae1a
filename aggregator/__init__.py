"""Aggregator: consumes report batches from Kafka, counts them exactly once into Redis."""
