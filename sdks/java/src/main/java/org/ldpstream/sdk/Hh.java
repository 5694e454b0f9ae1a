package org.ldpstream.sdk;

import static org.ldpstream.sdk.Draws.below;
import static org.ldpstream.sdk.Mechanisms.col;
import static org.ldpstream.sdk.Mechanisms.make;
import static org.ldpstream.sdk.Mechanisms.pow;
import static org.ldpstream.sdk.Mechanisms.report;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class Hh extends AbstractOracle {
  final long fanout;
  final int height;
  final List<Oracle> levels = new ArrayList<>();

  Hh(double eps, long d, long fanout, String base) {
    super("hh");
    this.fanout = fanout;
    int h = 1;
    while (pow(fanout, h) < d) {
      h++;
    }
    height = h;
    for (int lv = 1; lv <= h; lv++) {
      Map<String, Object> spec = new LinkedHashMap<>();
      spec.put("mechanism", base);
      spec.put("epsilon", eps);
      spec.put("domain_size", pow(fanout, lv));
      levels.add(make(spec));
    }
    columns.add(col("level", "uint8"));
    columns.addAll(levels.get(h - 1).columns());
  }

  @Override
  public Map<String, Object> perturb(long v, DrawSource src) {
    long level = 1 + below(src, height);
    long node = v / pow(fanout, height - (int) level);
    Map<String, Object> out = report("level", level);
    out.putAll(levels.get((int) level - 1).perturb(node, src));
    return out;
  }
}
