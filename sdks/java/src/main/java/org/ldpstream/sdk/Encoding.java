package org.ldpstream.sdk;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Message encoding (docs/wire-format.md §2): the LDPM envelope around an LDPR batch. */
final class Encoding {
  private Encoding() {}

  private static int code(String dtype) {
    switch (dtype) {
      case "uint8": return 0;
      case "uint16": return 1;
      case "uint32": return 2;
      default: throw new IllegalArgumentException("dtype " + dtype);
    }
  }

  private static byte[] ascii(String s) {
    for (int i = 0; i < s.length(); i++) {
      if (s.charAt(i) > 0x7f) {
        throw new IllegalArgumentException("not ASCII: " + s);
      }
    }
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  /** The binary message of a batch of reports of one collection. */
  public static byte[] binary(CollectionSpec spec, List<Column> columns,
                              List<Map<String, Object>> reports) {
    ByteArrayOutputStream head = new ByteArrayOutputStream();
    byte[] id = ascii(spec.id);
    byte[] mech = ascii((String) spec.oracleSpec.get("mechanism"));
    Io.put(head, new byte[] {'L', 'D', 'P', 'M', 1, (byte) id.length});
    Io.put(head, id);
    Io.put(head, ascii(spec.fingerprint));
    Io.put(head, new byte[] {'L', 'D', 'P', 'R', 1, (byte) mech.length});
    Io.put(head, mech);
    Io.put(head, ascii(spec.oracleFingerprint));
    int n = reports.size();
    int body = 0;
    ByteArrayOutputStream table = new ByteArrayOutputStream();
    for (Column c : columns) {
      byte[] nm = ascii(c.name);
      int per = c.perReport();
      table.write(nm.length);
      Io.put(table, nm);
      table.write(code(c.dtype));
      table.write(per & 0xff);
      table.write(per >> 8);
      body += n * per;
    }
    ByteBuffer out = ByteBuffer.allocate(head.size() + 5 + table.size() + body)
        .order(ByteOrder.LITTLE_ENDIAN);
    out.put(head.toByteArray());
    out.putInt(n);
    out.put((byte) columns.size());
    out.put(table.toByteArray());
    for (Column c : columns) {
      int per = c.perReport();
      for (Map<String, Object> r : reports) {
        Object v = r.get(c.name);
        if (c.bits > 0) {
          byte[] mask = new byte[per];
          for (int i : (int[]) v) {
            if (i < 0 || i >= c.bits) {
              throw new IllegalArgumentException("bit " + i + " outside " + c.name);
            }
            mask[i >> 3] |= (byte) (1 << (i & 7));
          }
          out.put(mask);
        } else {
          long x = (Long) v;
          if (per == 1) {
            out.put((byte) x);
          } else if (per == 2) {
            out.putShort((short) x);
          } else {
            out.putInt((int) x);
          }
        }
      }
    }
    return out.array();
  }

  /** JSON records of the reports (ldpcore.wire.to_records): masks as index lists. */
  public static List<Map<String, Object>> records(CollectionSpec spec,
                                                  List<Column> columns,
                                                  List<Map<String, Object>> reports) {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Map<String, Object> r : reports) {
      Map<String, Object> rec = new LinkedHashMap<>();
      rec.put("mechanism", spec.oracleSpec.get("mechanism"));
      rec.put("fingerprint", spec.oracleFingerprint);
      for (Column c : columns) {
        Object v = r.get(c.name);
        if (v instanceof int[]) {
          List<Long> l = new ArrayList<>();
          for (int i : (int[]) v) {
            l.add((long) i);
          }
          v = l;
        }
        rec.put(c.name, v);
      }
      out.add(rec);
    }
    return out;
  }

  /** The JSON message text, byte for byte as ldpcore's {@code encode_message(..., "json")}. */
  public static String json(CollectionSpec spec, List<Column> columns,
                            List<Map<String, Object>> reports) {
    Map<String, Object> msg = new LinkedHashMap<>();
    msg.put("collection", spec.id);
    msg.put("fingerprint", spec.fingerprint);
    msg.put("reports", records(spec, columns, reports));
    return Json.write(msg);
  }

  /** Frame binary messages for {@code application/x-ldp-frames} (u32 LE length prefixes). */
  public static byte[] frames(List<byte[]> messages) {
    int total = 0;
    for (byte[] m : messages) {
      total += 4 + m.length;
    }
    ByteBuffer out = ByteBuffer.allocate(total).order(ByteOrder.LITTLE_ENDIAN);
    for (byte[] m : messages) {
      out.putInt(m.length);
      out.put(m);
    }
    return out.array();
  }

  /** Records back into reports (masks as int[]), e.g. from a memo file. */
  @SuppressWarnings("unchecked")
  static Map<String, Object> fromRecord(List<Column> columns, Map<String, Object> rec) {
    Map<String, Object> r = new LinkedHashMap<>();
    for (Column c : columns) {
      Object v = rec.get(c.name);
      if (c.bits > 0) {
        List<Object> l = (List<Object>) v;
        int[] a = new int[l.size()];
        for (int i = 0; i < a.length; i++) {
          a[i] = ((Number) l.get(i)).intValue();
        }
        r.put(c.name, a);
      } else {
        r.put(c.name, ((Number) v).longValue());
      }
    }
    return r;
  }
}
