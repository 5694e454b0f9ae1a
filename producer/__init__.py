"""Device side: the SDK (perturb, memoize, publish) and the simulator."""
