package org.ldpstream.sdk;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Device: memoization, cadence and persistence as the Python SDK (producer/sdk.py). */
class DeviceTest {
  static CollectionSpec spec(String extra) {
    return CollectionSpec.parse("{\"id\":\"os\",\"oracle\":{\"mechanism\":\"grr\",\"epsilon\":1.0,"
        + "\"domain_size\":3},\"domain\":{\"kind\":\"categories\",\"labels\":[\"linux\",\"mac\","
        + "\"win\"]}" + extra + "}");
  }

  @Test
  void permanentMemoizationResendsTheSameAnswer() throws IOException {
    Device dev = new Device(spec(""));
    Map<String, Object> first = dev.report("mac");
    for (int i = 0; i < 50; i++) {
      assertEquals(first, dev.report("mac"));
    }
  }

  @Test
  void memoizationNoneDrawsAFreshAnswerPerReport() throws IOException {
    Device dev = new Device(spec(",\"memoization\":\"none\""));
    Set<Object> seen = new HashSet<>();
    for (int i = 0; i < 200; i++) {
      seen.add(dev.report("mac").get("y"));
    }
    assertEquals(3, seen.size()); // P(a value never drawn in 200) < 1e-20
  }

  @Test
  void twoLevelReRandomizesEveryReport() throws IOException {
    CollectionSpec s = CollectionSpec.parse("{\"id\":\"tl\",\"oracle\":{\"mechanism\":\"oue\","
        + "\"epsilon\":4.0,\"domain_size\":16},\"domain\":{\"kind\":\"integers\",\"low\":0,"
        + "\"high\":15},\"memoization\":\"two-level\",\"epsilon_1\":1.0}");
    Device dev = new Device(s);
    Set<String> seen = new HashSet<>();
    for (int i = 0; i < 20; i++) {
      seen.add(java.util.Arrays.toString((int[]) dev.report(3L).get("bits")));
    }
    assertTrue(seen.size() > 1);
  }

  @Test
  void theCadenceAllowsReportsPerWindowMessages() throws IOException {
    double[] now = {120.0};
    Device dev = new Device(spec(",\"reports_per_window\":2,\"window_seconds\":60"), null, null,
        () -> now[0]);
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
  void aDeviceOnTheSameMemoFileNeitherRedrawsNorReportsTwice(@TempDir Path dir)
      throws IOException {
    Path memo = dir.resolve("memo.json");
    Device a = new Device(spec(""), null, memo, () -> 7200.5);
    byte[] msg = a.message("win");
    assertNotNull(msg);
    Device b = new Device(spec(""), null, memo, () -> 7300.0);
    assertNull(b.message("win"));
    assertEquals(a.report("win"), b.report("win"));
    String text = new String(Files.readAllBytes(memo));
    assertTrue(text.contains("\"format\":\"ldpstream-device-memo\""), text);
    assertTrue(text.contains(spec("").fingerprint), text);
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
      assertTrue(Math.abs(c - n / 16.0) < 6 * sd, java.util.Arrays.toString(counts));
    }
    long[] fixed = {0xFFFFFFFFL, 0xFFFFFFFFL};
    assertEquals(1 - Math.pow(2, -53), Draws.uniform(new WordStream(fixed)));
    WordStream ws = new WordStream(new long[] {0xFFFFFFFFL, 10});
    assertEquals(1, Draws.below(ws, 3));
    assertEquals(2, ws.used());
    assertArrayEquals(new long[] {2096804712593481934L},
        new long[] {Mechanisms.pcg64Words(12345, 1)[0] >>> 1});
  }

  @Test
  void aSetValuedDeviceMemoizesPerSetKeyedAsThePythonSdk(@TempDir Path dir) throws IOException {
    CollectionSpec s = CollectionSpec.parse("{\"id\":\"apps\",\"oracle\":{\"mechanism\":"
        + "\"ps\",\"epsilon\":1.0,\"domain_size\":4,\"length\":2,\"inner\":\"grr\"},"
        + "\"domain\":{\"kind\":\"categories\",\"labels\":[\"a\",\"b\",\"c\",\"d\"]}}");
    Path memo = dir.resolve("memo.json");
    Device dev = new Device(s, null, memo, null);
    Map<String, Object> first = dev.report(java.util.Arrays.asList("b", "a"));
    assertEquals(first, dev.report(java.util.Arrays.asList("a", "b", "a")));
    assertTrue(new String(Files.readAllBytes(memo)).contains("\"-4\":"));
    assertEquals(first, new Device(s, null, memo, null).report(java.util.Arrays.asList("a", "b")));
  }

  @Test
  void aMultiDeviceTakesAMapOrAListKeyedByTheMixedRadix(@TempDir Path dir) throws IOException {
    CollectionSpec s = CollectionSpec.parse("{\"id\":\"profile\",\"oracle\":{\"mechanism\":"
        + "\"multi\",\"epsilon\":2.0,\"sample\":1,\"domain_size\":30,\"attributes\":["
        + "{\"name\":\"os\",\"mechanism\":\"grr\",\"domain_size\":3},{\"name\":\"age\","
        + "\"mechanism\":\"pm\",\"domain_size\":10,\"low\":0.0,\"high\":100.0}]},"
        + "\"domain\":{\"kind\":\"attributes\",\"attributes\":[{\"name\":\"os\",\"kind\":"
        + "\"categories\",\"labels\":[\"linux\",\"mac\",\"win\"]},{\"name\":\"age\","
        + "\"kind\":\"interval\",\"low\":0,\"high\":100,\"bins\":10}]}}");
    Path memo = dir.resolve("memo.json");
    Device dev = new Device(s, null, memo, null);
    Map<String, Object> m = new java.util.LinkedHashMap<>();
    m.put("os", "mac");
    m.put("age", 37L);
    Map<String, Object> first = dev.report(m);
    assertEquals(first, dev.report(java.util.Arrays.asList("mac", 39.5)));
    assertTrue(new String(Files.readAllBytes(memo)).contains("\"13\":"));
    assertEquals(1, ((int[]) first.get("attrs")).length);
  }
}
