"""query_api.schemas: the response models the OpenAPI document promises."""

from __future__ import annotations

from query_api.schemas import ERRORS, ErrorResponse, FrequenciesAnswer, errors


def test_error_entries_describe_each_status_with_the_error_model() -> None:
    out = errors(401, 503)
    assert set(out) == {401, 503}
    assert out[503]["model"] is ErrorResponse and "Redis" in out[503]["description"]
    assert set(ERRORS) == {400, 404, 409, 503}


def test_models_parse_an_error_and_allow_extra_fields_in_answers() -> None:
    err = ErrorResponse.model_validate({"error": {"status": 409, "message": "few",
                                                  "have": 3, "need": 100}})
    assert (err.error.have, err.error.need, err.error.parameter) == (3, 100, None)
    schema = FrequenciesAnswer.model_json_schema()
    assert schema.get("additionalProperties", True) is not False
