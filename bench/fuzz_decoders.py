"""Coverage-guided fuzzing of every message decoder with atheris (libFuzzer).

The contract under test: for any bytes, ``peek_message``, ``decode_message`` (binary
and JSON, every mechanism) and :class:`~ldpcore.message.MessageDecoder` raise only
``ReportError``, its reason is one of ``REPORT_REASONS``, and the decoders' own checks
catch it (the last-resort catch-all never fires).  Any other exception is a crash
that libFuzzer reports with the input that caused it.

    pip install -e ".[fuzz]"
    python bench/fuzz_decoders.py -max_total_time=60          # libFuzzer flags pass through
    python bench/fuzz_decoders.py -runs=200000 corpus_dir/

The seed corpus (valid binary and JSON messages of every mechanism) is written to a
temporary directory unless a corpus directory is given.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris
import numpy as np

with atheris.instrument_imports():
    from ldpcore import ReportError
    from ldpcore.collection import CollectionSpec, message_prefix
    from ldpcore.errors import REPORT_REASONS
    from ldpcore.message import MessageDecoder, message_report_count, peek_message

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.message_cases import specs, valid_message  # noqa: E402

SPECS: list[CollectionSpec] = specs()
DECODERS = [MessageDecoder(s) for s in SPECS]


def _check(call: object, *args: object) -> None:
    try:
        call(*args)  # type: ignore[operator]
    except ReportError as exc:
        if exc.reason not in REPORT_REASONS or str(exc).startswith("undecodable message"):
            raise AssertionError(f"unclean ReportError: {exc.reason}: {exc}") from exc


def one_input(data: bytes) -> None:
    if not data:
        return
    dec = DECODERS[data[0] % len(DECODERS)]
    body = data[1:]
    # Let the fuzzer reach past the envelope: half the time, put the real one in front.
    if data[0] & 0x80:
        body = message_prefix(dec.spec) + body
    _check(peek_message, body)
    _check(dec.aggregate, body)
    _check(dec.aggregate_many, [body, body[:len(body) // 2]])
    message_report_count(body)


def main() -> None:
    args = sys.argv[1:]
    if not any(not a.startswith("-") for a in args):
        corpus = Path(tempfile.mkdtemp(prefix="ldp-fuzz-"))
        rng = np.random.default_rng(0)
        for i, spec in enumerate(SPECS):
            for fmt in ("binary", "json"):
                msg = valid_message(spec, rng, fmt)
                (corpus / f"{spec.id}-{fmt}").write_bytes(bytes([i]) + msg)
        args.append(str(corpus))
    atheris.Setup([sys.argv[0], *args], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
