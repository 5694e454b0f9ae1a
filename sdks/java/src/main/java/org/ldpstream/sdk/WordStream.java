package org.ldpstream.sdk;

/** A fixed list of words (test vectors); throws when exhausted. */
final class WordStream implements DrawSource {
  private final long[] words;
  private int used;

  public WordStream(long[] words) {
    this.words = words.clone();
  }

  /** Words consumed so far. */
  public int used() {
    return used;
  }

  @Override
  public long nextU32() {
    if (used >= words.length) {
      throw new IllegalStateException("word stream exhausted after " + used + " words");
    }
    return words[used++];
  }
}
