"""Developer tooling: the embedded servers (tansu broker, Redis) and ``ldpstream up``."""
