package org.ldpstream.sdk;

import java.util.ArrayList;
import java.util.List;

abstract class AbstractOracle implements Oracle {
  final String mechanism;
  final List<Column> columns = new ArrayList<>();

  AbstractOracle(String mechanism) {
    this.mechanism = mechanism;
  }

  @Override
  public String mechanism() {
    return mechanism;
  }

  @Override
  public List<Column> columns() {
    return columns;
  }
}
