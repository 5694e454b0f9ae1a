"""Frequency oracles: one module per mechanism."""
