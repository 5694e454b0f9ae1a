"""The two drivers of :class:`aggregator.accumulator.Accumulator`: Faust (default) and aiokafka."""
