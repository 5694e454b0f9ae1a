package org.ldpstream.sdk;

/** One report column: a scalar, or a bitmask of {@code bits} bits when bits &gt; 0. */
final class Column {
  public final String name;
  public final String dtype;
  public final int bits;

  Column(String name, String dtype, int bits) {
    this.name = name;
    this.dtype = dtype;
    this.bits = bits;
  }

  /** Bytes per report in the binary batch. */
  public int perReport() {
    if (bits > 0) {
      return (bits + 7) / 8;
    }
    return "uint8".equals(dtype) ? 1 : "uint16".equals(dtype) ? 2 : 4;
  }
}
