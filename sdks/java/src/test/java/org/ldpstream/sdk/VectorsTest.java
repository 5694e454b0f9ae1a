package org.ldpstream.sdk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** The shared test vectors (sdks/vectors, generated from ldpcore) pass byte for byte. */
class VectorsTest {
  static Path vectors() {
    String dir = System.getProperty("ldp.vectors");
    if (dir != null) {
      return Paths.get(dir);
    }
    Path p = Paths.get("").toAbsolutePath();
    while (p != null && !Files.isDirectory(p.resolve("sdks/vectors"))
        && !Files.isDirectory(p.resolve("vectors"))) {
      p = p.getParent();
    }
    if (p == null) {
      throw new IllegalStateException("sdks/vectors not found: set -Dldp.vectors");
    }
    return Files.isDirectory(p.resolve("vectors")) ? p.resolve("vectors") : p.resolve("sdks/vectors");
  }

  @SuppressWarnings("unchecked")
  static List<Map<String, Object>> cases() throws IOException {
    List<Map<String, Object>> out = new ArrayList<>();
    try (Stream<Path> files = Files.list(vectors())) {
      for (Path f : files.filter(x -> x.toString().endsWith(".json")).sorted()
          .collect(Collectors.toList())) {
        Map<String, Object> doc = (Map<String, Object>) Json.parse(
            new String(Files.readAllBytes(f), StandardCharsets.UTF_8));
        for (Object c : (List<Object>) doc.get("cases")) {
          out.add((Map<String, Object>) c);
        }
      }
    }
    return out;
  }

  static String hex(byte[] b) {
    StringBuilder s = new StringBuilder();
    for (byte x : b) {
      s.append(String.format("%02x", x & 0xff));
    }
    return s.toString();
  }

  @SuppressWarnings("unchecked")
  static void check(Map<String, Object> c) {
    CollectionSpec spec = CollectionSpec.fromJson(c.get("collection"));
    assertEquals(c.get("canonical"), Canonical.json(spec.canonical()));
    assertEquals(c.get("fingerprint"), spec.fingerprint);
    assertEquals(c.get("oracle_fingerprint"), spec.oracleFingerprint);
    List<Object> inputs = (List<Object>) c.get("inputs");
    List<Object> values = (List<Object>) c.get("values");
    List<long[]> rows = new ArrayList<>();
    for (int i = 0; i < inputs.size(); i++) {
      long[] got = spec.setValued() ? spec.indexSet((List<Object>) inputs.get(i))
          : "attributes".equals(spec.domainKind) ? spec.attributeIndices(inputs.get(i))
          : new long[] {spec.index(inputs.get(i))};
      Object want = values.get(i);
      assertEquals(want instanceof List ? want : Collections.singletonList(want),
          Arrays.stream(got).boxed().collect(Collectors.toList()));
      rows.add(got);
    }
    List<Object> w = (List<Object>) c.get("words");
    long[] words = new long[w.size()];
    for (int i = 0; i < words.length; i++) {
      words[i] = (Long) w.get(i);
    }
    WordStream src = new WordStream(words);
    Oracle oracle = spec.oracle();
    List<Map<String, Object>> reports = new ArrayList<>();
    for (long[] v : rows) {
      reports.add(oracle.perturbItems(v, src));
    }
    if (c.containsKey("permanent")) {
      assertEquals(c.get("permanent"), Encoding.records(spec, oracle.columns(), reports));
      Rerandomizer inst = Mechanisms.rerandomizer(oracle, spec.epsilon1);
      List<Map<String, Object>> again = new ArrayList<>();
      for (Map<String, Object> r : reports) {
        again.add(inst.rerandomize(r, src));
      }
      reports = again;
    }
    assertEquals(words.length, src.used());
    assertEquals(c.get("reports"), Encoding.records(spec, oracle.columns(), reports));
    assertEquals(c.get("message_binary"), hex(Encoding.binary(spec, oracle.columns(), reports)));
    assertEquals(c.get("message_json"), Encoding.json(spec, oracle.columns(), reports));
    if (c.containsKey("phases")) {
      for (Object o : (List<Object>) c.get("phases")) {
        Map<String, Object> row = (Map<String, Object>) o;
        String h = (String) row.get("secret");
        try {
          Device dev = Device.builder(spec).store(new MemoryStore()).clock(() -> 0.0)
              .secret(Hex.decode(h)).build();
          assertEquals(row.get("takes_part"), dev.takesPart(), "secret " + h);
          assertEquals(row.get("takes_part"), dev.message(inputs.get(0)) != null);
        } catch (IOException e) {
          throw new AssertionError(e);
        }
      }
    }
  }

