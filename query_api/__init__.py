"""HTTP query service: snapshots states from Redis, estimates, post-processes, serves."""
