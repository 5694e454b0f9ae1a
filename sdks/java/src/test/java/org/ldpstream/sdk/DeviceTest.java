package org.ldpstream.sdk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.ldpstream.sdk.Specs.categories;
import static org.ldpstream.sdk.Specs.collection;
import static org.ldpstream.sdk.Specs.integers;
import static org.ldpstream.sdk.Specs.oracle;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Device: permanent answers from the secret, cadence and queue in the store, refused specs. */
class DeviceTest {
  static CollectionSpec spec(String extra) {
    return collection("os", oracle("grr", 1.0, 3, ""), categories("linux", "mac", "win"), extra);
  }

  static Device device(CollectionSpec s, DeviceStore store) {
    return Device.builder(s).store(store).build();
  }

  /** Reports hold int[] bitmasks: compare their JSON. */
  static String json(Map<String, Object> report) {
    return Json.write(report);
  }

  @Test
  void permanentMemoizationResendsTheSameAnswer() throws IOException {
    Device dev = device(spec(""), new MemoryStore());
    Map<String, Object> first = dev.report("mac");
    for (int i = 0; i < 50; i++) {
      assertEquals(first, dev.report("mac"));
    }
  }

  @Test
  void aRestartOnTheSameStoreDerivesTheSameAnswers(@TempDir Path dir) throws IOException {
    CollectionSpec s = collection("u", oracle("oue", 1.0, 8, ""), integers(8), "");
    File f = dir.resolve("store.json").toFile();
    String[] first = new String[8];
    for (int v = 0; v < 8; v++) {
      first[v] = json(device(s, new FileStore(f)).report((long) v));
    }
    for (int reload = 0; reload < 5; reload++) {
      Device dev = device(s, new FileStore(f));
      for (int v = 0; v < 8; v++) {
        assertEquals(first[v], json(dev.report((long) v)));
      }
    }
    String[] other = new String[8];
    Device fresh = device(s, new MemoryStore());
    for (int v = 0; v < 8; v++) {
      other[v] = json(fresh.report((long) v));
    }
    assertFalse(Arrays.equals(first, other)); // a new store is a new device (P < 1e-10)
    String text = new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8);
    assertTrue(text.matches(".*\"secret\":\"[0-9a-f]{64}\".*"), text);
    assertFalse(text.contains("answers"), text);
  }

  @Test
  void memoizationNoneDrawsAFreshAnswerPerReport() throws IOException {
    Device dev = device(spec(",\"memoization\":\"none\""), new MemoryStore());
    Set<Object> seen = new HashSet<>();
    for (int i = 0; i < 200; i++) {
      seen.add(dev.report("mac").get("y"));
    }
    assertEquals(3, seen.size()); // P(a value never drawn in 200) < 1e-20
  }

  @Test
  void twoLevelReRandomizesEveryReport() throws IOException {
    CollectionSpec s = collection("tl", oracle("oue", 4.0, 16, ""), integers(16),
        ",\"memoization\":\"two-level\",\"epsilon_1\":1.0");
    Device dev = device(s, new MemoryStore());
    Set<String> seen = new HashSet<>();
    for (int i = 0; i < 20; i++) {
      seen.add(json(dev.report(3L)));
    }
    assertTrue(seen.size() > 1);
  }

  @Test
  void theCadenceAllowsReportsPerWindowMessages() throws IOException {
    final double[] now = {120.0};
    Device dev = Device.builder(spec(",\"reports_per_window\":2,\"window_seconds\":60"))
        .store(new MemoryStore()).clock(() -> now[0]).build();
    assertNotNull(dev.message("mac"));
    now[0] = 121.0;
    assertNotNull(dev.message("mac"));
    now[0] = 179.9;
    assertNull(dev.message("mac"));
    assertFalse(dev.canReport());
    now[0] = 180.0;
    assertNotNull(dev.messageJson("mac"));
  }

  @Test
  void enqueueQueuesTheMessageBoundedOldestDropped() throws IOException {
    MemoryStore store = new MemoryStore(3);
    final double[] now = {0};
    Device dev = Device.builder(spec(",\"window_seconds\":60")).store(store)
        .clock(() -> now[0]).build();
    for (int w = 0; w < 5; w++) {
      now[0] = 60 * w;
      assertTrue(dev.enqueue("mac"));
    }
    now[0] += 1;
    assertFalse(dev.enqueue("mac"));
    List<Map<String, Object>> box = store.outbox();
    assertEquals(3, box.size());
    assertEquals(Arrays.asList(120L, 180L, 240L), Arrays.asList(box.get(0).get("window"),
        box.get(1).get("window"), box.get(2).get("window")));
    assertEquals(2, store.dropped());
    assertEquals("application/octet-stream", box.get(0).get("type"));
  }

  /** Racers on one store: {@code threads} threads, each with its own FileStore and Devices. */
  static void race(final File f, int threads) throws Exception {
    final CollectionSpec shared = spec(",\"window_seconds\":60");
    final int[] made = new int[threads];
    final Set<String> answers = java.util.Collections.synchronizedSet(new HashSet<String>());
    Thread[] ts = new Thread[threads];
    final java.util.concurrent.CyclicBarrier start = new java.util.concurrent.CyclicBarrier(threads);
    final List<Throwable> failed = java.util.Collections.synchronizedList(
        new java.util.ArrayList<Throwable>());
    for (int t = 0; t < threads; t++) {
      final int me = t;
      ts[t] = new Thread(() -> {
        try {
          start.await();
          FileStore store = new FileStore(f);
          for (int i = 0; i < 20; i++) {
            CollectionSpec own = collection("t" + me + "-" + i, oracle("grr", 1.0, 3, ""),
                integers(3), "");
            if (!Device.builder(own).store(store).clock(() -> 60.0).build().enqueue(1L)) {
              throw new AssertionError("cadence refused");
            }
          }
          for (int i = 0; i < 3; i++) {
            Device d = Device.builder(shared).store(new FileStore(f)).clock(() -> 60.0).build();
            made[me] += d.enqueue("win") ? 1 : 0;
            answers.add(json(d.permanent("win")));
          }
        } catch (Throwable e) {
          failed.add(e);
        }
      });
      ts[t].start();
    }
    for (Thread t : ts) {
      t.join(120_000);
    }
    assertEquals(java.util.Collections.emptyList(), failed);
    assertEquals(1, Arrays.stream(made).sum()); // one report in the window, for all of them
    assertEquals(1, answers.size()); // one secret, one permanent answer
  }

  @Test
  @SuppressWarnings("unchecked")
  void threadsOnOneStoreFileLoseNothingAndAgree(@TempDir Path dir) throws Exception {
    File f = dir.resolve("store.json").toFile();
    race(f, 12);
    Map<String, Object> doc = (Map<String, Object>) Json.parse(
        new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8));
    assertEquals(12 * 20 + 1, ((List<Object>) doc.get("outbox")).size());
    assertEquals(12 * 20 + 1, ((Map<String, Object>) doc.get("collections")).size());
  }

  @Test
  @SuppressWarnings("unchecked")
  void twoProcessesOnOneStoreFileLoseNothingAndAgree(@TempDir Path dir) throws Exception {
    File f = dir.resolve("store.json").toFile();
    String cp = System.getProperty("surefire.test.class.path",
        System.getProperty("java.class.path"));
    String java = System.getProperty("java.home") + File.separator + "bin" + File.separator
        + "java";
    Process[] ps = new Process[2];
    for (int i = 0; i < 2; i++) {
      ps[i] = new ProcessBuilder(java, "-cp", cp, "org.ldpstream.sdk.StoreRacer", f.getPath(),
          "p" + i).redirectErrorStream(true).start();
    }
    Set<String> answers = new HashSet<>();
    int made = 0;
    for (Process p : ps) {
      String out = new String(Io.readAll(p.getInputStream()), StandardCharsets.UTF_8).trim();
      assertEquals(0, p.waitFor(), out);
      String[] parts = out.split(" ", 2);
      made += Integer.parseInt(parts[0]);
      answers.add(parts[1]);
    }
    assertEquals(1, made);
    assertEquals(1, answers.size());
    Map<String, Object> doc = (Map<String, Object>) Json.parse(
        new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8));
    assertEquals(2 * 30 + 1, ((List<Object>) doc.get("outbox")).size());
  }

  @Test
  void unsafeSpecsAreRefusedNamingTheParameter() {
    for (double eps : new double[] {40, 1000, 29.81, 0.0005, Double.NaN}) {
      String e = Double.isNaN(eps) ? "\"NaN\"" : Double.toString(eps);
      SpecException x = assertThrows(SpecException.class,
          () -> collection("x", oracle("grr", e, 3, ""), categories("a", "b", "c"), ""), e);
      assertEquals("oracle.epsilon", x.parameter());
      if (!Double.isNaN(eps)) {
        assertTrue(x.getMessage().contains("[0.001, 29.8] for grr"), x.getMessage());
      }
    }
    assertNotNull(collection("x", oracle("grr", 29.8, 3, ""), categories("a", "b", "c"), ""));
    SpecException oue = assertThrows(SpecException.class,
        () -> collection("o", oracle("oue", 9.8, 4, ""), integers(4), ""));
    assertTrue(oue.getMessage().contains("9.7"), oue.getMessage());
  }

  @Test
  void onlyTheCsprngDrawsUnlessATestSourceIsInjected() throws IOException {
    Device fixed = Device.builder(spec(",\"memoization\":\"none\"")).store(new MemoryStore())
        .testOnlyDraws(new WordStream(new long[64])).build();
    assertEquals(2L, fixed.report("win").get("y")); // uniform() = 0 < p: the value is kept
    Device real = device(spec(",\"memoization\":\"none\""), new MemoryStore());
    Set<Object> ys = new HashSet<>();
    for (int i = 0; i < 100; i++) {
      ys.add(real.report("win").get("y"));
    }
    assertEquals(3, ys.size());
  }

  @Test
  void theDefaultStoreIsUnderTheUserDataDirectory() {
    assertEquals(new File("/x/data"), Platform.userDataDir("Linux", "/x/data", null, "/home/u"));
    assertEquals(new File("/home/u/.local/share"), Platform.userDataDir("Linux", null, null,
        "/home/u"));
    assertEquals(new File("/home/u/Library/Application Support"),
        Platform.userDataDir("Mac OS X", null, null, "/home/u"));
    String xdg = System.getenv("XDG_DATA_HOME");
    if (xdg != null && !xdg.isEmpty()) {
      assertEquals(new File(new File(xdg, "ldpstream"), "device-store.json"),
          DeviceStore.defaultStore().file());
    }
  }

  @Test
  void aCorruptStoreIsRefusedNotReplaced(@TempDir Path dir) throws IOException {
    File f = dir.resolve("s.json").toFile();
    String old = "{\"format\":\"ldpstream-device-memo\",\"version\":1,\"collections\":{}}";
    Files.write(f.toPath(), old.getBytes(StandardCharsets.UTF_8));
    StoreException e = assertThrows(StoreException.class,
        () -> device(spec(""), new FileStore(f)).enqueue("mac"));
    assertTrue(e.getMessage().contains("SDK 0.1"), e.getMessage());
    assertEquals(old, new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8));
  }

  @Test
  void secureRandomWordsAreUniform() {
    SecureRandomSource src = new SecureRandomSource();
    int n = 160000;
    int[] counts = new int[16];
    for (int i = 0; i < n; i++) {
      counts[(int) (src.nextU32() >>> 28)]++;
    }
    double sd = Math.sqrt(n / 16.0 * (15 / 16.0));
    for (int c : counts) {
      assertTrue(Math.abs(c - n / 16.0) < 6 * sd, Arrays.toString(counts));
    }
    long[] fixed = {0xFFFFFFFFL, 0xFFFFFFFFL};
    assertEquals(1 - Math.pow(2, -53), Draws.uniform(new WordStream(fixed)));
    WordStream ws = new WordStream(new long[] {0xFFFFFFFFL, 10});
    assertEquals(1, Draws.below(ws, 3));
    assertEquals(2, ws.used());
    assertEquals(2096804712593481934L, Pcg64.pcg64Words(12345, 1)[0] >>> 1);
  }

  @Test
  void aSetValuedDeviceDerivesOneAnswerPerSet() throws IOException {
    CollectionSpec s = collection("apps", oracle("ps", 1.0, 4, ",\"length\":2,\"inner\":\"grr\""),
        categories("a", "b", "c", "d"), "");
    MemoryStore store = new MemoryStore();
    Device dev = device(s, store);
    Map<String, Object> first = dev.report(Arrays.asList("b", "a"));
    assertEquals(json(first), json(dev.report(Arrays.asList("a", "b", "a"))));
    assertEquals(json(first), json(device(s, store).report(Arrays.asList("a", "b"))));
  }

  @Test
  void aMultiDeviceTakesAMapOrAList() throws IOException {
    CollectionSpec s = CollectionSpec.parse("{\"id\":\"profile\",\"oracle\":{\"mechanism\":"
        + "\"multi\",\"epsilon\":2.0,\"sample\":1,\"domain_size\":30,\"attributes\":["
        + "{\"name\":\"os\",\"mechanism\":\"grr\",\"domain_size\":3},{\"name\":\"age\","
        + "\"mechanism\":\"pm\",\"domain_size\":10,\"low\":0.0,\"high\":100.0}]},"
        + "\"domain\":{\"kind\":\"attributes\",\"attributes\":[{\"name\":\"os\",\"kind\":"
        + "\"categories\",\"labels\":[\"linux\",\"mac\",\"win\"]},{\"name\":\"age\","
        + "\"kind\":\"interval\",\"low\":0,\"high\":100,\"bins\":10}]}}");
    Device dev = device(s, new MemoryStore());
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("os", "mac");
    m.put("age", 37L);
    Map<String, Object> first = dev.report(m);
    assertEquals(json(first), json(dev.report(Arrays.asList("mac", 39.5))));
    assertEquals(1, ((int[]) first.get("attrs")).length);
    assertNotEquals(null, first.get("os.y"));
  }
}
