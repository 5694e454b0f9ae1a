package org.ldpstream.sdk;

import java.io.IOException;

/** The device store is not readable as a device store (it is left untouched). */
public final class StoreException extends IOException {
  private static final long serialVersionUID = 1L;

  public StoreException(String message) {
    super(message);
  }
}
