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
  /** For 429/503: how long the gateway asked to wait (ms), else -1. */
  public final long retryAfterMs;

  public GatewayException(String message, int status, String reason, long index, Throwable cause) {
    this(message, status, reason, index, cause, -1);
  }

  public GatewayException(String message, int status, String reason, long index, Throwable cause,
                          long retryAfterMs) {
    super(message, cause);
    this.status = status;
    this.reason = reason;
    this.index = index;
    this.retryAfterMs = retryAfterMs;
  }
}