  /** The check of one vector case. */
  interface CaseCheck {
    void check(Map<String, Object> c) throws Exception;
  }

  /** One dynamic test per case, named {@code prefix} and the case's name. */
  static List<DynamicTest> each(String prefix, List<Map<String, Object>> cases,
      CaseCheck check) {
    List<DynamicTest> out = new ArrayList<>();
    for (Map<String, Object> c : cases) {
      out.add(DynamicTest.dynamicTest(prefix + " " + c.get("name"), () -> check.check(c)));
    }
    return out;
  }

  @TestFactory
  List<DynamicTest> everyVectorPasses() throws IOException {
    return each("vector", cases(), VectorsTest::check);
  }

  @SuppressWarnings("unchecked")
  static List<Map<String, Object>> permanentCases() throws IOException {
    Path f = vectors().resolve("permanent").resolve("permanent.json");
    Map<String, Object> doc = (Map<String, Object>) Json.parse(
        new String(Files.readAllBytes(f), StandardCharsets.UTF_8));
    return (List<Map<String, Object>>) (List<?>) doc.get("cases");
  }

  /** The permanent answers a device secret derives (HMAC-SHA256), byte for byte. */
  @SuppressWarnings("unchecked")
  static void checkPermanent(Map<String, Object> c) throws IOException {
    CollectionSpec spec = CollectionSpec.fromJson(c.get("collection"));
    byte[] secret = Hex.decode((String) c.get("secret"));
    PermanentWords words = new PermanentWords(secret, spec.fingerprint,
        (String) ((List<Object>) c.get("keys")).get(0));
    for (Object w : (List<Object>) c.get("words")) {
      assertEquals(((Long) w).longValue(), words.nextU32());
    }
    Device dev = Device.builder(spec).store(new MemoryStore()).secret(secret).build();
    List<Map<String, Object>> reports = new ArrayList<>();
    for (Object x : (List<Object>) c.get("inputs")) {
      reports.add(dev.permanent(x));
    }
    Oracle oracle = spec.oracle();
    assertEquals(c.get("permanent"), Encoding.records(spec, oracle.columns(), reports));
    assertEquals(c.get("message_binary"), hex(Encoding.binary(spec, oracle.columns(), reports)));
    assertEquals(c.get("message_json"), Encoding.json(spec, oracle.columns(), reports));
  }

  @TestFactory
  List<DynamicTest> everyPermanentVectorPasses() throws IOException {
    return each("permanent", permanentCases(), VectorsTest::checkPermanent);
  }

  @Test
  void theSdkCarriesLdpcoresRanges() throws IOException {
    Path f = vectors().resolve("limits").resolve("limits.json");
    assertEquals(Json.parse(new String(Files.readAllBytes(f), StandardCharsets.UTF_8)),
        Limits.DATA);
  }

  @Test
  @SuppressWarnings("unchecked")
  void aSpecWhoseServedFingerprintDiffersIsRefused() throws IOException {
    Map<String, Object> raw = new LinkedHashMap<>(
        (Map<String, Object>) cases().get(0).get("collection"));
    raw.put("min_reports", 101L);
    SpecException e = assertThrows(SpecException.class, () -> CollectionSpec.fromJson(raw));
    assertEquals("fingerprint", e.parameter());
  }

  @Test
  void pythonFloatReprIsReproduced() {
    assertEquals("1.0", Canonical.pyFloat(1.0));
    assertEquals("0.1", Canonical.pyFloat(0.1));
    assertEquals("1e-05", Canonical.pyFloat(1e-5));
    assertEquals("0.0001", Canonical.pyFloat(1e-4));
    assertEquals("1e+16", Canonical.pyFloat(1e16));
    assertEquals("1234567890123456.0", Canonical.pyFloat(1234567890123456.0));
    assertEquals("-2.5e-300", Canonical.pyFloat(-2.5e-300));
    assertEquals("0.30000000000000004", Canonical.pyFloat(0.1 + 0.2));
    assertEquals("5e-324", Canonical.pyFloat(Double.MIN_VALUE));
  }
}
