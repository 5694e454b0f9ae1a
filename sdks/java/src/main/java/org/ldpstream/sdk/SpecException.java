package org.ldpstream.sdk;

/**
 * A collection spec the SDK refuses: malformed, altered (its fingerprint), or outside the
 * parameter ranges ldpcore accepts (GRR with ε = 40 would send the raw value).
 */
public final class SpecException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;
  private final String parameter;

  public SpecException(String message, String parameter) {
    super(message);
    this.parameter = parameter;
  }

  /** The offending key, e.g. {@code "oracle.epsilon"}, or null for the spec as a whole. */
  public String parameter() {
    return parameter;
  }
}
