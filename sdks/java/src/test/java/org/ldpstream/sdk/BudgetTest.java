package org.ldpstream.sdk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The fleet's privacy budget on the device: the shared vectors (a sequence of reports with a
 * budget → what each costs, which are made, what the store's ledger holds), and the ledger in
 * the store (shared by Devices, kept across restarts, never naming a value). */
class BudgetTest {
  private static final double DAY = 20000 * 86400.0;

  private static boolean close(double a, double b) {
    return Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(b));
  }

  private static double num(Object o) {
    return ((Number) o).doubleValue();
  }

  @Test
  @SuppressWarnings("unchecked")
  void budgetVectorsGiveThePythonSdksChargesRefusalsAndLedger() throws IOException {
    Map<String, Object> doc = (Map<String, Object>) Json.parse(new String(Files.readAllBytes(
        VectorsTest.vectors().resolve("budget/ledger.json")), StandardCharsets.UTF_8));
    List<Object> cases = (List<Object>) doc.get("cases");
    assertTrue(cases.size() >= 10);
    for (Object o : cases) {
      Map<String, Object> c = (Map<String, Object>) o;
      String name = (String) c.get("name");
      MemoryStore store = new MemoryStore();
      final double[] now = {0};
      List<Device> devs = new ArrayList<>();
      for (Object j : (List<Object>) c.get("collections")) {
        devs.add(Device.builder(CollectionSpec.fromJson(j)).store(store)
            .secret(Hex.decode((String) c.get("secret"))).budget(num(c.get("budget")))
            .clock(() -> now[0]).build());
      }
      int i = 0;
      for (Object so : (List<Object>) c.get("steps")) {
        Map<String, Object> s = (Map<String, Object>) so;
        Device dev = devs.get((int) (long) (Long) s.get("collection"));
        now[0] = num(s.get("now"));
        double cost = dev.cost(s.get("value"));
        assertTrue(close(cost, num(s.get("cost"))), name + " step " + i + ": cost " + cost);
        assertEquals(s.get("made"), dev.message(s.get("value")) != null, name + " step " + i);
        double spent = num(dev.ledger().get("spent"));
        assertTrue(close(spent, num(s.get("spent"))), name + " step " + i + ": spent " + spent);
        i++;
      }
      Map<String, Object> got = store.update(d -> d);
      Map<String, Object> ledger = (Map<String, Object>) got.get("ledger");
      Map<String, Object> want = (Map<String, Object>) c.get("ledger");
      assertEquals(num(want.get("budget")), num(ledger.get("budget")), name);
      Map<String, Object> days = (Map<String, Object>) ledger.get("days");
      Map<String, Object> wantDays = (Map<String, Object>) want.get("days");
      assertEquals(wantDays.keySet(), days.keySet(), name);
      for (Map.Entry<String, Object> d : wantDays.entrySet()) {
        Map<String, Object> cols = (Map<String, Object>) days.get(d.getKey());
        assertEquals(((Map<String, Object>) d.getValue()).keySet(), cols.keySet(), name);
        for (Map.Entry<String, Object> e : ((Map<String, Object>) d.getValue()).entrySet()) {
          assertTrue(close(num(cols.get(e.getKey())), num(e.getValue())), name);
        }
      }
      Map<String, Object> collections = (Map<String, Object>) got.get("collections");
      for (Map.Entry<String, Object> r : ((Map<String, Object>) c.get("reports")).entrySet()) {
        Object counts = ((Map<String, Object>) collections.get(r.getKey())).get("reports");
        assertEquals(r.getValue(), counts == null ? new java.util.LinkedHashMap<>() : counts,
            name);
      }
    }
  }

  static CollectionSpec spec(String id, String memo, double eps) {
    return Specs.collection(id, Specs.oracle("grr", eps, 4, ""),
        Specs.categories("a", "b", "c", "d"), ",\"memoization\":\"" + memo + "\"");
  }

  static Device device(CollectionSpec s, DeviceStore store, Double budget, double[] now) {
    Device.Builder b = Device.builder(s).store(store).clock(() -> now[0]);
    return budget == null ? b.build() : b.budget(budget).build();
  }

  @Test
  void devicesOfAStoreShareItsLedgerAndOneWithoutABudgetObeysTheStoredOne() throws IOException {
    MemoryStore store = new MemoryStore();
    double[] now = {DAY};
    Device a = device(spec("col-a", "none", 1.0), store, 3.0, now);
    Device b = device(spec("col-b", "none", 1.5), store, 3.0, now);
    assertNotNull(a.message("a"));
    assertNotNull(b.message("a"));
    now[0] = DAY + 3600;
    assertNull(a.message("a"));  // 3.5 > 3: b's spend is seen
    Device restarted = device(spec("col-a", "none", 1.0), store, null, now);
    Map<String, Object> l = restarted.ledger();
    assertEquals(3.0, l.get("budget"));
    assertEquals(2.5, l.get("spent"));
    assertNull(restarted.message("a"));
    now[0] = DAY + 86400;
    assertNotNull(restarted.message("a"));
    Device free = device(spec("z", "none", 1.0), new MemoryStore(), null, now);
    assertNull(free.ledger());
    for (int h = 0; h < 30; h++) {
      now[0] = DAY + h * 3600;
      assertNotNull(free.message("a"));
    }
    assertThrows(IllegalArgumentException.class, () -> Device.builder(spec("q", "none", 1))
        .budget(0));
  }

  @Test
  @SuppressWarnings("unchecked")
  void theLedgerNamesNoValueAndRacingThreadsCannotOverspend() throws Exception {
    final MemoryStore store = new MemoryStore();
    final double[] now = {DAY};
    assertNotNull(device(spec("race", "permanent", 1.0), store, 2.5, now).message("c"));
    final AtomicInteger made = new AtomicInteger();
    List<Thread> threads = new ArrayList<>();
    for (int i = 0; i < 8; i++) {  // only one more fits (2.0 <= 2.5)
      final int k = i;
      threads.add(new Thread(() -> {
        try {
          if (device(spec("r" + k, "permanent", 1.0), store, 2.5, now)
              .message("abcd".substring(k % 4, k % 4 + 1)) != null) {
            made.incrementAndGet();
          }
        } catch (IOException e) {
          throw new RuntimeException(e);
        }
      }));
    }
    for (Thread t : threads) {
      t.start();
    }
    for (Thread t : threads) {
      t.join(60000);
    }
    assertEquals(1, made.get());
    Map<String, Object> doc = store.update(d -> d);
    Map<String, Object> entry = (Map<String, Object>) ((Map<String, Object>) doc.get(
        "collections")).get(spec("race", "permanent", 1.0).fingerprint);
    Map<String, Object> counts = (Map<String, Object>) entry.get("reports");
    assertEquals(1, counts.size());
    assertEquals(1L, counts.values().iterator().next());
    for (String tag : new HashSet<>(counts.keySet())) {
      assertTrue(tag.matches("[0-9a-f]{32}"));
    }
  }

  @Test
  void aBadLedgerInTheStoreIsAClearStoreException() throws IOException {
    MemoryStore store = new MemoryStore();
    store.update(d -> d.put("ledger", Json.parse("{\"days\":{\"x\":1}}")));
    StoreException e = assertThrows(StoreException.class,
        () -> device(spec("q", "none", 1.0), store, null, new double[] {DAY}).message("a"));
    assertTrue(e.getMessage().contains("bad ledger"));
  }
}
