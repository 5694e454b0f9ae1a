package org.ldpstream.sdk;

/** A source of uniform 32-bit words (docs/wire-format.md §4). */
interface DrawSource {
  /** The next word, in [0, 2^32). */
  long nextU32();
}
