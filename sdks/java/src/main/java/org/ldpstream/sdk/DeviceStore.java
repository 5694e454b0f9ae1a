package org.ldpstream.sdk;

import java.io.File;
import java.io.IOException;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The device's private store: its secret, the reporting cadence and the outbox of queued
 * reports — one JSON document (docs/wire-format.md §6, "device store"), the same as the Python
 * and TypeScript SDKs'. It never holds a true value or an answer: permanent answers are
 * derived from the secret. Keys it does not know are kept, so a newer SDK (or the app) may add
 * its own.
 *
 * <p>Every change goes through {@link #update}, which runs a function on the document
 * atomically: no other thread, {@link Device} or process reads or writes in between.
 *
 * <ul>
 *   <li>{@link #defaultStore()}: a {@link FileStore} in the platform's private place — on the
 *       JVM under the user data directory (as Python's platformdirs), on Android in the app's
 *       files directory (or pass {@code DeviceStore.inDirectory(context.getFilesDir())});</li>
 *   <li>{@link MemoryStore}: nothing persists (an app that opts out; tests).</li>
 * </ul>
 */
public abstract class DeviceStore {
  public static final String FORMAT = "ldpstream-device-store";
  public static final long VERSION = 1;
  /** Default bound of the outbox: beyond it the oldest report is dropped (and counted). */
  public static final int QUEUE_LIMIT = 1000;
  /** The file name of the store in a directory ({@link #inDirectory}). */
  public static final String FILE_NAME = "ldpstream-device-store.json";

  private final int queueLimit;

  protected DeviceStore(int queueLimit) {
    if (queueLimit < 1) {
      throw new IllegalArgumentException("queueLimit must be >= 1, got " + queueLimit);
    }
    this.queueLimit = queueLimit;
  }

  /** A change of the document, run under the store's lock. */
  public interface Update<T> {
    T apply(Map<String, Object> doc) throws IOException;
  }

  /** Run {@code fn} on the document under the store's exclusive lock and save what it
   * changed. */
  public abstract <T> T update(Update<T> fn) throws IOException;

  /** Largest number of queued reports (oldest dropped first). */
  public int queueLimit() {
    return queueLimit;
  }

  /** The platform's private store (see the class comment). */
  public static FileStore defaultStore() {
    return new FileStore(Platform.defaultStoreFile(), QUEUE_LIMIT);
  }

  /** A store file in an app-private directory, e.g. Android's {@code context.getFilesDir()}. */
  public static FileStore inDirectory(File dir) {
    return new FileStore(new File(dir, FILE_NAME), QUEUE_LIMIT);
  }

  /** A copy of the queued reports, oldest first. */
  @SuppressWarnings("unchecked")
  public List<Map<String, Object>> outbox() throws IOException {
    return update(new Update<List<Map<String, Object>>>() {
      @Override
      public List<Map<String, Object>> apply(Map<String, Object> doc) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Object e : (List<Object>) doc.get("outbox")) {
          out.add(new LinkedHashMap<>((Map<String, Object>) e));
        }
        return out;
      }
    });
  }

  /** Reports dropped so far because the outbox was full. */
  public long dropped() throws IOException {
    return update(new Update<Long>() {
      @Override
      public Long apply(Map<String, Object> doc) {
        return ((Number) doc.get("dropped")).longValue();
      }
    });
  }

  // ---- the document ----------------------------------------------------------------------
  static Map<String, Object> emptyDocument() {
    Map<String, Object> doc = new LinkedHashMap<>();
    doc.put("format", FORMAT);
    doc.put("version", VERSION);
    doc.put("collections", new LinkedHashMap<String, Object>());
    doc.put("outbox", new ArrayList<Object>());
    doc.put("dropped", 0L);
    doc.put("refused", 0L);
    doc.put("not_before", null);
    return doc;
  }

  /** The document of stored text (null: nothing stored yet), else {@link StoreException}. */
  @SuppressWarnings("unchecked")
  static Map<String, Object> parse(String text, String where) throws StoreException {
    if (text == null || text.isEmpty()) {
      return emptyDocument();
    }
    Object parsed;
    try {
      parsed = Json.parse(text);
    } catch (IllegalArgumentException e) {
      throw new StoreException(where + " is not JSON: " + e.getMessage());
    }
    if (!(parsed instanceof Map)) {
      throw new StoreException(where + " is not a " + FORMAT + " v" + VERSION + " document");
    }
    Map<String, Object> doc = (Map<String, Object>) parsed;
    if (!FORMAT.equals(doc.get("format")) || !Long.valueOf(VERSION).equals(doc.get("version"))) {
      if ("ldpstream-device-memo".equals(doc.get("format"))) {
        throw new StoreException(where + " is a memo file of SDK 0.1 (it holds true values and "
            + "randomly drawn answers): delete it; the device then derives its permanent "
            + "answers from a new secret");
      }
      throw new StoreException(where + " is not a " + FORMAT + " v" + VERSION + " document");
    }
    for (Map.Entry<String, Object> e : emptyDocument().entrySet()) {
      if (!doc.containsKey(e.getKey())) {
        doc.put(e.getKey(), e.getValue());
      }
    }
    if (!(doc.get("collections") instanceof Map) || !(doc.get("outbox") instanceof List)) {
      throw new StoreException(where + ": 'collections' must be an object and 'outbox' a list");
    }
    return doc;
  }

  /** The device secret of {@code doc} (hex), drawn (32 SecureRandom bytes) if it has none. */
  static String ensureSecret(Map<String, Object> doc, DrawSource testOnly) throws StoreException {
    if (!(doc.get("secret") instanceof String)) {
      byte[] raw = new byte[32];
      if (testOnly != null) {
        for (int i = 0; i < 32; i += 4) {
          long w = testOnly.nextU32();
          for (int j = 0; j < 4; j++) {
            raw[i + j] = (byte) (w >>> (8 * j));
          }
        }
      } else {
        new SecureRandom().nextBytes(raw);
      }
      doc.put("secret", Hex.encode(raw));
    }
    String s = (String) doc.get("secret");
    if (!s.matches("([0-9a-f]{2}){16,64}")) {
      throw new StoreException("the store's secret is not 16 to 64 bytes of lower-case hex");
    }
    return s;
  }

  /** Append a report to the outbox, dropping (and counting) the oldest beyond the limit. */
  @SuppressWarnings("unchecked")
  static void push(Map<String, Object> doc, Map<String, Object> entry, int limit) {
    List<Object> box = (List<Object>) doc.get("outbox");
    box.add(entry);
    while (box.size() > limit) {
      box.remove(0);
      doc.put("dropped", ((Number) doc.get("dropped")).longValue() + 1);
    }
  }
}
