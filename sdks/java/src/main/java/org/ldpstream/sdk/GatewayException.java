package org.ldpstream.sdk;

import java.io.IOException;

/** A refusal by the gateway (not retried), or the last failure after all retries. */
public final class GatewayException extends IOException {
  private static final long serialVersionUID = 1L;
  /** HTTP status, or -1 for a network error. */
  public final int status;
  /** The gateway's reason (e.g. "fingerprint"), or null. */
  public final String reason;
  /** Index of the offending message in a batch, or -1. */
  public final long index;

  public GatewayException(String message, int status, String reason, long index, Throwable cause) {
    super(message, cause);
    this.status = status;
    this.reason = reason;
    this.index = index;
  }
}
