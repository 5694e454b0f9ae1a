package org.ldpstream.sdk;

import java.io.IOException;
import java.util.Map;

/**
 * Keeps nothing across restarts: every new instance is a new device, with new permanent
 * answers. Only for apps that keep the secret elsewhere ({@link Device.Builder#secret}), tests
 * and simulations — averaging the answers of several starts reveals the true value.
 */
public final class MemoryStore extends DeviceStore {
  private String text = null;

  public MemoryStore() {
    this(QUEUE_LIMIT);
  }

  public MemoryStore(int queueLimit) {
    super(queueLimit);
  }

  @Override
  public synchronized <T> T update(Update<T> fn) throws IOException {
    Map<String, Object> doc = parse(text, "memory store");
    T out = fn.apply(doc);
    text = Json.write(doc);
    return out;
  }
}
