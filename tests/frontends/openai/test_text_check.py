"""Text that is not Unicode (a lone UTF-16 surrogate, which JSON can spell) is a 400
naming the field, on every surface, before anything is tokenized or sent to Triton."""

import pytest

MSG = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("path, body, param", [
    ("/v1/responses", '{"model": "llm", "input": "hi", "instructions": "\\ud800"}',
     "instructions"),
    ("/v1/responses", '{"model": "llm", "input": "hi", "instructions": "a\\udfffb", '
                      '"stream": true}', "instructions"),
    ("/v1/responses", '{"model": "llm", "input": "\\ud800"}', "input"),
    ("/v1/responses", '{"model": "llm", "input": [{"role": "user", "content": '
                      '[{"type": "input_text", "text": "\\udc00"}]}]}',
     "input[0].content[0].text"),
    ("/v1/chat/completions", '{"model": "llm", "messages": [{"role": "user", '
                             '"content": "\\ud800"}], "stream": true}', "messages[0].content"),
    ("/v1/chat/completions", '{"model": "llm", "messages": [{"role": "user", "content": "a", '
                             '"name": "\\ud83d"}]}', "messages[0].name"),
    ("/v1/completions", '{"model": "llm", "prompt": ["a", "\\ud800"]}', "prompt[1]"),
    ("/v1/completions", '{"model": "llm", "prompt": "a", "stop": ["\\ud800"]}', "stop[0]"),
    ("/v1/completions", '{"model": "llm", "prompt": "a", "extra": {"\\ud800": 1}}',
     "extra.\\ud800"),  # the key itself, escaped
    ("/v1/embeddings", '{"model": "embed", "input": "\\ud800"}', "input"),
    ("/tokenize", '{"model": "llm", "prompt": "\\ud800"}', "prompt"),
])
def test_a_lone_surrogate_is_a_400_naming_the_field(client, triton, path, body, param):
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error"
    assert "lone UTF-16 surrogate" in err["message"]
    assert triton.requests == []


def test_a_surrogate_pair_is_one_character_and_fine(client, triton):
    r = client.post("/v1/responses", headers={"content-type": "application/json"},
                    content='{"model": "llm", "input": "hi", "instructions": "\\ud83d\\ude00", '
                            '"max_output_tokens": 1}')
    assert r.status_code == 200, r.text
    assert r.json()["instructions"] == "\U0001f600"
