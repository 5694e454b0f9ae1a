package org.ldpstream.sdk;

import static org.ldpstream.sdk.Mechanisms.integer;
import static org.ldpstream.sdk.Mechanisms.make;
import static org.ldpstream.sdk.Mechanisms.sampleQuestions;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** multi: {@code sample} of the attributes (and pairs) per report, each at eps/k. */
@SuppressWarnings("unchecked")
final class Multi extends AbstractOracle {
  final List<String> names = new ArrayList<>();
  final List<Oracle> subs = new ArrayList<>();
  final long[] radix;
  final int[][] pairs;
  final int sample;

  Multi(double eps, Map<String, Object> spec) {
    super("multi");
    Object a = spec.get("attributes");
    Object p = spec.get("pairs") == null ? new ArrayList<Object>() : spec.get("pairs");
    if (!(a instanceof List) || !(p instanceof List)) {
      throw new IllegalArgumentException(
          "oracle.attributes (and pairs) must be lists of oracle specs");
    }
    sample = (int) integer(spec, "sample", 1);
    List<Map<String, Object>> attrs = (List<Map<String, Object>>) a;
    List<Map<String, Object>> ps = (List<Map<String, Object>>) p;
    for (Map<String, Object> at : attrs) {
      names.add((String) at.get("name"));
      subs.add(sub(at, eps / sample));
    }
    radix = new long[attrs.size()];
    for (int j = 0; j < radix.length; j++) {
      radix[j] = ((Number) attrs.get(j).get("domain_size")).longValue();
    }
    pairs = new int[ps.size()][];
    for (int i = 0; i < pairs.length; i++) {
      List<String> ab = (List<String>) ps.get(i).get("attributes");
      pairs[i] = new int[] {names.indexOf(ab.get(0)), names.indexOf(ab.get(1))};
    }
    for (Map<String, Object> pr : ps) {
      List<String> ab = (List<String>) pr.get("attributes");
      names.add(ab.get(0) + "*" + ab.get(1));
      subs.add(sub(pr, eps / sample));
    }
    columns.add(new Column("attrs", "uint8", names.size()));
    for (int j = 0; j < names.size(); j++) {
      for (Column c : subs.get(j).columns()) {
        columns.add(new Column(names.get(j) + "." + c.name, c.dtype, c.bits));
      }
    }
  }

  private static Oracle sub(Map<String, Object> spec, double eps) {
    Map<String, Object> m = new LinkedHashMap<>(spec);
    m.remove("name");
    m.remove("attributes");
    m.put("epsilon", eps);
    return make(m);
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    long[] row = new long[radix.length];
    for (int j = radix.length - 1; j >= 0; j--) {
      row[j] = v % radix[j];
      v /= radix[j];
    }
    return perturbItems(row, src);
  }

  @Override
  public Map<String, Object> perturbItems(long[] row, DrawSource src) {
    if (row.length != radix.length) {
      throw new IllegalArgumentException("a multi value needs " + radix.length + " indices");
    }
    for (int j = 0; j < row.length; j++) {
      if (row[j] < 0 || row[j] >= radix[j]) {
        throw new IllegalArgumentException("attribute " + names.get(j) + ": index "
            + row[j] + " outside [0, " + radix[j] + ")");
      }
    }
    long[] vals = Arrays.copyOf(row, names.size());
    for (int i = 0; i < pairs.length; i++) {
      vals[row.length + i] = row[pairs[i][0]] * radix[pairs[i][1]] + row[pairs[i][1]];
    }
    int[] chosen = sampleQuestions(src, names.size(), sample);
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("attrs", chosen);
    for (int j = 0; j < names.size(); j++) {
      Oracle o = subs.get(j);
      Map<String, Object> rep = Arrays.binarySearch(chosen, j) >= 0
          ? o.perturb(vals[j], src) : null;
      for (Column c : o.columns()) {
        out.put(names.get(j) + "." + c.name, rep != null ? rep.get(c.name)
            : c.bits > 0 ? new int[0] : (Object) 0L);
      }
    }
    return out;
  }
}
