package org.ldpstream.sdk;

import java.io.File;

/**
 * One racing process of {@link DeviceTest} (args: store file, tag): 30 reports queued to its
 * own collections, then five attempts at the one report of a shared collection's window.
 * Prints "made answer".
 */
public final class StoreRacer {
  private StoreRacer() {}

  public static void main(String[] args) throws Exception {
    File f = new File(args[0]);
    FileStore store = new FileStore(f);
    for (int i = 0; i < 30; i++) {
      CollectionSpec own = Specs.collection(args[1] + "-" + i, Specs.oracle("grr", 1.0, 3, ""),
          Specs.integers(3), "");
      if (!Device.builder(own).store(store).clock(() -> 60.0).build().enqueue(1L)) {
        throw new IllegalStateException("cadence refused");
      }
    }
    CollectionSpec shared = DeviceTest.spec(",\"window_seconds\":60");
    int made = 0;
    String answer = null;
    for (int i = 0; i < 5; i++) {
      Device d = Device.builder(shared).store(new FileStore(f)).clock(() -> 60.0).build();
      made += d.enqueue("win") ? 1 : 0;
      answer = Json.write(d.permanent("win"));
    }
    System.out.println(made + " " + answer);
  }
}
