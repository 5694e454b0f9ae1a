"""Response models of the query API: what the OpenAPI document promises for each route.

Answers are encoded once per state version and served as bytes (see
:mod:`query_api.service`), so these models document the contract rather than
validate each response; the contract tests (schemathesis) check every response
against them.  Extra fields are allowed: an answer may say more than its model.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ErrorBody", "ErrorResponse", "Answer", "FrequenciesAnswer", "SubsetAnswer",
    "HeavyHittersAnswer", "RangeAnswer", "QuantilesAnswer", "CdfAnswer", "MeanAnswer",
    "HistogramAnswer", "CollectionSummary", "CollectionList", "CollectionDetail",
    "CollectionCreated", "Deleted", "Methods", "Status", "ERRORS", "SeriesAnswer",
]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorBody(_Open):
    status: int = Field(description="HTTP status, repeated")
    message: str = Field(description="what is wrong and what is allowed")
    parameter: str | None = Field(None, description="the parameter at fault, if one is")
    have: int | None = Field(None, description="reports stored (409 not enough reports)")
    need: int | None = Field(None, description="reports needed before answers are served")


class ErrorResponse(BaseModel):
    error: ErrorBody


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error statuses a route really answers."""
    what = {400: "a bad parameter (named in the body)",
            401: "no bearer token, or not a valid one (read tokens on: LDP_READ_TOKENS)",
            403: "a wrong admin token, or admin routes off", 404: "no such collection",
            409: "the collection cannot answer this query, or too few reports yet",
            503: "Redis is unreachable"}
    return {c: {"model": ErrorResponse, "description": what[c]} for c in codes}


ERRORS = errors(400, 404, 409, 503)
"""What every estimate route can answer besides 200."""


class Budget(_Open):
    """The fleet's per-device daily privacy budget, as every answer states it."""

    epsilon_per_day: float | None = Field(description="the fleet's budget per device and UTC "
                                          "day (null: none set)")
    device_epsilon_per_day: float = Field(description="what one device can spend per day "
                                          "over every collection (capped by the budget)")
    collection_epsilon_per_day: float = Field(description="what one device spends per day "
                                              "on this collection")


class Answer(_Open):
    """What every estimate states, besides the estimate itself."""

    collection: str
    fingerprint: str
    mechanism: str
    epsilon: float
    n: int = Field(ge=0, description="reports summed: every report in the range's windows")
    n_effective: float = Field(ge=0, description="the effective sample size behind the "
                               "intervals: n for independent reports, fewer for memoized "
                               "reports of one device in several windows "
                               "(docs/longitudinal.md)")
    windows: int = Field(description="time windows summed")
    since: float | None
    until: float | None
    as_of: str | None = Field(description="time of the last aggregator flush (ISO 8601)")
    state_version: str = Field(description="changes whenever the stored state changes")
    reason: str | None = Field(None, description="why there is no estimate: the range holds "
                               "no report (n = 0; every estimate field is then null or empty)")
    budget: Budget | None = Field(default=None, description="the fleet's privacy budget "
                                  "(GET /v1/fleet)")
    lost_records: int | None = Field(default=None, ge=1, description="records deleted from "
                                     "Kafka before they were counted (absent when none): n "
                                     "misses the reports they held (docs/faults.md)")


class Row(_Open):
    label: str | None = None
    index: int | None = None
    estimate: float
    std_error: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class FrequenciesAnswer(Answer):
    method: str
    confidence: float | None = Field(description="null for an EMS reconstruction (no "
                                     "interval)")
    estimates: list[Row]
    sum: float | None = None


class SubsetAnswer(Answer):
    labels: list[str]
    method: str
    confidence: float | None = Field(description="null for an EMS reconstruction (no "
                                     "interval)")
    estimate: float | None
    std_error: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class HeavyHitter(_Open):
    value: Any
    estimate: float
    std_error: float | None = None


class HeavyHittersAnswer(Answer):
    k: int
    heavy_hitters: list[HeavyHitter]


class RangeAnswer(Answer):
    low: Any
    high: Any
    estimate: float | None
    std_error: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float


class Quantile(_Open):
    q: float
    value: Any = Field(description="null when the range holds no report")


class QuantilesAnswer(Answer):
    quantiles: list[Quantile]


class CdfAnswer(Answer):
    cdf: list[float]
    labels: list[str] | None = None


class MeanAnswer(Answer):
    estimate: float | None
    confidence: float
    std_error: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class HistogramAnswer(Answer):
    bins: list[float]
    labels: list[str] | None = None


class CollectionSummary(_Open):
    id: str
    description: str
    mechanism: str
    epsilon: float
    domain: dict[str, Any]
    domain_size: int
    fingerprint: str
    queries: list[str] = Field(description="the estimate routes this collection answers")


class CollectionList(BaseModel):
    collections: list[CollectionSummary]


class CollectionDetail(CollectionSummary):
    spec: dict[str, Any] = Field(description="the canonical spec devices report with")


class CollectionCreated(BaseModel):
    spec: dict[str, Any]
    created: bool


class Deleted(BaseModel):
    deleted: str


class Methods(BaseModel):
    methods: list[str]
    guideline: dict[str, str]


class Status(BaseModel):
    status: str


class SeriesPoint(_Open):
    start: int
    end: int
    time: str
    n: int = Field(ge=0, description="reports summed in the bucket")
    n_effective: float = Field(ge=0, description="the bucket's effective sample size")
    windows: int
    series: str
    estimate: Any = None
    std_error: float | None = None
    ci_low: Any = None
    ci_high: Any = None
    reason: str | None = None


class SeriesAnswer(_Open):
    collection: str
    kind: str
    method: str
    confidence: float
    window_seconds: int
    bucket_seconds: int
    since: float | None
    until: float | None
    n: int = Field(ge=0, description="reports summed over the whole range")
    n_effective: float = Field(ge=0, description="the whole range's effective sample size")
    series: list[str]
    points: list[SeriesPoint]
